"""A real Pulsar 4.0.7 broker at fleet scale: pulsar-txn's fleet-wide commands against the REST
floor and against pulsar-admin.

One standalone broker (tests/integration/harness.py) with batched coordinator and pending-ack logs; one partitioned
topic grown to each size in turn (100, 300, 1,000 partitions: the build is paid once), one subscription a partition,
each with a pending-ack log (a committed transactional ack; TxnWorkload --fleet). At each size, every command runs
as a real CLI process against the broker's admin URL: wall time, peak RSS, and its requests counted by the broker
itself (Jetty's request log in broker.log, User-Agent pulsar-txn). Then:

- the floor: the same requests (same paths, same count), fired by a bare asyncio HTTP/1.1 client (stdlib streams,
  bench/floor_client.py) at the command's concurrency, back to back with the command; the ratio of requests/s is the
  command's efficiency. Three times: in this process (the requests alone), and as its own Python process timed as the
  command is (start-up included, as any client program pays it); and a third time in process decoding each answer's
  JSON, as a client that uses the answers must (the floor proper reads the bytes only): how much of the gap that is;
- the bare pycurl floor: the same GETs through bare libcurl handles at the command's concurrency
  (bench/pycurl_floor.py), in process and as its own process; the command's wall over the latter, both start-up
  included, is what the admin layer above libcurl costs a fleet command (bound: PYCURL_WALL_BOUND, 1.25x);
- the anchor: the same number of calls made as `pulsar-admin` (PulsarAdminTool, one JVM per call, as operators
  script it): one call timed, multiplied by the count.

    python -m bench fleet [--sizes=100,300,1000] [--repeat=N] [--profile=DIR] [--baseline=REV]

--baseline=REV also runs each command from revision REV's tree (git archive), back to back with this tree's: the
same fleet, the same broker, its wall time against ours (e.g. the transport before libcurl).

--repeat=N runs each command and its floors N times, back to back, and shows the run whose ratio to its own floor is
the median, with the range of the N ratios: on a shared 2-core machine one run's ratio moves by 2x.

Each row also prints the CPU a request of the command's process and of the floor's (user + system over the requests,
start-up included): Python's threads share one core, so a client's CPU a request bounds its requests/s.

--profile=DIR runs each command under cProfile (bench/profiled.py, every thread) and leaves
DIR/SIZE-COMMAND.prof: where a command's CPU goes. Its times are then not the published ones.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from bench.floor_client import floor
from bench.pycurl_floor import bare_pycurl, pycurl_floor
from bench.machine import installed_env

ROOT = Path(__file__).resolve().parent.parent
INTEGRATION = ROOT / "tests" / "integration"
ADMIN_CLI = INTEGRATION / "admincli"  # pulsar-admin's classpath (its own Maven module)
SIZES = (100, 300, 1000)
PREFIX = "fl"  # the fleet's topic: persistent://public/default/fl-fleet, subscription "fleet"
FLEET_TOPIC = f"persistent://public/default/{PREFIX}-fleet"
FLEET_SUB = "fleet"

# Batched logs on (what a fleet that needs `downgrade check` runs), and none of the harness's fast rollovers and
# one-second cursor flushes, which on 2,000+ ledgers would keep the broker busy with itself.
BROKER_CONF = {
    "transactionLogBatchedWriteEnabled": "true",
    "transactionPendingAckBatchedWriteEnabled": "true",
    "managedLedgerMaxEntriesPerLedger": 50000,
    "managedLedgerMaxLedgerRolloverTimeMinutes": 240,
    "managedLedgerCursorMaxEntriesPerLedger": 50000,
    "managedLedgerCursorRolloverTimeInSeconds": 14400,
    "managedLedgerCursorPositionFlushSeconds": 60,
}


# A fleet command's wall time may be at most this many times a bare pycurl client's making the same GETs at the
# same concurrency, both as processes (start-up included): what the admin layer above libcurl may cost.
PYCURL_WALL_BOUND = 1.25
SLOW_MS = 1000  # a request the broker took this long on is printed with the command's figures
CORES = os.cpu_count() or 1  # the broker and the client share them: what a client may spend at 0.8 of the floor


@dataclass(frozen=True)
class Command:
    name: str
    args: tuple[str, ...]
    concurrency: int  # admin calls in flight: the command's default, passed explicitly where it has the option
    ok_exits: tuple[int, ...] = (0,)


def commands(checkpoint: Path) -> list[Command]:
    return [
        # BLOCKED (6) is its honest verdict: batching is on.
        Command(
            "downgrade check", ("downgrade", "check", "--checkpoint", str(checkpoint), "--concurrency", "16"), 16, (6,)
        ),
        Command("subscriptions", ("subscriptions", "--concurrency", "8"), 8),
        Command("get-txn-pending-ack-batch-log-stat", ("get-txn-pending-ack-batch-log-stat", "--concurrency", "8"), 8),
        # one partition after the other: the command has no --concurrency
        Command("stuck-readers -n", ("stuck-readers", "-n", "public/default"), 1),
        # WARN (5): the doctor finds the batched logs a downgrade would need off.
        Command("doctor", ("doctor", "--concurrency", "16"), 16, (0, 5)),
    ]


def seen(name: str, out) -> int:
    """How many of the fleet's subscriptions (or partitions) the command's JSON output covers."""
    if name == "subscriptions":
        return sum(1 for r in out if r["topic"].startswith(FLEET_TOPIC) and r["subscription"] == FLEET_SUB)
    if name == "get-txn-pending-ack-batch-log-stat":
        return sum(1 for r in out["subscriptionArray"] for key in r if key.startswith(FLEET_TOPIC + "-partition-"))
    if name == "downgrade check":
        return sum(1 for r in out["subscriptions"] if r["topic"].startswith(FLEET_TOPIC))
    if name == "stuck-readers -n":
        return out["checked"]
    if name == "doctor":
        return out["checked"]["subscriptions"]
    raise ValueError(name)


def broker_listed(url: str) -> int:
    """How many of the fleet topic's partitions have the fleet's subscription, by the broker's own listing (its
    partitioned stats, partition by partition): the count each command's coverage is held to, not the command's."""
    import urllib.request

    path = f"/admin/v2/persistent/{FLEET_TOPIC.split('://')[1]}/partitioned-stats?perPartition=true"
    with urllib.request.urlopen(url + path, timeout=300) as answer:
        partitions = json.loads(answer.read())["partitions"]
    return sum(1 for stats in partitions.values() if FLEET_SUB in (stats.get("subscriptions") or {}))


FLEET_PARTITION = re.compile(re.escape(FLEET_TOPIC.split("://")[1]) + r"-partition-(\d+)")


def partitions_requested(requests: list[tuple]) -> int:
    """How many distinct fleet partitions the command's requests named, by the broker's request log."""
    return len({m.group(1) for _, path, _, _ in requests for m in FLEET_PARTITION.finditer(path)})


# --------------------------------------------------------------------------- the broker's own request count

# Jetty's NCSA line: "METHOD PATH HTTP/x" STATUS BYTES "REFERER" "AGENT" MILLISECONDS
REQUEST_LOG = re.compile(
    r'RequestLog - \S+ - \S+ \[[^\]]+\] "(\w+) (\S+) HTTP/[\d.]+" (\d+) \S+ "[^"]*" "([^"]*)" (\d+)'
)


class AccessLog:
    """The requests Jetty logged in broker.log from one offset on, as (method, path, status, ms), one user
    agent's (ms: the broker's own time for the request)."""

    def __init__(self, path: Path, agent: str = "pulsar-txn"):
        self.path, self.agent = path, agent

    def mark(self) -> int:
        return self.path.stat().st_size

    def since(self, offset: int) -> list[tuple[str, str, int, int]]:
        # Jetty logs a request as it completes: wait until the log stops growing.
        size = -1
        while size != self.path.stat().st_size:
            size = self.path.stat().st_size
            time.sleep(0.3)
        with open(self.path, "rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", errors="replace")
        return [
            (m[1], m[2], int(m[3]), int(m[5]))
            for m in (REQUEST_LOG.search(line) for line in text.splitlines())
            if m and m[4] == self.agent
        ]


def not_run(output) -> list[dict]:
    """The doctor's checks that could not run, with why (a request that failed or timed out, for one)."""
    checks = output.get("checks", []) if isinstance(output, dict) else []
    return [{"check": c.get("check"), "why": c.get("why")} for c in checks if not c.get("ran")]


