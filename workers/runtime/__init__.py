"""A worker process's runtime: its context (clients, caches, writers), the fetch engine that keeps
fetches in flight, and the write-back of finished URLs."""
