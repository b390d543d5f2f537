"""The libcurl floor: what a bare pycurl client costs, with nothing of the tool's admin layer above it.

- `bare_pycurl(url)`: one reused easy handle GETting a URL and decoding its JSON (bench_transport's one request
  at a time, bench_fleet's `one request at a time` line);
- `pycurl_floor(url, requests, concurrency)`: a fleet command's GETs replayed through `concurrency` threads, each
  with its own bare handle kept alive, as the tool's thread pool of easy handles runs them (libcurl releases the
  GIL while it performs). bench_fleet.py times a command's wall against it, in process and as a process of its
  own (`python bench/pycurl_floor.py URL REQUESTS.json CONCURRENCY`, printing {"seconds", "differs"}): start-up
  included, as the command pays it. Imports only the standard library and pycurl, so that process pays no more.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time


def bare_pycurl(full_url: str):
    """One reused pycurl handle GETting full_url (or the URL it is called with) and decoding its JSON, nothing else.
    Returns the answer's status (an answer that is not JSON, Prometheus text or an error page, is only read)."""
    import pycurl

    curl = pycurl.Curl()
    curl.setopt(pycurl.URL, full_url)
    curl.setopt(pycurl.HTTPHEADER, ["Accept: application/json"])
    parts: list[bytes] = []
    curl.setopt(pycurl.WRITEFUNCTION, parts.append)

    def bare(url: str | None = None) -> int:
        if url is not None:
            curl.setopt(pycurl.URL, url)
        parts.clear()
        curl.perform()
        with contextlib.suppress(ValueError):
            json.loads(b"".join(parts))
        return curl.getinfo(pycurl.RESPONSE_CODE)

    bare.close = curl.close  # the handle's connection, closed by its caller
    return bare


def pycurl_floor(url: str, requests: list[tuple], concurrency: int) -> tuple[float, int]:
    """The GETs of `requests` ((method, path, status, ms) as the broker logged them) replayed through `concurrency`
    bare handles at once: (seconds, answers whose status differs from the logged one)."""
    gets = [r for r in requests if r[0] == "GET"]
    queue = list(reversed(gets))
    lock = threading.Lock()
    differs = [0]
    handles = [bare_pycurl(url) for _ in range(max(1, min(concurrency, len(gets))))]

    def worker(bare) -> None:
        while True:
            with lock:
                if not queue:
                    return
                _, path, status, _ms = queue.pop()
            if bare(url + path) != status:
                with lock:
                    differs[0] += 1

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(h,)) for h in handles]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    for h in handles:
        h.close()
    return seconds, differs[0]


if __name__ == "__main__":
    target, paths, width = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(paths) as f:
        replayed = [("GET", path, status, 0) for path, status in json.load(f)]
    took, off = pycurl_floor(target, replayed, width)
    print(json.dumps({"seconds": took, "differs": off}))
