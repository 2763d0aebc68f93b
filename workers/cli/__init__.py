"""The command line and operations: `trawl` subcommands, the local worker pool and crawl bootstrap,
the progress bar, Flower, and the crawl-load diagnosis."""

from workers.cli.main import main

__all__ = ["main"]
