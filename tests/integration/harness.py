"""Run a real Apache Pulsar standalone broker for the integration tests.

The broker comes from Maven Central: ``tests/integration/harness`` is a tiny
Maven module that resolves the runtime classpath of one pinned Pulsar release
and builds a small Java transactional workload (``TxnWorkload``).

Standalone runs in ZooKeeper metadata mode (``PULSAR_STANDALONE_USE_ZOOKEEPER=1``)
so that BookKeeper's ``BookieShell readledger`` can read ledgers while the
broker is up.  Everything (ports, data dirs, logs) is private to one
``PulsarBroker`` instance.

This module has no dependency on the project's package; it only uses the
standard library.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODULE_DIR = HERE / "harness"
POM = MODULE_DIR / "pom.xml"
SETTINGS = MODULE_DIR / "settings.xml"
CLASSPATH_FILE = MODULE_DIR / "target" / "classpath.txt"
WORKLOAD_JAR = MODULE_DIR / "target" / "pulsar-txn-harness.jar"
# touched after every successful build (Maven leaves classpath.txt / the jar alone when unchanged)
BUILD_STAMP = MODULE_DIR / "target" / "build.stamp"

READY_TIMEOUT = float(os.environ.get("PULSAR_TXN_IT_READY_TIMEOUT", "180"))
# The whole broker process is killed if it lives longer than this: CI's hard limit of 90 minutes. The session
# broker lives through every real set (a hung test is failed by pytest-timeout instead); at 1,500 s it was
# killed in the middle of a full run once the faults set ran long.
MAX_LIFETIME = float(os.environ.get("PULSAR_TXN_IT_MAX_LIFETIME", "5400"))

# What every JVM of the real sets runs with (a standalone broker here, a cluster's processes in cluster.py).
JVM_COMMON = [
    "-XX:+UseG1GC",
    "-XX:ActiveProcessorCount=2",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "--add-opens",
    "java.base/java.io=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.util.zip=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.net=ALL-UNNAMED",
    "--add-opens",
    "java.management/sun.management=ALL-UNNAMED",
    "-Djute.maxbuffer=10485760",
    "-Djava.net.preferIPv4Stack=true",
    "-Dzookeeper.4lw.commands.whitelist=*",
    "-Dlog4j2.is.webapp=false",
]
JVM_FLAGS = ["-Xms256m", "-Xmx1g", "-XX:MaxDirectMemorySize=1g", *JVM_COMMON, "-Dzookeeper.snapshot.trust.empty=true"]

# Same layout as Pulsar's default console pattern.
LOG_PATTERN = "%d{ISO8601_OFFSET_DATE_TIME_HHMM} [%t] %-5level %logger{36} - %msg%n"


def _log4j_xml(target: str, level: str = "INFO", quiet: tuple[str, ...] = ()) -> str:
    """A log4j2 XML config; target is a file path or 'STDOUT'."""
    if target == "STDOUT":
        appender = f'<Console name="out" target="SYSTEM_OUT"><PatternLayout pattern="{LOG_PATTERN}"/></Console>'
    else:
        appender = f'<File name="out" fileName="{target}" append="true"><PatternLayout pattern="{LOG_PATTERN}"/></File>'
    loggers = "".join(f'<Logger name="{q}" level="WARN"/>' for q in quiet)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<Configuration status="WARN"><Appenders>{appender}</Appenders>'
        f'<Loggers>{loggers}<Root level="{level}"><AppenderRef ref="out"/></Root></Loggers>'
        "</Configuration>\n"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- build


def _m2_has_pulsar() -> bool:
    version = None
    text = POM.read_text()
    start = text.find("<pulsar.version>")
    if start >= 0:
        version = text[start + len("<pulsar.version>") : text.find("</pulsar.version>")]
    repo = Path(os.environ.get("MAVEN_REPO_LOCAL", str(Path.home() / ".m2" / "repository")))
    return bool(version) and (repo / "org/apache/pulsar/pulsar-broker" / version).is_dir()


def _build_is_fresh() -> bool:
    if not (CLASSPATH_FILE.exists() and WORKLOAD_JAR.exists() and BUILD_STAMP.exists()):
        return False
    built = BUILD_STAMP.stat().st_mtime
    sources = [POM, *MODULE_DIR.joinpath("src").rglob("*.java")]
    if any(p.stat().st_mtime > built for p in sources):
        return False
    return all(Path(p).exists() for p in CLASSPATH_FILE.read_text().strip().split(os.pathsep))


def build_module(log=print) -> str:
    """Build the Maven module if needed; return the classpath (workload jar included)."""
    if not _build_is_fresh():
        base = ["mvn", "-B", "-q", "-s", str(SETTINGS), "-f", str(POM), "package", "-DskipTests"]
        attempts = [base + ["-o"], base] if _m2_has_pulsar() else [base]
        last = None
        for cmd in attempts:
            log("harness: " + " ".join(cmd))
            t0 = time.monotonic()
            last = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            log(f"harness: mvn exit {last.returncode} in {time.monotonic() - t0:.1f}s")
            if last.returncode == 0:
                BUILD_STAMP.touch()
                break
        if last is None or last.returncode != 0:
            raise RuntimeError("maven build of the harness failed:\n" + (last.stdout + last.stderr)[-5000:])
    cp = CLASSPATH_FILE.read_text().strip()
    return str(WORKLOAD_JAR) + os.pathsep + cp


# --------------------------------------------------------------------------- broker


# BookKeeper's error for an operation the bookie did not answer in time (BKException code -23).
BOOKIE_TIMEOUT = "Bookie operation timeout"
# Seen once on 4.0.7 (docs/real-broker-findings.md): a fresh broker's first concurrent commits, one of which
# failed inside the broker ("Handle end txn on subscription failed") with Prometheus' own exception.
METRICS_LABELS = "Incorrect number of labels"

# Seen once on 4.0.7 in a CI run (docs/real-broker-findings.md): after a topic was reloaded, its transaction buffer's
# recovery timed out reading the `__transaction_buffer_snapshot` topic (TableView.readLatest), the broker closed the
# topic and failed every commit on it ("UnknownError"), so a held client's commit timed out.
BUFFER_RECOVERY_FAILED = "Transaction buffer failed to recover snapshot"

# Every retry the harness makes of Pulsar's own flakiness (a workload rerun, a broker or cluster start
# retried), with its cause: logged when it happens and counted in the run's summary (conftest.py), so
# the flakiness is visible instead of absorbed.
RETRIES: list[dict[str, str]] = []
STARTED: list[str] = []  # every broker and cluster start of the session (the summary shows 0 retries too)

# At most RETRY_CAP retries per set of real tests (its pytest marker, which conftest.py puts in CURRENT_SET
# before each test): one more fails the test that needed it, with every cause of its set listed, so a set
# can never turn green by retrying its way past a bug. Outside pytest (bench, scripts) nothing is capped.
RETRY_CAP = 1
CURRENT_SET: list[str | None] = [None]


class RetryCapExceeded(AssertionError):
    pass


def note_retry(what: str, cause: str) -> None:
    cause = " ".join(str(cause).split())[:300]
    RETRIES.append({"what": what, "cause": cause, "set": CURRENT_SET[0] or "session"})
    print(f"\nharness retry #{len(RETRIES)}: {what} (cause: {cause})", file=sys.stderr)
    if CURRENT_SET[0] is None:
        return
    of_set = [r for r in RETRIES if r["set"] == CURRENT_SET[0]]
    if len(of_set) > RETRY_CAP:
        listed = "; ".join(f"{n}. {r['what']} (cause: {r['cause']})" for n, r in enumerate(of_set, 1))
        import pytest

        # pytest.fail's exception is no Exception: no `except Exception` of a retry loop can absorb it.
        pytest.fail(
            f"the {CURRENT_SET[0]} set needed {len(of_set)} harness retries, more than its cap of {RETRY_CAP}: "
            f"{listed}",
            pytrace=False,
        )


def tool_calls() -> int:
    """How many times this process ran the tool so far (tests/conftest.py's run_cli counts them)."""
    counted = getattr(sys.modules.get("tests.conftest"), "TOOL_CALLS", None)
    return counted[0] if counted else 0


class Window:
    """The stretch of a run that a retry's cause must be proven from: the brokers' logs from where they ended
    when it opened, and the tool's calls since. A cause lies outside the tool only when a broker logged it
    inside the window and the tool did not run in it (a stall the tool's own call may have caused, or one
    logged before, proves nothing)."""

    def __init__(self, logs: dict[str, Path]):
        self.logs = dict(logs)  # a broker's name -> its log file
        self.marks = {name: _size(path) for name, path in self.logs.items()}
        self.calls = tool_calls()

    def tool_ran(self) -> bool:
        return tool_calls() != self.calls

    def logged(self, *needles: str) -> str | None:
        """The first line a broker logged in the window holding one of needles, named by its broker, or None."""
        for name, path in self.logs.items():
            try:
                with open(path, "rb") as log:
                    log.seek(self.marks[name])
                    for raw in log:
                        line = raw.decode(errors="replace")
                        if any(needle in line for needle in needles):
                            return f"{name}: {line.strip()}"
            except OSError:
                continue
        return None

    def cause(self, *needles: str) -> str | None:
        """A broker's line holding one of needles, logged in the window with the tool idle; else None."""
        return None if self.tool_ran() else self.logged(*needles)


def broker_logs(target) -> dict[str, Path]:
    """Each broker's log file of `target`: a PulsarBroker, or a cluster (cluster.py) of several."""
    if isinstance(target, PulsarBroker):
        return {target.name: target.log_path}
    return {b.name: b.proc.log_path for b in target.brokers}


def _size(path: Path) -> int:
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0


def _first_line_with(text: str, needle: str) -> str:
    return next((line for line in str(text).splitlines() if needle in line), needle)


DEADLOCK = "Found one Java-level deadlock"


def thread_dump(pid: int, timeout: float = 60) -> str | None:
    """The JVM's thread dump (`jcmd PID Thread.print`), or None when it cannot be had."""
    try:
        return subprocess.run(
            ["jcmd", str(pid), "Thread.print"], capture_output=True, text=True, timeout=timeout
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None


def java_deadlock(pid: int) -> str | None:
    """The JVM's own report of a Java-level deadlock (jcmd Thread.print), in one line, or None.

    Seen on 4.0.7 in CI (docs/real-broker-findings.md): a pending-ack store's abort callback and a Shared
    subscription's dispatcher each hold the lock the other waits for, on one of the broker's BookKeeper client
    threads, so every add and ledger creation that thread completes times out ("Bookie operation timeout")
    until the broker restarts: what the harness took for a stalled bookie."""
    dump = thread_dump(pid)
    if dump is None or DEADLOCK not in dump:
        return None
    report = dump.split(DEADLOCK, 1)[1].split("Java stack information", 1)[0]
    waits = re.findall(
        r'"([^"]+)":\s+waiting to lock monitor \S+ \(object \S+, a ([\w.$]+)\),\s+which is held by', report
    )
    return "Java-level deadlock: " + "; ".join(
        f"{thread} waits for a {cls.rsplit('.', 1)[-1]}" for thread, cls in waits
    )


def hold_workload(target, **kw) -> tuple["WorkloadRun", list[dict]]:
    """`target.start_workload(**kw)` until it holds its transactions open: (the run, its lines so far). Run once
    more when a broker of `target` (a PulsarBroker or a cluster) was stopped by a Java-level deadlock, after
    restarting it (`restart_deadlocked`, a reported retry), or when a broker of it logged the bookie's stall
    (BOOKIE_TIMEOUT) during the run with the tool idle (Window), as `run_workload` does (seen in a CI run: the
    bookie answered nothing for 30 s and the held run's commits timed out); any other failure is the test's."""
    for attempt in (1, 2):
        window = Window(broker_logs(target))
        run = target.start_workload(**kw)
        try:
            return run, run.wait_holding()
        except RuntimeError:
            run.proc.kill()
            if attempt == 2:
                raise
            if target.restart_deadlocked():
                continue
            stalled = window.cause(BOOKIE_TIMEOUT)
            if stalled is None:
                raise
            note_retry(f"{target.name}'s held workload run once more", stalled)
            target.wait_coordinators_ready()
    raise AssertionError("unreachable")


def finish_held(target, run: "WorkloadRun", action: str = "abort", timeout: float = 300) -> list[dict]:
    """`run.finish(action)` for a run holding transactions open (hold_workload). Ending them is what a 4.0.7
    broker can deadlock on (java_deadlock's abort callback): then restart that broker of `target` (a reported
    retry) and abort, through the admin API, what the run still held, so the next test starts without them.
    Any other failure is the test's."""
    try:
        return run.finish(action, timeout)
    except RuntimeError:
        if not target.restart_deadlocked():
            raise
    for rec in run.lines:
        if rec.get("event") == "txn" and rec.get("outcome") == "open":
            status, body = target.rest("POST", f"/admin/v3/transactions/abortTransaction/{rec['most']}/{rec['least']}")
            if not ended_or_gone(status, body):
                raise RuntimeError(f"aborting held ({rec['most']},{rec['least']}) after the restart: {status} {body}")
    return run.lines


def ended_or_gone(status: int, body: Any) -> bool:
    """An abort's answer that leaves nothing open: 2xx aborted; 4xx, or the 500 "The transaction with this
    txdID `(0,38)` not found" (also "`(1,5)`not found") a restarted 4.0.7 coordinator answers (seen in CI),
    for a transaction it no longer has (it had ended before the restart). Any other 5xx leaves it unknown:
    a failure."""
    if status < 500:
        return True
    return status == 500 and re.search(r"transaction with this txdID .*not found", str(body), re.I) is not None


class BrokerStartError(RuntimeError):
    pass


class PulsarBroker:
    """One real standalone broker with private ports and directories."""

    def __init__(
        self,
        extra_conf: dict[str, Any] | None = None,
        name: str = "pulsar",
        base_dir: str | None = None,
        version: str | None = None,
    ):
        self.name = name
        self.version = version  # None: the pinned release of harness/pom.xml
        self.token: str | None = None  # a superuser's JWT when the broker authenticates (secured tests)
        self.extra_conf = dict(extra_conf or {})
        self.base = Path(base_dir or tempfile.mkdtemp(prefix=f"pulsar-txn-it-{name}-"))
        self.base.mkdir(parents=True, exist_ok=True)
        # The workload, BookieShell and other tools always run on the pinned release's classpath
        # (a newer client talks to any of the older brokers); the broker runs its own version's.
        self.tools_classpath = build_module()
        self.classpath = self.tools_classpath if version is None else _versions().classpath_for(version)
        self.java = _versions().java_for(version)  # 5.0's broker needs Java 21+
        self.proc: subprocess.Popen | None = None
        self.start_seconds: float | None = None
        self.starts = 0
        self._watchdog: threading.Timer | None = None
        self.broker_port = self.web_port = self.zk_port = self.bk_port = 0
        self.log_path = self.base / "broker.log"
        # called once when REST answers, before any coordinator is loaded (e.g. to set retention)
        self.on_rest_ready = None

    # ----------------------------------------------------------------- urls

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.broker_port}"

    @property
    def zk_connect(self) -> str:
        return f"127.0.0.1:{self.zk_port}"

    # ----------------------------------------------------------------- config

    def broker_conf(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "clusterName": "standalone",
            "bindAddress": "127.0.0.1",
            "advertisedAddress": "127.0.0.1",
            "brokerServicePort": self.broker_port,
            "webServicePort": self.web_port,
            "allowLoopback": "true",
            "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.NoopLoadManager",
            "loadBalancerEnabled": "false",
            # 2.10 dies at start without it on a VM: "Unable to read VM NIC speed"
            "loadBalancerOverrideBrokerNicSpeedGbps": 10,
            "managedLedgerDefaultEnsembleSize": 1,
            "managedLedgerDefaultWriteQuorum": 1,
            "managedLedgerDefaultAckQuorum": 1,
            # transactions
            "transactionCoordinatorEnabled": "true",
            "systemTopicEnabled": "true",
            "topicLevelPoliciesEnabled": "true",
            "transactionMetadataStoreProviderClassName": "org.apache.pulsar.transaction.coordinator.impl.MLTransactionMetadataStoreProvider",
            "transactionLogBatchedWriteEnabled": "false",
            "transactionPendingAckBatchedWriteEnabled": "false",
            "transactionLogBatchedWriteMaxDelayInMillis": 100,
            "transactionPendingAckBatchedWriteMaxDelayInMillis": 100,
            "transactionPendingAckLogIndexMinLag": 1,
            # fast rollover / trimming
            "managedLedgerMaxEntriesPerLedger": 10,
            "managedLedgerMinLedgerRolloverTimeMinutes": 0,
            "managedLedgerMaxLedgerRolloverTimeMinutes": 1,
            "managedLedgerDefaultMarkDeleteRateLimit": 0,
            "managedLedgerCursorPositionFlushSeconds": 1,
            "managedLedgerCursorMaxEntriesPerLedger": 10,
            "managedLedgerCursorRolloverTimeInSeconds": 1,
            "defaultRetentionTimeInMinutes": 0,
            "defaultRetentionSizeInMB": 0,
            "brokerDeleteInactiveTopicsEnabled": "false",
            # bookie (the same file is the embedded bookie's ServerConfiguration)
            "journalSyncData": "false",
            "journalMaxGroupWaitMSec": 1,
            "ledgerStorageClass": "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
            "dbStorage_writeCacheMaxSizeMb": 16,
            "dbStorage_readAheadCacheMaxSizeMb": 16,
            "dbStorage_rocksDB_blockCacheSize": 16777216,
            "diskUsageThreshold": 0.99,
            "diskUsageWarnThreshold": 0.99,
            "gcWaitTime": 60000,
            "bookkeeperNumberOfChannelsPerBookie": 1,
            "numIOThreads": 2,
            "numHttpServerThreads": 8,
            "statusFilePath": str(self.base / "status"),
        }
        if self._metadata_store_only():
            conf["bookiePort"] = self.bk_port  # the starter has no --bookkeeper-port any more
        conf.update(self.extra_conf)
        return conf

    def _write_files(self) -> None:
        conf = "".join(f"{k}={v}\n" for k, v in self.broker_conf().items())
        (self.base / "standalone.conf").write_text(conf)
        (self.base / "log4j2-broker.xml").write_text(_log4j_xml(str(self.log_path)))
        (self.base / "log4j2-shell.xml").write_text(_log4j_xml("STDOUT", quiet=("org.apache.zookeeper",)))
        (self.base / "bk.conf").write_text(
            f"metadataServiceUri=zk://127.0.0.1:{self.zk_port}/ledgers\n"
            f"zkServers=127.0.0.1:{self.zk_port}\n"
            "zkTimeout=30000\n"
        )
        (self.base / "status").write_text("OK\n")

    # ----------------------------------------------------------------- lifecycle

    def start(self, wipe: bool = True, timeout: float = READY_TIMEOUT) -> None:
        if not self.web_port:
            self.broker_port, self.web_port, self.zk_port, self.bk_port = (free_port() for _ in range(4))
        self._write_files()
        cmd = [
            self.java,
            *JVM_FLAGS,
            f"-Dlog4j.configurationFile={self.base / 'log4j2-broker.xml'}",
            "-cp",
            self.classpath,
            "org.apache.pulsar.PulsarStandaloneStarter",
            "-c",
            str(self.base / "standalone.conf"),
            "-nfw",
            "-nss",
            *self._starter_stores(),
            "-a",
            "127.0.0.1",
        ]
        if wipe:
            cmd.append("--wipe-data")
        env = dict(os.environ)
        if not self._metadata_store_only():
            env["PULSAR_STANDALONE_USE_ZOOKEEPER"] = "1"
        self.starts += 1
        STARTED.append(self.name)
        with open(self.log_path, "a") as out:
            out.write(f"\n===== harness start #{self.starts}: {' '.join(cmd[-16:])}\n")
            out.flush()
            t0 = time.monotonic()
            self.proc = subprocess.Popen(
                cmd, cwd=self.base, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._arm_watchdog(MAX_LIFETIME)
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0

    def _has_metadata_dir(self) -> bool:
        """PulsarStandaloneStarter has --metadata-dir since 2.11 (2.10.5 refuses it)."""
        return self.version is None or version_tuple(self.version) >= (2, 11)

    def _metadata_store_only(self) -> bool:
        """5.0's PulsarStandaloneStarter has no ZooKeeper options any more: its `--help` lists --metadata-url,
        --metadata-dir, --bookkeeper-dir, --num-bookies, --only-broker and --no-broker, and it refuses
        --bookkeeper-port ("Unknown options"). Its bookie's port comes from the conf's bookiePort."""
        return self.version is not None and version_tuple(self.version) >= (5, 0)

    def _starter_stores(self) -> list[str]:
        """The starter's metadata and bookie options for this line: ZooKeeper with the harness's own ports up to
        4.x, the local metadata store from 5.0 on."""
        data = self.base / "data"
        if self._metadata_store_only():
            return ["--metadata-dir", str(data / "metadata"), "--bookkeeper-dir", str(data / "bookkeeper")]
        return [
            "--zookeeper-port",
            str(self.zk_port),
            "--bookkeeper-port",
            str(self.bk_port),
            "--zookeeper-dir",
            str(data / "zookeeper"),
            "--bookkeeper-dir",
            str(data / "bookkeeper"),
            *(["--metadata-dir", str(data / "metadata")] if self._has_metadata_dir() else []),
        ]

    def _arm_watchdog(self, seconds: float) -> None:
        if self._watchdog:
            self._watchdog.cancel()
        proc = self.proc

        def kill() -> None:
            if proc and proc.poll() is None:
                with open(self.log_path, "a") as out:
                    out.write(f"\n===== harness watchdog: killing broker after {seconds}s\n")
                _kill_group(proc, signal.SIGKILL)

        self._watchdog = threading.Timer(seconds, kill)
        self._watchdog.daemon = True
        self._watchdog.start()

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        stage = "admin REST"
        last = ""
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise BrokerStartError(
                    f"broker exited with {self.proc and self.proc.returncode} before it was ready\n{self.log_tail()}"
                )
            try:
                if stage == "admin REST":
                    status, body = self.rest("GET", "/admin/v2/clusters", timeout=5)
                    if status == 200 and self.broker_conf()["clusterName"] in body:
                        stage = "tc assign topic"
                if stage == "tc assign topic":
                    status, body = self.rest(
                        "GET", "/admin/v2/persistent/pulsar/system/transaction_coordinator_assign/partitions", timeout=5
                    )
                    if status == 200 and body.get("partitions", 0) > 0:
                        stage = "coordinators ready"
                if stage == "coordinators ready" and self.on_rest_ready:
                    self.on_rest_ready(self)
                    self.on_rest_ready = None
                if stage == "coordinators ready":
                    # Verified on 4.0.7: a standalone broker creates the TC-assign partitioned-topic
                    # metadata but loads coordinator N only when a transactional client sends
                    # TcClientConnect for it; a REST lookup of the partition is not enough.
                    self.ping_coordinators(timeout=max(10.0, deadline - time.monotonic()))
                if stage == "coordinators ready":
                    status, body = self.rest("GET", "/admin/v3/transactions/coordinatorStats", timeout=10)
                    last = f"{status} {body}"
                    if status == 200 and body and all(v.get("state") == "Ready" for v in body.values()):
                        return
            except (OSError, ValueError) as e:  # connection refused, timeouts, bad JSON
                last = repr(e)
            time.sleep(1)
        raise BrokerStartError(
            f"broker not ready after {timeout}s (waiting for {stage}; last: {last})\n{self.log_tail()}"
        )

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if self._watchdog:
            self._watchdog.cancel()
            self._watchdog = None
        if proc is None or proc.poll() is not None:
            return
        _kill_group(proc, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            _kill_group(proc, signal.SIGKILL)
            proc.wait(30)

    def restart(self, extra_conf: dict[str, Any] | None = None, timeout: float = READY_TIMEOUT) -> None:
        """Stop and start again on the same data (no wipe), optionally with changed config."""
        if extra_conf:
            self.extra_conf.update(extra_conf)
        self.stop()
        self.start(wipe=False, timeout=timeout)

    def cleanup(self) -> None:
        self.stop()
        if os.environ.get("PULSAR_TXN_IT_KEEP") != "1":
            shutil.rmtree(self.base / "data", ignore_errors=True)

    def log_tail(self, chars: int = 20000) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no broker log)"
        return text[-chars:]

    def bookie_stalled(self, since: int = 0) -> str | None:
        """The broker log's first line saying the bookie did not answer in time (BOOKIE_TIMEOUT), or None."""
        return self.logged(BOOKIE_TIMEOUT, since)

    def log_mark(self) -> int:
        """Where the broker log ends now: `logged(needle, since=mark)` reads only what comes after it."""
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def logged(self, needle: str, since: int = 0) -> str | None:
        """The broker log's first line holding needle (from byte `since` on), or None."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(since)
                lines = (raw.decode(errors="replace") for raw in log)
                return next((line.strip() for line in lines if needle in line), None)
        except OSError:
            return None

    def deadlock(self) -> str | None:
        """The broker JVM's Java-level deadlock in one line (java_deadlock), or None."""
        return java_deadlock(self.proc.pid) if self.proc is not None and self.proc.poll() is None else None

    def restart_deadlocked(self) -> bool:
        """Restart the broker if its JVM is deadlocked (a reported retry); True if it was."""
        found = self.deadlock()
        if found is None:
            return False
        note_retry(f"{self.name} restarted after a Java-level deadlock", found)
        self.restart()
        self.wait_coordinators_ready()
        return True

    def bookie_threads(self, chars: int = 12000) -> str:
        """The stacks of the embedded bookie's write path (jcmd Thread.print), for a failure's report: twice
        a session broker's bookie stopped answering writes for minutes, and its log did not say why."""
        if self.proc is None or self.proc.poll() is not None:
            return "(broker not running)"
        dump = thread_dump(self.proc.pid, timeout=30)
        if dump is None:
            return "(no thread dump)"
        wanted = ("BookieJournal", "ForceWrite", "SyncThread", "db-storage", "BookieWriteThreadPool", "bookie-io")
        stacks = [block for block in dump.split("\n\n") if block.startswith('"') and any(w in block for w in wanted)]
        return "\n\n".join(stacks)[:chars] or "(no bookie thread found)"

    # ----------------------------------------------------------------- REST

    def rest(self, method: str, path: str, body: Any = None, timeout: float = 60, raw: bool = False) -> tuple[int, Any]:
        """HTTP call to the broker's web service; returns (status, parsed JSON or text)."""
        data = None
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.admin_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, payload = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, payload = e.code, e.read()
        text = payload.decode("utf-8", errors="replace")
        if raw:
            return status, text
        if not text:
            return status, None
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def set_dynamic_config(self, name: str, value: Any) -> int:
        value = str(value).lower() if isinstance(value, bool) else str(value)
        status, body = self.rest("POST", f"/admin/v2/brokers/configuration/{name}/{urllib.parse.quote(value, safe='')}")
        if status not in (200, 204):
            raise RuntimeError(f"set_dynamic_config {name}={value}: HTTP {status} {body}")
        # The update goes through the metadata store; wait until this broker applied it.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            st, runtime = self.rest("GET", "/admin/v2/brokers/configuration/runtime")
            if st == 200 and str(runtime.get(name)).lower() == value.lower():
                return status
            time.sleep(0.5)
        raise RuntimeError(f"dynamic config {name}={value} not applied after 30s")

    def coordinator_ids(self) -> list[int]:
        status, body = self.rest("GET", "/admin/v2/persistent/pulsar/system/transaction_coordinator_assign/partitions")
        return list(range(body["partitions"]))

    def reload_coordinators(self, timeout: float = 120) -> None:
        """Unload every TC-assign partition so each coordinator reopens with the current config."""
        for tc in self.coordinator_ids():
            status, body = self.rest(
                "PUT", f"/admin/v2/persistent/pulsar/system/transaction_coordinator_assign-partition-{tc}/unload"
            )
            if status not in (200, 204):
                raise RuntimeError(f"unload of TC assign partition {tc}: HTTP {status} {body}")
        self.wait_coordinators_ready(timeout)

    def ping_coordinators(self, count: int = 0, timeout: float = 120) -> None:
        """Open+abort transactions with a real client so every coordinator gets (re)loaded."""
        n = count or 2 * max(1, len(self.coordinator_ids()))
        self.run_workload(timeout=timeout, ping=n)

    def wait_coordinators_ready(self, timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                self.ping_coordinators(timeout=max(10.0, deadline - time.monotonic()))
                status, last = self.rest("GET", "/admin/v3/transactions/coordinatorStats", timeout=10)
                if status == 200 and last and all(v.get("state") == "Ready" for v in last.values()):
                    # the TC must also be served again (lookup answers)
                    return last
            except OSError as e:
                last = repr(e)
            time.sleep(1)
        raise RuntimeError(f"coordinators not Ready after {timeout}s: {last}")

    def unload_topic(self, topic: str) -> int:
        """Unload a topic (e.g. 'public/default/t' or a partitioned topic) so its pending-ack stores reopen."""
        status, _ = self.rest("PUT", f"/admin/v2/persistent/{topic}/unload")
        return status

    def tc_internal_stats(self, tc: int = 0, metadata: bool = False) -> dict:
        status, body = self.rest(
            "GET", f"/admin/v3/transactions/coordinatorInternalStats/{tc}?metadata={'true' if metadata else 'false'}"
        )
        if status != 200:
            raise RuntimeError(f"coordinatorInternalStats/{tc}: HTTP {status} {body}")
        return body

    def pending_ack_internal_stats(self, topic: str, sub: str, metadata: bool = False) -> dict:
        status, body = self.rest(
            "GET",
            f"/admin/v3/transactions/pendingAckInternalStats/{topic}/"
            f"{urllib.parse.quote(sub, safe='')}"
            f"?metadata={'true' if metadata else 'false'}",
        )
        if status != 200:
            raise RuntimeError(f"pendingAckInternalStats {topic} {sub}: HTTP {status} {body}")
        return body

    # ----------------------------------------------------------------- java tools

    def _java(self, main: str, args: list[str], log4j: str, timeout: float, **kw) -> subprocess.CompletedProcess:
        cmd = [
            "java",
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j.configurationFile={log4j}",
            "-Dlog4j2.is.webapp=false",
            "-cp",
            self.tools_classpath,
            main,
            *args,
        ]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.base, **kw)

    def readledger(self, ledger_id: int, timeout: float = 120) -> str:
        """`BookieShell -entryformat hex readledger -m -l <id>` (the 4.17 spelling of `-ef hex`) against this broker's ZooKeeper; stdout+stderr text."""
        cmd = [
            "java",
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j.configurationFile={self.base / 'log4j2-shell.xml'}",
            "-Dlog4j2.is.webapp=false",
            "-cp",
            self.tools_classpath,
            "org.apache.bookkeeper.bookie.BookieShell",
            "-conf",
            str(self.base / "bk.conf"),
            "-entryformat",
            "hex",
            "readledger",
            "-m",
            "-l",
            str(ledger_id),
        ]
        res = subprocess.run(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, cwd=self.base
        )
        if res.returncode != 0:
            raise RuntimeError(f"readledger {ledger_id} exited {res.returncode}:\n{res.stdout[-5000:]}")
        return res.stdout

    def workload_auth(self) -> dict[str, str]:
        """How TxnWorkload authenticates: with the superuser's JWT when the broker asks for one."""
        return {"token": self.token} if self.token else {}

    def workload_cmd(self, **kw: Any) -> list[str]:
        args = {"service-url": self.service_url, "admin-url": self.admin_url, **self.workload_auth()}
        for k, v in kw.items():
            args[k.replace("_", "-")] = str(v)
        flat = [x for k, v in args.items() for x in (f"--{k}", v)]
        return [
            "java",
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j.configurationFile={self.base / 'log4j2-workload.xml'}",
            "-Dlog4j2.is.webapp=false",
            "-cp",
            self.tools_classpath,
            "pulsartxn.harness.TxnWorkload",
            *flat,
        ]

    def run_workload(self, timeout: float = 300, **kw: Any) -> list[dict]:
        """Run TxnWorkload to completion; returns its JSON lines.

        Keywords: seed, txns, aborts, ops (per txn), parallel, prefix, partitions, hold (held txns are
        committed at once because stdin is closed), txn_timeout_sec, drain (N rounds of acking every
        subscription's backlog in one committed transaction each; with txns=0).
        """
        window = Window({self.name: self.log_path})
        try:
            return self.start_workload(**kw).finish(timeout=timeout)
        except RuntimeError:
            if self.restart_deadlocked():
                return self.start_workload(**kw).finish(timeout=timeout)
            # Seen once each on this VM: the standalone's bookie stopped answering for about a minute
            # (ledger creation and adds timed out, the rest of the broker kept logging), and METRICS_LABELS.
            # Run once more only when the broker itself logged one of them during this run, with the tool
            # idle: a failure the workload saw but the broker did not log is the test's.
            cause = window.cause(BOOKIE_TIMEOUT, METRICS_LABELS)
            if cause is None:
                raise
            note_retry(f"{self.name}'s workload run once more", cause)
            self.wait_coordinators_ready()
            return self.start_workload(**kw).finish(timeout=timeout)

    def start_workload(self, **kw: Any) -> "WorkloadRun":
        (self.base / "log4j2-workload.xml").write_text(_log4j_xml(str(self.base / "workload.log"), level="INFO"))
        return WorkloadRun(self.workload_cmd(**kw), cwd=self.base)


class WorkloadRun:
    """A running TxnWorkload; with hold=K it stops after printing {"event":"holding"} until finish()."""

    def __init__(self, cmd: list[str], cwd: Path):
        self.proc = subprocess.Popen(
            cmd, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[dict] = []
        self._stderr: list[str] = []
        self._err_thread = threading.Thread(target=lambda: self._stderr.extend(self.proc.stderr), daemon=True)
        self._err_thread.start()

    def wait_holding(self, timeout: float = 300) -> list[dict]:
        """Read lines until the workload says it is holding transactions open."""
        timer = threading.Timer(timeout, self.proc.kill)
        timer.start()
        try:
            for line in self.proc.stdout:
                rec = json.loads(line)
                self.lines.append(rec)
                if rec.get("event") == "holding":
                    return list(self.lines)
                if rec.get("event") == "done":
                    break
        finally:
            timer.cancel()
        raise RuntimeError(
            f"workload did not hold transactions (exit {self.proc.poll()}):\n" + "".join(self._stderr)[-5000:]
        )

    def finish(self, action: str = "commit", timeout: float = 300) -> list[dict]:
        try:
            self.proc.stdin.write(action + "\n")
            self.proc.stdin.close()
        except (BrokenPipeError, ValueError):
            pass
        timer = threading.Timer(timeout, self.proc.kill)
        timer.start()
        try:
            for line in self.proc.stdout:
                line = line.strip()
                if line:
                    self.lines.append(json.loads(line))
            rc = self.proc.wait()
        finally:
            timer.cancel()
        self._err_thread.join(5)
        if rc != 0 or not self.lines or self.lines[-1].get("event") != "done":
            if rc == -9:
                raise RuntimeError(f"workload killed after {timeout}s timeout:\n" + "".join(self._stderr)[-8000:])
            raise RuntimeError(f"workload failed (exit {rc}):\n" + "".join(self._stderr)[-8000:])
        return list(self.lines)


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def version_tuple(version: str) -> tuple[int, ...]:
    """(5, 0, 0) from '5.0.0-M1' (a milestone sorts with its release), (2, 10, 5) from '2.10.5'."""
    return _versions().release(version)


def _versions():
    import versions  # tests/integration/versions.py, beside this module

    return versions


def start_broker(
    extra_conf: dict[str, Any] | None = None,
    name: str = "pulsar",
    attempts: int = 2,
    log=print,
    version: str | None = None,
) -> PulsarBroker:
    """Start a broker; one retry (fresh ports and directories) if the first start fails."""
    errors = []
    for attempt in range(attempts):
        broker = PulsarBroker(extra_conf, name=name, version=version)
        try:
            broker.start()
            log(
                f"harness: broker {name} ready in {broker.start_seconds:.1f}s at {broker.admin_url} (dir {broker.base})"
            )
            return broker
        except Exception as e:  # noqa: BLE001 - retried once, then reported
            errors.append(f"attempt {attempt + 1}: {e}")
            broker.cleanup()
            if attempt + 1 < attempts:
                note_retry(f"broker {name} started again on fresh ports", str(e).splitlines()[0] if str(e) else repr(e))
    raise BrokerStartError("\n\n".join(errors))


# Brokers started by the pytest session, so a failing test can show their logs (see conftest.py).
SESSION_BROKERS: list[PulsarBroker] = []


def start_broker_or_fail(
    extra_conf: dict[str, Any] | None = None, name: str = "pulsar", version: str | None = None
) -> PulsarBroker:
    """For tests: start a broker (one retry); a second failure FAILS the test, never skips."""
    import pytest

    try:
        broker = start_broker(extra_conf, name=name, version=version)
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"could not start a real Pulsar broker:\n{e}", pytrace=False)
    SESSION_BROKERS.append(broker)
    return broker


def release_broker(broker: PulsarBroker) -> None:
    if broker in SESSION_BROKERS:
        SESSION_BROKERS.remove(broker)
    broker.cleanup()


def txn_ids(lines: list[dict], outcome: str | None = None) -> list[tuple[int, int]]:
    return [
        (r["most"], r["least"])
        for r in lines
        if r.get("event") == "txn" and (outcome is None or r["outcome"] == outcome)
    ]


# --------------------------------------------------------------------------- ledger dumps


def parse_readledger(text: str) -> list[tuple[int, int, bytes]]:
    """Parse `readledger -m` hex output into (ledgerId, entryId, payload bytes).

    Note: the header's EntrySize is the ledger's cumulative length up to that entry
    (BookKeeper's LedgerEntry.getLength), not the entry's own size; use the hex lines.
    """
    import re

    header = re.compile(r"Lid=(\d+), Eid=(\d+), EntrySize=(\d+)")
    hexline = re.compile(r"^([0-9A-Fa-f]{8}) ((?:[0-9A-Fa-f]{2} ){1,16})")
    out: list[tuple[int, int, bytes]] = []
    cur: list[Any] | None = None
    for line in text.splitlines():
        m = header.search(line)
        if m:
            if cur:
                out.append((cur[0], cur[1], bytes(cur[3])))
            cur = [int(m.group(1)), int(m.group(2)), int(m.group(3)), bytearray()]
            continue
        h = hexline.match(line)
        if h and cur is not None:
            cur[3].extend(bytes.fromhex(h.group(2).replace(" ", "")))
    if cur:
        out.append((cur[0], cur[1], bytes(cur[3])))
    return out


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def batch_size(entry: bytes) -> int:
    """Records in an entry: 1 for an unbatched entry, else the count of repeated field 1.

    Counted from the wire format by hand, not by the project's codec, so the real-broker tests
    check the bytes without trusting the decoder they also test."""
    if not entry.startswith(b"\x0e\x01"):
        return 1
    buf, i, n = entry[4:], 0, 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, i = _varint(buf, i)
        elif wire == 2:
            ln, i = _varint(buf, i)
            i += ln
            if field == 1:
                n += 1
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"bad wire type {wire}")
    return n
