"""Summarize a py-spy raw (collapsed stacks) file: time by pipeline stage and top functions.

    python bench/profile_summary.py worker.raw > bench/profiles/NAME.txt

A stack is charged to the first stage (innermost frame first) whose pattern matches one of its
frames, so socket waits inside requests count as "fetch". Idle = threads parked in queues/sleeps.
"""

from __future__ import annotations

import sys
from collections import Counter

# (stage, substrings of a frame "func (file:line)"), checked innermost frame first, in order.
STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("idle (thread waits, queue get, sleep)", ("wait (threading.py", "get (queue.py",
                                               "_wait_for_tstate_lock", "select (selectors.py",
                                               "poll (selectors.py", "sleep")),
    ("warc write (gzip)", ("warcio", "warc.py", "warc_records.py", "gzip", "zlib")),
    ("robots (policy, rules)", ("protego", "robots.py", "robots_rules.py")),
    ("near-duplicate check (text, shingles, MinHash, LSH)", ("dedup/",)),
    ("parse (lxml)", ("parse.py", "lxml")),
    ("canonicalize (ada-url + rules)", ("urls.py", "ada_url", "scope.py")),
    ("bloom/url hash", ("bloom.py", "xxhash")),
    ("redis client (frontier scripts, pipelines)", ("redis/", "frontier/")),
    ("fetch (requests/urllib3/http.client/socket)", ("requests/", "urllib3", "http/client.py",
                                                     "socket.py", "ssl.py", "workers/fetch/")),
    ("dns", ("workers/dns/", "dns/resolver", "dnspython")),
    ("celery/kombu overhead", ("celery/", "kombu/", "billiard/", "vine/")),
    ("json/records", ("json/", "RecordWriter")),
    ("pipeline glue", ("pipeline/lease.py", "pipeline.py", "tasks.py", "runtime/")),
]


def summarize(raw: str, header: str = "") -> str:
    stage_n: Counter[str] = Counter()
    self_n: Counter[str] = Counter()
    thread_n: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        thread_n[frames[0]] += n
        self_n[frames[-1]] += n
        for frame in reversed(frames):
            hit = next((s for s, pats in STAGES if any(p in frame for p in pats)), None)
            if hit:
                stage_n[hit] += n
                break
        else:
            stage_n["other"] += n
    busy = total - stage_n["idle (thread waits, queue get, sleep)"]
    out = [header.rstrip(), "", f"samples: {total} (all threads); non-idle: {busy}", "",
           "stage (innermost matching frame)                       % of non-idle   % of all"]
    for stage, n in stage_n.most_common():
        share = f"{100 * n / busy:6.1f}%" if "idle" not in stage and busy else "      -"
        out.append(f"  {stage:<55} {share}   {100 * n / max(1, total):6.1f}%")
    out += ["", "top 25 leaf frames (self samples, % of all):"]
    for frame, n in self_n.most_common(25):
        out.append(f"  {100 * n / max(1, total):5.1f}%  {frame[:140]}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(summarize(open(sys.argv[1]).read()), end="")
