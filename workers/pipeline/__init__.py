"""The stages one URL goes through on a worker: DNS, robots.txt, the fetch (workers/fetch),
soft-404 probing, parsing, and the lease pipeline that runs them in order."""