def failed(requests: list[tuple]) -> list[tuple]:
    """The requests the broker failed, but the tool's probe for an engine (/pulsar-txn/...: a broker's 404 is how
    the tool knows it is not talking to `engine serve`)."""
    return [r for r in requests if r[2] >= 400 and not r[1].startswith("/pulsar-txn/")]


# --------------------------------------------------------------------------- the command, as a process


@dataclass
class Run:
    seconds: float
    rss_mib: float
    exit_code: int
    output: object
    requests: list = field(default_factory=list)
    stderr: str = ""
    cpu_seconds: float = 0.0  # user + system, the whole process (start-up included)


def cli_env(home: Path, tree: Path = ROOT) -> dict:
    """The tool's environment: its tree first (this one, or --baseline's), state and config in a scratch directory,
    no target but the flag."""
    env = {k: v for k, v in installed_env().items() if not k.startswith(("PULSAR_TXN_", "PULSAR_CLIENT_CONF"))}
    env.update(PYTHONPATH=str(tree), NO_COLOR="1", HOME=str(home))
    for kind in ("STATE", "DATA", "CONFIG", "CACHE"):
        env[f"XDG_{kind}_HOME"] = str(home / kind.lower())
    return env


PROFILE: dict = {}  # {"dir": Path, "size": int} with --profile
BASELINE: dict = {}  # {"rev": str, "tree": Path} with --baseline: the same commands from that revision's tree


