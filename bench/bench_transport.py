"""The admin transport's client CPU a request, against the real `pulsar-txn engine serve`.

    python -m bench transport [--requests=N] [--rounds=R]

Builds an engine (a small workload), serves it (bench_serve.ServedEngine), and sends the same GET
(coordinatorStats, JSON decoded) one at a time, N requests (default 3,000) in R rounds (default 5) where the ways
take turns, so that a server or machine that slows down weighs on each alike. The ways:

- pycurl: one libcurl easy handle reused, a write callback into a list, json.loads: the floor for libcurl.
- http.client: the standard library's client and json.loads.
- PulsarAdmin: the tool's whole admin layer (transport/http_client.py on transport/http_pool.py: headers, retries,
  redirects, error sentences, the JSON decoded).

Printed: CPU ms and wall ms a request (the median of the rounds) and PulsarAdmin's CPU as a multiple of pycurl's.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from bench.bench_serve import PATH, ServedEngine, build
from bench.pycurl_floor import bare_pycurl


def ways(url: str):
    from pulsar_txn_cli.admin import connect
    from pulsar_txn_cli.target.settings import TargetFlags

    bare = bare_pycurl(url + PATH)
    split = urlsplit(url)
    stdlib = http.client.HTTPConnection(split.hostname, split.port)

    def plain() -> None:
        stdlib.request("GET", PATH, headers={"Accept": "application/json"})
        json.loads(stdlib.getresponse().read())

    admin = connect(TargetFlags(admin_url=url))
    found = {"pycurl": bare, "http.client": plain, "PulsarAdmin": admin.coordinator_stats}

    def close() -> None:
        bare.close()
        stdlib.close()
        admin.close()

    return found, close


def measure(url: str, requests: int, rounds: int) -> dict:
    calls, close = ways(url)
    each = max(1, requests // rounds)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in calls}
    try:
        for call in calls.values():
            call()  # the connection opened, untimed
        for _ in range(rounds):
            for name, call in calls.items():
                wall, cpu = time.perf_counter(), time.process_time()
                for _ in range(each):
                    call()
                samples[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    finally:
        close()
    return {
        name: {
            "cpuMs": 1000 * statistics.median(c for _, c in got) / each,
            "wallMs": 1000 * statistics.median(w for w, _ in got) / each,
        }
        for name, got in samples.items()
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench transport")
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp, "engine"), 4)
        with ServedEngine(Path(tmp, "engine"), Path(tmp, "serve.log")) as served:
            costs = measure(served.url, args.requests, args.rounds)
    print(f"  {'way':<12} {'CPU ms/req':>10} {'wall ms/req':>11}")
    for name, cost in costs.items():
        print(f"  {name:<12} {cost['cpuMs']:>10.3f} {cost['wallMs']:>11.3f}")
    ratio = costs["PulsarAdmin"]["cpuMs"] / costs["pycurl"]["cpuMs"]
    print(
        f"  PulsarAdmin's CPU a request: {ratio:.2f}x pycurl's bare loop ({args.requests} requests, {args.rounds} rounds)"
    )
