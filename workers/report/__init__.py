"""After a crawl: its records as a table (``trawl export``) and as one HTML report with plots
(``trawl report``), both read from the output directory alone."""

from workers.report.records import CrawlRecords, load_records

__all__ = ["CrawlRecords", "load_records"]