def run_command(url: str, command: Command, log: AccessLog, home: Path, timeout: float = 600, tree: Path = ROOT) -> Run:
    argv = [sys.executable, "-m", "pulsar_txn_cli", *command.args, "--admin-url", url, "-o", "json", "-q"]
    if PROFILE and tree == ROOT:
        out = PROFILE["dir"] / f"{PROFILE['size']}-{command.name.split()[0]}.prof"
        argv[1:3] = ["-m", "bench.profiled", str(out)]
    offset = log.mark()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=cli_env(home, tree), cwd=tree)
        try:
            _, status, usage = _wait4(proc, timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        text, stderr = out.read().decode(), err.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    output = json.loads(text) if text.strip() else None
    cpu = usage.ru_utime + usage.ru_stime
    return Run(seconds, usage.ru_maxrss / 1024, code, output, log.since(offset), stderr, cpu)


def process_cpu(pid: int | None) -> float:
    """User + system CPU seconds of a running process so far (Linux's /proc/PID/stat; 0 when unknown)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15


def _wait4(proc: subprocess.Popen, timeout: float):
    """os.wait4 (the child's own peak RSS), bounded: a hung command is killed after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return pid, status, usage
        time.sleep(0.02)
    proc.kill()
    raise TimeoutError(f"{proc.args[3:5]} still running after {timeout:g}s")


# --------------------------------------------------------------------------- the floor, as a process


def floor_process(
    url: str, requests: list[tuple], concurrency: int, scratch: Path, script: str = "floor_client.py"
) -> tuple[float, int, float]:
    """A floor's client (bench/floor_client.py, or pycurl_floor.py) run as its own Python process, timed as a
    command is (from the spawn to its exit): the fixed cost any client program pays, interpreter and imports, that
    the in-process floor does not. Returns (seconds, answers whose status differs from the command's, its CPU
    seconds)."""
    paths = scratch / "floor-requests.json"
    paths.write_text(json.dumps([[r[1], r[2]] for r in requests if r[0] == "GET"]))
    argv = [sys.executable, str(ROOT / "bench" / script), url, str(paths), str(concurrency)]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, env=installed_env(), cwd=scratch)
    try:
        _, _, usage = _wait4(proc, 600)
    finally:
        if proc.poll() is None:
            proc.kill()
    seconds = time.perf_counter() - start
    differs = json.loads(proc.stdout.read())["differs"]
    proc.stdout.close()
    return seconds, differs, usage.ru_utime + usage.ru_stime


# --------------------------------------------------------------------------- the anchor: pulsar-admin


def admin_cli_classpath() -> str:
    """pulsar-admin's runtime classpath (tests/integration/admincli), resolved by Maven when missing."""
    cp_file = ADMIN_CLI / "target" / "classpath.txt"
    if not cp_file.exists():
        cmd = ["mvn", "-B", "-q", "-s", str(INTEGRATION / "harness" / "settings.xml"), "-f", str(ADMIN_CLI / "pom.xml")]
        subprocess.run([*cmd, "generate-resources"], check=True, timeout=1800)
    return cp_file.read_text().strip()


def pulsar_admin(url: str, args: list[str], scratch: Path) -> subprocess.CompletedProcess:
    """One `pulsar-admin ARGS` call: a JVM running PulsarAdminTool (bin/pulsar-admin's class, memory flags and
    client.conf), plus C1 only (-XX:TieredStopAtLevel=1, faster start-up: in pulsar-admin's favour)."""
    conf = scratch / "client.conf"
    conf.write_text(f"webServiceUrl={url}\n")
    quiet = scratch / "log4j2-admin.xml"
    quiet.write_text(
        '<Configuration status="WARN"><Appenders><Console name="err" target="SYSTEM_ERR"/></Appenders>'
        '<Loggers><Root level="WARN"><AppenderRef ref="err"/></Root></Loggers></Configuration>\n'
    )
    cmd = [
        "java", "-Xmx128m", "-XX:MaxDirectMemorySize=128m", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
        f"-Dlog4j.configurationFile={quiet}", "-cp", admin_cli_classpath(),
        "org.apache.pulsar.admin.cli.PulsarAdminTool", str(conf), *args,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def anchor_call_seconds(url: str, scratch: Path, repeat: int = 3) -> float:
    """Median wall time of one `pulsar-admin transactions pending-ack-internal-stats` (the per-subscription call)."""
    args = ["transactions", "pending-ack-internal-stats", "-t", f"{FLEET_TOPIC}-partition-0", "-s", FLEET_SUB]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = pulsar_admin(url, args, scratch)
        times.append(time.perf_counter() - start)
        if done.returncode != 0 or "ledgers" not in done.stdout:
            raise RuntimeError(f"pulsar-admin {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return statistics.median(times)


# --------------------------------------------------------------------------- what a request costs the tool


def transport_cost(url: str, n: int = 500, rounds: int = 5) -> dict:
    """CPU and wall ms per request, one request at a time, of the same GET (a partition's txnBufferStats) through
    a bare pycurl loop (one libcurl handle reused, json.loads: the floor of the tool's transport), stdlib
    http.client, httpx.Client, and pulsar-txn's PulsarAdmin (its http_pool on libcurl and the tool's layer):
    where a command's time goes besides the broker's. The ways take turns, `rounds` rounds of n / rounds requests
    each, and each figure is the median of its rounds: a broker that slows down in between weighs on every way."""
    import http.client

    import httpx

    from pulsar_txn_cli.admin import connect
    from pulsar_txn_cli.target.settings import TargetFlags

    topic = f"{FLEET_TOPIC}-partition-0"
    path = f"/admin/v3/transactions/transactionBufferStats/{topic.split('://')[1]}?lowWaterMarks=false"
    parts = urlsplit(url)
    stdlib = http.client.HTTPConnection(parts.hostname, parts.port)
    client = httpx.Client(headers={"Accept": "application/json"})
    admin = connect(TargetFlags(admin_url=url))

    def plain() -> None:
        stdlib.request("GET", path, headers={"Accept": "application/json"})
        json.loads(stdlib.getresponse().read())

    bare = bare_pycurl(url + path)
    ways = {
        "pycurl": bare,
        "http.client": plain,
        "httpx.Client": lambda: client.get(url + path).json(),
        "PulsarAdmin": lambda: admin.transaction_buffer_stats(topic),
    }
    each = max(1, n // rounds)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    try:
        for call in ways.values():
            call()  # the connection opened, untimed
        for _ in range(rounds):
            for name, call in ways.items():
                wall, cpu = time.perf_counter(), time.process_time()
                for _ in range(each):
                    call()
                samples[name].append((time.perf_counter() - wall, time.process_time() - cpu))
        costs = {
            name: {
                "wallMs": 1000 * statistics.median(w for w, _ in got) / each,
                "cpuMs": 1000 * statistics.median(c for _, c in got) / each,
            }
            for name, got in samples.items()
        }
    finally:
        bare.close()
        stdlib.close()
        client.close()
        admin.close()
    return costs


# --------------------------------------------------------------------------- one size


def measure_size(
    url: str,
    size: int,
    log: AccessLog,
    home: Path,
    anchor_call: float,
    out=print,
    repeat: int = 1,
    broker_pid: int | None = None,
) -> list[dict]:
    rows = []
    if PROFILE:
        PROFILE["size"] = size
    for command in commands(home / "checkpoint.json"):
        trials = [measure_once(url, command, log, home, broker_pid) for _ in range(repeat)]
        # The median trial by its ratio to its own floor: each trial ran back to back, so the broker's drift between
        # repetitions (its GC, its ledgers' flushes, the other processes here) cancels out of the ratio.
        trial = sorted(trials, key=Trial.of_floor)[len(trials) // 2]
        run = trial.run
        count, gets = len(run.requests), trial.gets
        row = {
            "size": size,
            "command": command.name,
            "seconds": run.seconds,
            "requests": count,
            "rps": count / run.seconds,
            "rssMiB": max(t.run.rss_mib for t in trials),
            "exit": run.exit_code,
            "ok": all(t.run.exit_code in command.ok_exits for t in trials),
            "seen": seen(command.name, run.output) if run.output is not None else 0,
            "partitionsRequested": min(partitions_requested(t.run.requests) for t in trials),
            "failedRequests": max(len(failed(t.run.requests)) for t in trials),
            "perSubMs": 1000 * run.seconds / size,
            "concurrency": command.concurrency,
            "floorSeconds": trial.floor_seconds,
            "floorRps": gets / trial.floor_seconds if trial.floor_seconds else 0.0,
            "floorDiffers": trial.floor_differs,
            "floorProcessSeconds": trial.process_seconds,
            "floorProcessRps": gets / trial.process_seconds,
            "floorProcessDiffers": trial.process_differs,
            "floorSkipped": count - gets,  # never replayed: only GETs are
            # the floor decoding every answer's JSON, as the command must to use it: how much of the gap that is
            "floorParsedRps": gets / trial.parsed_seconds if trial.parsed_seconds else 0.0,
            "anchorSeconds": anchor_call * count,
            "stderr": run.stderr[-2000:] if run.exit_code not in command.ok_exits else "",
            # the broker's slowest answer to the command: a stall shows here, not only in the wall time
            "slowest": max(run.requests, key=lambda r: r[3], default=None),
            # what the command says of itself, when it does (doctor: its run's seconds and requests)
            "own": {
                k: run.output[k] for k in ("seconds", "requests") if isinstance(run.output, dict) and k in run.output
            },
            "notRun": not_run(run.output),
            # CPU per request, the whole process each (start-up included): on 2 cores shared with the broker, and
            # one core at most for Python's threads, a client's CPU a request bounds its requests/s
            "cpuMsPerRequest": 1000 * run.cpu_seconds / count,
            "floorProcessCpuMsPerRequest": 1000 * trial.process_cpu / gets if gets else 0.0,
            "repeat": repeat,
            # each repetition's ratio to its own floor, in process (the spread a single run hides)
            "ofFloorRuns": sorted(t.of_floor() for t in trials),
            # the broker's CPU a request (its JVM: broker, bookie and ZooKeeper of the standalone), while the command
            # ran and while the floor replayed its GETs in process; and the floor's own CPU a request there
            "brokerCpuMsPerRequest": 1000 * trial.broker_cpu_command / count,
            "brokerCpuMsPerRequestFloor": 1000 * trial.broker_cpu_floor / gets if gets else 0.0,
            "floorCpuMsPerRequest": 1000 * trial.floor_cpu / gets if gets else 0.0,
            # the bare pycurl floor at the command's concurrency: in process, and as a process (start-up included)
            "pycurlSeconds": trial.pycurl_seconds,
            "pycurlProcessSeconds": trial.pycurl_process_seconds,
            "pycurlDiffers": trial.pycurl_differs,
            # the median of the repetitions' own ratios (each command back to back with its floor)
            "wallOfPycurl": statistics.median(t.wall_of_pycurl() for t in trials),
            "wallOfPycurlRuns": sorted(t.wall_of_pycurl() for t in trials),
        }
        if trial.baseline is not None:
            row["baselineSeconds"] = trial.baseline.seconds
            row["baselineExit"] = trial.baseline.exit_code
            row["baselineRequests"] = len(trial.baseline.requests)
            row["wallOfBaseline"] = statistics.median(t.run.seconds / t.baseline.seconds for t in trials)
            row["wallOfBaselineRuns"] = sorted(t.run.seconds / t.baseline.seconds for t in trials)
        row["ofFloor"] = row["rps"] / row["floorRps"] if row["floorRps"] else 0.0
        row["ofFloorProcess"] = row["rps"] / row["floorProcessRps"]
        row["ofFloorParsed"] = row["rps"] / row["floorParsedRps"] if row["floorParsedRps"] else 0.0
        row["anchorRatio"] = row["anchorSeconds"] / run.seconds
        row.update(cpu_budget(row))
        rows.append(row)
        out(
            f"{size:>5} subs  {command.name:<36} {run.seconds:6.2f} s  {count:>5} requests  {row['rps']:6.0f} req/s"
            f"  peak RSS {run.rss_mib:5.0f} MiB  exit {run.exit_code}  seen {row['seen']} (asked about "
            f"{row['partitionsRequested']} partitions)  "
            f"{row['perSubMs']:.2f} ms/sub | floor (c={command.concurrency}) {trial.floor_seconds:5.2f} s "
            f"{row['floorRps']:6.0f} req/s -> {row['ofFloor']:.2f} of the floor; as a process {trial.process_seconds:5.2f} s "
            f"-> {row['ofFloorProcess']:.2f}; parsing its answers -> {row['ofFloorParsed']:.2f}{_spread(row)} | pulsar-admin "
            f"{row['anchorSeconds']:7.0f} s ({row['anchorRatio']:.0f}x)"
        )
        out(
            f"      CPU a request (the process, start-up included): {row['cpuMsPerRequest']:.3f} ms; "
            f"the floor as a process {row['floorProcessCpuMsPerRequest']:.3f} ms"
        )
        out(
            f"      bare pycurl (c={command.concurrency}): {trial.pycurl_seconds:5.2f} s in process, "
            f"{trial.pycurl_process_seconds:5.2f} s as a process -> the command's wall is {row['wallOfPycurl']:.2f}x "
            f"the bare pycurl process's (the median of {_runs(row['wallOfPycurlRuns'])}; bound {PYCURL_WALL_BOUND:g}x)"
            + (f"; {trial.pycurl_differs} answer(s) differed" if trial.pycurl_differs else "")
        )
        if trial.baseline is not None:
            out(
                f"      the same command from {BASELINE['rev']}: {trial.baseline.seconds:5.2f} s, "
                f"{row['baselineRequests']} requests, exit {trial.baseline.exit_code} -> this tree's wall is "
                f"{row['wallOfBaseline']:.2f}x its (the median of {_runs(row['wallOfBaselineRuns'])})"
            )
        if broker_pid is not None:
            out(
                f"      the broker's CPU a request: {row['brokerCpuMsPerRequest']:.3f} ms under the command, "
                f"{row['brokerCpuMsPerRequestFloor']:.3f} ms under the floor (whose own is "
                f"{row['floorCpuMsPerRequest']:.3f} ms: together {row['floorMachineShare']:.0%} of the {CORES} cores "
                f"at the floor's rate); at 0.8 of that rate a client may spend {row['budgetMsFor08']:.3f} ms a request"
            )
        if row["own"]:
            out(f"      by its own count: {row['own']}")
        if row["notRun"]:
            out(f"      checks that did not run: {row['notRun']}")
        if row["slowest"] and row["slowest"][3] >= SLOW_MS:
            out(
                f"      the broker's slowest answer: {row['slowest'][3]} ms for {row['slowest'][0]} {row['slowest'][1]}"
            )
    return rows


def cpu_budget(row: dict) -> dict:
    """What 0.8 of the floor's rate leaves a client, when the machine's CPU is what bounds the rate: at R requests/s
    the broker takes R x its CPU a request (as measured under the floor) of the cores, the client the rest; and
    Python's threads run on one core at a time. `floorMachineShare` near 1 says the floor was bound by the CPU, so
    the budget binds; well below 1 (one connection at a time, say), the bound is loose."""
    rate = row["floorRps"]
    if not rate:
        return {"floorMachineShare": 0.0, "budgetMsFor08": 0.0}
    broker = row["brokerCpuMsPerRequestFloor"] / 1000
    share = rate * (broker + row["floorCpuMsPerRequest"] / 1000) / CORES
    budget = min(CORES / (0.8 * rate) - broker, 1 / (0.8 * rate))
    return {"floorMachineShare": share, "budgetMsFor08": 1000 * budget}


@dataclass(frozen=True)
class Trial:
    """One run of a command and its floors, back to back (their ratios cancel the broker's drift between trials)."""

    run: Run
    floor_seconds: float  # the floor in process
    floor_differs: int
    process_seconds: float  # the floor as its own process, start-up included
    process_differs: int
    process_cpu: float
    parsed_seconds: float  # the floor in process, decoding each answer's JSON
    broker_cpu_command: float = 0.0  # the broker JVM's CPU seconds while the command ran
    broker_cpu_floor: float = 0.0  # ... while the floor replayed its GETs in process
    floor_cpu: float = 0.0  # this process's CPU seconds for that floor
    pycurl_seconds: float = 0.0  # the bare pycurl floor (bench/pycurl_floor.py) in process
    pycurl_process_seconds: float = 0.0  # ... as its own process, start-up included
    pycurl_differs: int = 0
    baseline: Run | None = None  # the command run from --baseline's tree

    def wall_of_pycurl(self) -> float:
        """The command's wall time over the bare pycurl floor's, both as processes (start-up included)."""
        return self.run.seconds / self.pycurl_process_seconds if self.pycurl_process_seconds else 0.0

    @property
    def gets(self) -> int:
        """The command's GETs: the requests the floors replay."""
        return sum(1 for r in self.run.requests if r[0] == "GET")

    def of_floor(self) -> float:
        """The command's requests/s over its floor's (in process)."""
        if not self.gets or not self.floor_seconds:
            return 0.0
        return (len(self.run.requests) / self.run.seconds) / (self.gets / self.floor_seconds)


def measure_once(url: str, command: Command, log: AccessLog, home: Path, broker_pid: int | None = None) -> Trial:
    """The command, then the floor of its requests in process, as a process, and in process decoding the answers;
    the broker's CPU is read around the command and around the first floor."""
    (home / "checkpoint.json").unlink(missing_ok=True)
    before = process_cpu(broker_pid)
    run = run_command(url, command, log, home)
    between, own = process_cpu(broker_pid), time.process_time()
    floor_seconds, floor_differs = floor(url, run.requests, command.concurrency)
    floor_cpu, after = time.process_time() - own, process_cpu(broker_pid)
    process = floor_process(url, run.requests, command.concurrency, home)
    parsed_seconds, _ = floor(url, run.requests, command.concurrency, parse=True)
    pycurl_seconds, _ = pycurl_floor(url, run.requests, command.concurrency)
    pycurl_process, pycurl_differs, _ = floor_process(url, run.requests, command.concurrency, home, "pycurl_floor.py")
    baseline = None
    if BASELINE:
        (home / "checkpoint.json").unlink(missing_ok=True)
        baseline = run_command(url, command, log, home, tree=BASELINE["tree"])
    return Trial(
        run,
        floor_seconds,
        floor_differs,
        *process,
        parsed_seconds,
        between - before,
        after - between,
        floor_cpu,
        pycurl_seconds,
        pycurl_process,
        pycurl_differs,
        baseline,
    )


def _runs(ratios: list[float]) -> str:
    return ", ".join(f"{r:.2f}" for r in ratios)


def _spread(row: dict) -> str:
    runs = row["ofFloorRuns"]
    return f" (of the floor over {len(runs)} runs: {runs[0]:.2f}-{runs[-1]:.2f})" if len(runs) > 1 else ""


def start_broker(out=print):
    sys.path.insert(0, str(INTEGRATION))
    import harness

    broker = harness.start_broker(BROKER_CONF, name="fleet", log=out)
    broker.wait_coordinators_ready()
    return broker


def grow(broker, size: int) -> tuple[float, dict]:
    start = time.perf_counter()
    lines = broker.run_workload(timeout=900, fleet=size, prefix=PREFIX, parallel=16)
    return time.perf_counter() - start, lines[-1]


def run(broker, sizes, scratch: Path, out=print, repeat: int = 1) -> dict:
    """Grow the fleet to each size and measure there; the anchor's one call is timed once, on the first size."""
    log = AccessLog(broker.log_path)
    rows, builds, anchor_call = [], {}, None
    for size in sizes:
        seconds, done = grow(broker, size)
        builds[size] = seconds
        out(f"fleet grown to {size} transactional subscriptions (+{done['created']}) in {seconds:.1f}s")
        if anchor_call is None:
            anchor_call = anchor_call_seconds(broker.admin_url, scratch)
            out(f"pulsar-admin transactions pending-ack-internal-stats, one JVM: {anchor_call:.2f} s (median of 3)")
        pid = broker.proc.pid if getattr(broker, "proc", None) is not None else None
        listed = broker_listed(broker.admin_url)
        out(f"the broker lists {listed} partitions with the fleet's subscription")
        measured = measure_size(broker.admin_url, size, log, scratch, anchor_call, out, repeat, pid)
        rows += [{**row, "brokerListed": listed} for row in measured]
    costs = transport_cost(broker.admin_url)
    out(
        "one request at a time, the same GET: "
        + "; ".join(f"{k} {v['cpuMs']:.3f} ms CPU, {v['wallMs']:.3f} ms wall" for k, v in costs.items())
    )
    summary = summarise(rows, sizes) if len(sizes) > 1 else {}  # growth needs two sizes (a --profile run may have one)
    for name, s in summary.items():
        out(
            f"{name}: {s['perSubMsSmall']:.2f} -> {s['perSubMsLarge']:.2f} ms/sub ({s['perSubGrowth']:+.0%} from "
            f"{sizes[0]} to {sizes[-1]}: {s['fixedSeconds']:.2f} s fixed + {s['marginalMsPerSub']:.2f} ms a subscription); "
            f"{s['ofFloorMin']:.2f}-{s['ofFloorMax']:.2f} of the floor's req/s "
            f"({s['ofFloorProcessMin']:.2f}-{s['ofFloorProcessMax']:.2f} of the floor run as a process); "
            f"pulsar-admin {s['anchorRatioMin']:.0f}-{s['anchorRatioMax']:.0f}x slower"
        )
    for row in rows:
        verdict = "within" if row["wallOfPycurl"] <= PYCURL_WALL_BOUND else "over"
        out(
            f"wall against bare pycurl, {row['size']} subs, {row['command']}: {row['wallOfPycurl']:.2f}x, the median "
            f"of {_runs(row['wallOfPycurlRuns'])} ({verdict} {PYCURL_WALL_BOUND:g}x)"
            + (
                f"; against {BASELINE['rev']}: {row['wallOfBaseline']:.2f}x, the median of "
                f"{_runs(row['wallOfBaselineRuns'])}"
                if "wallOfBaseline" in row
                else ""
            )
        )
    return {"rows": rows, "builds": builds, "anchorCall": anchor_call, "summary": summary, "transport": costs}


def summarise(rows: list[dict], sizes) -> dict:
    summary = {}
    for name in dict.fromkeys(r["command"] for r in rows):
        mine = [r for r in rows if r["command"] == name]
        small = next(r for r in mine if r["size"] == sizes[0])
        large = next(r for r in mine if r["size"] == sizes[-1])
        slope = (large["seconds"] - small["seconds"]) / (large["size"] - small["size"])
        summary[name] = {
            # the line through the smallest and the largest size: a fixed cost and a cost per subscription
            "marginalMsPerSub": 1000 * slope,
            "fixedSeconds": small["seconds"] - slope * small["size"],
            "perSubMsSmall": small["perSubMs"],
            "perSubMsLarge": large["perSubMs"],
            "perSubGrowth": large["perSubMs"] / small["perSubMs"] - 1,
            "ofFloorMin": min(r["ofFloor"] for r in mine),
            "ofFloorMax": max(r["ofFloor"] for r in mine),
            "ofFloorProcessMin": min(r["ofFloorProcess"] for r in mine),
            "ofFloorProcessMax": max(r["ofFloorProcess"] for r in mine),
            "anchorRatioMin": min(r["anchorRatio"] for r in mine),
            "anchorRatioMax": max(r["anchorRatio"] for r in mine),
        }
    return summary


def baseline_tree(rev: str, scratch: Path) -> Path:
    """The package of revision `rev` (git archive of pulsar_txn_cli/), extracted under scratch."""
    tree = scratch / "baseline"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "pulsar_txn_cli"], capture_output=True, check=True, timeout=120
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True, timeout=120)
    return tree


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench fleet")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="fleet sizes, smallest first")
    parser.add_argument("--profile", help="a directory: run each command under cProfile, its stats there")
    parser.add_argument(
        "--repeat", type=int, default=1, help="run each command and its floor N times; the median trial is shown"
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="a git revision: run each command from that revision's tree too, back to back (its wall against ours)",
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.profile:
        PROFILE["dir"] = Path(args.profile).resolve()
        PROFILE["dir"].mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        if args.baseline:
            BASELINE.update(rev=args.baseline, tree=baseline_tree(args.baseline, Path(tmp)))
        broker = start_broker()
        try:
            run(broker, sizes, Path(tmp), repeat=args.repeat)
        finally:
            broker.cleanup()
    print(f"bench fleet: {time.perf_counter() - t0:.0f} s in all, broker start included", flush=True)
