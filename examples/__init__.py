"""Example plug-in components for Trawl (docs/components.md), installed with the package:
``examples.sqlite_pages.SqlitePages`` (a page pipeline into SQLite) and
``examples.path_filter.PathFilter`` (a URL filter by path pattern or file extension)."""
