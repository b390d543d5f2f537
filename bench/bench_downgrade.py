"""`downgrade check` against `engine serve --latency-ms 20`: default concurrency vs --concurrency 1.

16 coordinators and about 1,000 transactional subscriptions (target: the default-concurrency
check takes at most a tenth of the sequential one). Also counts the requests the check sends,
and the calls PIP-160's manual procedure needs for the same cluster.

    python -m bench downgrade [--subscriptions N] [--latency-ms MS] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def build(directory: Path, coordinators: int, subscriptions: int) -> None:
    """An engine with batching used, then disabled and reloaded (step 1 passes)."""
    from pulsar_txn_cli.engine.broker import Engine
    from pulsar_txn_cli.engine.simulate import SimOptions, simulate

    engine = Engine.init(directory, coordinators=coordinators)
    try:
        # Each transaction acks 1-2 random subscriptions: enough transactions reach nearly all.
        simulate(
            engine,
            SimOptions(
                transactions=subscriptions * 4,
                topics=max(1, subscriptions // 10),
                subscriptions=subscriptions,
                concurrency=200,
                seed=7,
            ),
        )
    finally:
        engine.close()


def timed_check(url: str, concurrency: int, checkpoint: Path) -> tuple[float, object]:
    from pulsar_txn_cli.admin import connect
    from pulsar_txn_cli.target.settings import TargetFlags
    from pulsar_txn_cli.downgrade import runner

    admin = connect(TargetFlags(admin_url=url))
    try:
        checkpoint.unlink(missing_ok=True)
        start = time.perf_counter()
        result = runner.check(admin, checkpoint, concurrency=concurrency)
        return time.perf_counter() - start, result
    finally:
        admin.close()


def manual_calls(observations) -> dict:
    """pulsar-admin calls of PIP-160's procedure for this cluster, done once to record and once to
    confirm (the minimum: in practice step 2-7 is repeated until it passes)."""
    brokers = len(observations.brokers)
    tcs = len(observations.coordinators)
    subs = len(observations.subscriptions)
    namespaces = {s.topic.split("://", 1)[-1].rsplit("/", 1)[0] for s in observations.subscriptions}
    tenants = {ns.split("/")[0] for ns in namespaces}
    step1 = 1 + brokers  # get-all-dynamic-config, get-runtime-config on every broker
    lookup = 1 + tcs  # partitioned-lookup: the partition count, then one lookup per partition
    discovery = 1 + len(tenants) + len(namespaces)  # tenants list, namespaces list, namespaces topics -ist
    ledgers = tcs + subs  # coordinator-internal-stats, pending-ack-internal-stats
    once = step1 + lookup + discovery + ledgers
    return {
        "perCheck": once,
        "recordAndConfirm": 2 * once,
        "coordinators": tcs,
        "subscriptions": subs,
        "brokers": brokers,
        "namespaces": len(namespaces),
    }


class served_engine:
    """`engine serve` in its own process (as an operator would run it): the server does not share
    this process's interpreter lock with the check it answers."""

    def __init__(self, directory: Path, latency_ms: float):
        self.directory, self.latency_ms = directory, latency_ms

    def __enter__(self):
        import subprocess
        import sys

        code = (
            "import sys; from pulsar_txn_cli.engine import server\n"
            "try:\n"
            "    server.serve(sys.argv[1], latency_ms=float(sys.argv[2]), on_ready=lambda url: print(url, flush=True))\n"
            "except KeyboardInterrupt:\n"
            "    pass  # stopped with Ctrl-C, as the bench stops it"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, str(self.directory), str(self.latency_ms)],
            stdout=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
        )
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http"):
            self.proc.kill()
            raise SystemExit("engine serve did not start")
        return self

    def __exit__(self, *exc):
        import signal

        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            self.proc.kill()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench downgrade")
    parser.add_argument("--coordinators", type=int, default=16)
    parser.add_argument("--subscriptions", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-downgrade-") as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")  # no trace in the user's state dir
        directory = Path(tmp) / "engine"
        t0 = time.perf_counter()
        build(directory, args.coordinators, args.subscriptions)
        print(
            f"engine built in {time.perf_counter() - t0:.1f}s ({args.coordinators} coordinators, "
            f"~{args.subscriptions} transactional subscriptions)",
            flush=True,
        )
        checkpoint = Path(tmp) / "checkpoint.json"
        with served_engine(directory, args.latency_ms) as served:
            print(f"engine serve at {served.url}, --latency-ms {args.latency_ms:g}", flush=True)
            # Warm-up (untimed): the served engine loads every store on its first request for it.
            timed_check(served.url, 16, checkpoint)
            figures = {}
            for concurrency in (16, 1):
                runs = []
                for _ in range(args.repeat):
                    seconds, result = timed_check(served.url, concurrency, checkpoint)
                    runs.append(seconds)
                figures[concurrency] = statistics.median(runs)
                obs = result.observations
                print(
                    f"--concurrency {concurrency:>2}: {figures[concurrency]:6.2f}s  verdict {result.verdict.verdict}, "
                    f"{len(obs.coordinators)} coordinators, {len(obs.subscriptions)} subscriptions, "
                    f"{result.requests} requests",
                    flush=True,
                )
        ratio = figures[16] / figures[1]
        manual = manual_calls(obs)
        print(
            f"default concurrency takes {ratio:.3f} of the sequential time "
            f"({'meets' if ratio <= 0.1 else 'MISSES'} the 1/10 target)"
        )
        print(
            f"manual procedure (PIP-160 steps 1, 2-1..2-7, recorded once and confirmed once): "
            f"{manual['recordAndConfirm']} pulsar-admin calls ({manual['perCheck']} per pass: "
            f"{1 + manual['brokers']} config, {1 + manual['coordinators']} lookup, "
            f"{1 + manual['namespaces'] + 1} discovery, {manual['coordinators'] + manual['subscriptions']} ledger lists)"
        )
