"""A real multi-broker Pulsar cluster for the `cluster` tests: ZooKeeper, one bookie and N brokers,
each its own JVM, from the same Maven Central classpath as the standalone harness (harness.py).

Set up the way Pulsar's docs set up a cluster: ZooKeeper first, then `initialize-cluster-metadata`
(PulsarClusterMetadataSetup, which also formats BookKeeper's metadata), then
`initialize-transaction-coordinator-metadata` with COORDINATORS coordinators, then the bookie, then
the brokers (PulsarBrokerStarter). The classpath is an argument, so the same class runs any Pulsar
line whose jars another step resolved (the versions helper, PIP-160's rolling downgrade); a broker
can be restarted alone, or with another classpath.

Ports are free ports on 127.0.0.1; every directory is private to one PulsarCluster; every process
runs in its own process group with a watchdog, and `stop()` kills them all.
"""

from __future__ import annotations

import json
import os
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

import harness
from harness import BrokerStartError, WorkloadRun, _kill_group, _log4j_xml, free_port

COORDINATORS = 4
CLUSTER = "cluster-a"
READY_TIMEOUT = float(os.environ.get("PULSAR_TXN_CLUSTER_READY_TIMEOUT", "240"))
MAX_LIFETIME = float(os.environ.get("PULSAR_TXN_CLUSTER_MAX_LIFETIME", "5400"))

HEAPS = {
    "zookeeper": ["-Xms64m", "-Xmx256m"],
    "bookie": ["-Xms128m", "-Xmx512m", "-XX:MaxDirectMemorySize=256m"],
    "broker": ["-Xms128m", "-Xmx768m", "-XX:MaxDirectMemorySize=512m"],
    "tool": ["-Xmx256m", "-XX:TieredStopAtLevel=1"],
}


class Proc:
    """One JVM of the cluster: its command, log, process group and watchdog."""

    def __init__(self, name: str, base: Path):
        self.name = name
        self.log_path = base / f"{name}.log"
        self.proc: subprocess.Popen | None = None
        self._watchdog: threading.Timer | None = None

    def start(self, cmd: list[str], cwd: Path) -> None:
        with open(self.log_path, "a") as out:
            out.write(f"\n===== cluster harness: start {self.name}\n")
            out.flush()
            self.proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        proc = self.proc
        self._watchdog = threading.Timer(
            MAX_LIFETIME, lambda: proc.poll() is None and _kill_group(proc, signal.SIGKILL)
        )
        self._watchdog.daemon = True
        self._watchdog.start()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """SIGKILL: a crash (no graceful unload); SIGTERM: a clean stop."""
        proc, self.proc = self.proc, None
        if self._watchdog:
            self._watchdog.cancel()
            self._watchdog = None
        if proc is None or proc.poll() is not None:
            return
        _kill_group(proc, sig)
        try:
            proc.wait(40)
        except subprocess.TimeoutExpired:
            _kill_group(proc, signal.SIGKILL)
            proc.wait(30)

    def tail(self, chars: int = 6000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return f"(no {self.name} log)"


class Broker:
    def __init__(self, cluster: "PulsarCluster", index: int):
        self.cluster = cluster
        self.index = index
        self.name = f"broker-{index}"
        self.web_port, self.broker_port = free_port(), free_port()
        self.proc = Proc(self.name, cluster.base)
        self.classpath = cluster.classpath
        self.version = cluster.version
        self.extra_conf: dict[str, Any] = {}  # this broker's own broker.conf lines (on top of the cluster's)
        self.start_seconds: float | None = None

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.broker_port}"

    @property
    def address(self) -> str:
        """How the cluster lists this broker (GET /admin/v2/brokers/CLUSTER)."""
        return f"127.0.0.1:{self.web_port}"

    def conf(self) -> dict[str, Any]:
        c = self.cluster
        zk = f"127.0.0.1:{c.broker_zk_port or c.zk_port}"  # a proxy's port when the link is under test
        conf: dict[str, Any] = {
            "clusterName": c.name,
            "metadataStoreUrl": f"zk:{zk}",
            "configurationMetadataStoreUrl": f"zk:{zk}",
            "zookeeperServers": zk,
            "configurationStoreServers": zk,  # the names before 2.10/3.0
            "bindAddress": "127.0.0.1",
            "advertisedAddress": "127.0.0.1",
            "brokerServicePort": self.broker_port,
            "webServicePort": self.web_port,
            "functionsWorkerEnabled": "false",
            # 2.10 dies at start without it on a VM ("Unable to read VM NIC speed"; harness.py)
            "loadBalancerOverrideBrokerNicSpeedGbps": 10,
            "managedLedgerDefaultEnsembleSize": 1,
            "managedLedgerDefaultWriteQuorum": 1,
            "managedLedgerDefaultAckQuorum": 1,
            "transactionCoordinatorEnabled": "true",
            "systemTopicEnabled": "true",
            "topicLevelPoliciesEnabled": "true",
            "transactionMetadataStoreProviderClassName": "org.apache.pulsar.transaction.coordinator.impl.MLTransactionMetadataStoreProvider",
            "transactionLogBatchedWriteEnabled": "false",
            "transactionPendingAckBatchedWriteEnabled": "false",
            "transactionLogBatchedWriteMaxDelayInMillis": 100,
            "transactionPendingAckBatchedWriteMaxDelayInMillis": 100,
            "transactionPendingAckLogIndexMinLag": 1,
            "acknowledgmentAtBatchIndexLevelEnabled": "true",
            "managedLedgerMaxEntriesPerLedger": 50,
            "managedLedgerMinLedgerRolloverTimeMinutes": 0,
            "managedLedgerMaxLedgerRolloverTimeMinutes": 1,
            "managedLedgerCursorPositionFlushSeconds": 1,
            "managedLedgerCursorMaxEntriesPerLedger": 10,
            "managedLedgerCursorRolloverTimeInSeconds": 1,
            "defaultRetentionTimeInMinutes": 0,
            "defaultRetentionSizeInMB": 0,
            "brokerDeleteInactiveTopicsEnabled": "false",
            "bookkeeperNumberOfChannelsPerBookie": 1,
            "numIOThreads": 2,
            "numHttpServerThreads": 8,
            "managedLedgerCacheSizeMB": 32,
            # a killed broker stays registered (and owns its coordinators) for 20 s
            "zooKeeperSessionTimeoutMillis": 20000,
            "metadataStoreSessionTimeoutMillis": 20000,
            "statusFilePath": str(c.base / f"{self.name}.status"),
        }
        conf.update(c.extra_conf)
        conf.update(self.extra_conf)
        return conf

    def start(self, classpath: str | None = None, version: str | None = None) -> None:
        """Start this broker; with classpath or version, on that Pulsar line (a rolling upgrade or downgrade)."""
        if version:
            self.version, self.classpath = version, classpath or harness._versions().classpath_for(version)
        elif classpath:
            self.classpath = classpath
        c = self.cluster
        conf_path = c.base / f"{self.name}.conf"
        conf_path.write_text("".join(f"{k}={v}\n" for k, v in self.conf().items()))
        (c.base / f"{self.name}.status").write_text("OK\n")
        log4j = c.base / f"log4j2-{self.name}.xml"
        log4j.write_text(_log4j_xml(str(self.proc.log_path)))
        cmd = [
            harness._versions().java_for(self.version),  # 5.0's broker needs Java 21+
            *HEAPS["broker"],
            *harness.JVM_COMMON,
            f"-Dlog4j.configurationFile={log4j}",
            "-cp",
            self.classpath,
            "org.apache.pulsar.PulsarBrokerStarter",
            "--broker-conf",
            str(conf_path),
        ]
        self.proc.start(cmd, c.base)

    def rest(
        self, method: str, path: str, body: Any = None, timeout: float = 30, follow: bool = True
    ) -> tuple[int, Any]:
        return _rest(self.admin_url, method, path, body, timeout, follow, self.cluster.token)

    def ready(self) -> bool:
        try:
            status, body = self.rest("GET", "/admin/v2/brokers/ready", timeout=5)
            return status == 200
        except OSError:
            return False


class PulsarCluster:
    """ZooKeeper, a bookie and N brokers; start() returns when every coordinator is Ready."""

    def __init__(
        self,
        classpath: str | None = None,
        brokers: int = 2,
        name: str = CLUSTER,
        coordinators: int = COORDINATORS,
        extra_conf: dict[str, Any] | None = None,
        base_dir: str | None = None,
        version: str | None = None,
    ):
        # The workload always runs on the pinned release's classpath (a newer client talks to the
        # older brokers, as in harness.py); ZooKeeper, the bookie, the metadata tools and the brokers
        # run the cluster's own line: `classpath`, else `version`'s (versions.py), else the pinned one.
        self.tools_classpath = harness.build_module()
        self.version = version
        self.classpath = classpath or (harness._versions().classpath_for(version) if version else self.tools_classpath)
        self.token: str | None = None  # a superuser's JWT when the brokers authenticate (secured tests)
        self.name = name
        self.coordinator_count = coordinators
        self.extra_conf = dict(extra_conf or {})
        self.base = Path(base_dir or tempfile.mkdtemp(prefix=f"pulsar-txn-cluster-{name}-"))
        self.base.mkdir(parents=True, exist_ok=True)
        self.zk_port, self.bookie_port = free_port(), free_port()
        self.broker_zk_port: int | None = None  # where the brokers reach ZooKeeper, if not zk_port (a proxy)
        self.broker_bookie_port: int | None = None  # where the brokers reach the bookie, if not bookie_port (a proxy)
        self.zookeeper = Proc("zookeeper", self.base)
        self.bookie = Proc("bookie", self.base)
        self.brokers = [Broker(self, i) for i in range(brokers)]
        self.timings: dict[str, float] = {}

    # ----------------------------------------------------------------- lifecycle

    def start(self, timeout: float = READY_TIMEOUT) -> None:
        t0 = time.monotonic()
        deadline = t0 + timeout
        harness.STARTED.append(self.name)
        try:
            self._start_zookeeper(deadline)
            self.timings["zookeeper"] = time.monotonic() - t0
            self._initialize_metadata()
            self.timings["metadata"] = time.monotonic() - t0
            self._start_bookie(deadline)
            self.timings["bookie"] = time.monotonic() - t0
            for broker in self.brokers:
                broker.start()
            self.wait_brokers(deadline - time.monotonic())
            self.timings["brokers"] = time.monotonic() - t0
            self.spread_coordinators(deadline)
            self.wait_coordinators_ready(max(30.0, deadline - time.monotonic()))
            self.timings["ready"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for p in [*(b.proc for b in self.brokers), self.bookie, self.zookeeper]:
            p.kill(signal.SIGKILL)

    def cleanup(self) -> None:
        self.stop()
        if os.environ.get("PULSAR_TXN_IT_KEEP") != "1":
            shutil.rmtree(self.base / "data", ignore_errors=True)

    def _start_zookeeper(self, deadline: float) -> None:
        data = self.base / "data" / "zookeeper"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.base / "zoo.cfg"
        cfg.write_text(
            f"tickTime=2000\ndataDir={data}\nclientPort={self.zk_port}\nclientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\nmaxSessionTimeout=60000\nminSessionTimeout=2000\n"
            "4lw.commands.whitelist=*\n"
        )
        log4j = self.base / "log4j2-zookeeper.xml"
        log4j.write_text(_log4j_xml(str(self.zookeeper.log_path)))
        self.zookeeper.start(
            [
                "java",
                *HEAPS["zookeeper"],
                *harness.JVM_COMMON,
                f"-Dlog4j.configurationFile={log4j}",
                "-cp",
                self.classpath,
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(cfg),
            ],
            self.base,
        )
        while time.monotonic() < deadline:
            if not self.zookeeper.alive:
                raise BrokerStartError(f"ZooKeeper exited\n{self.zookeeper.tail()}")
            if self.four_letter("ruok") == "imok":
                return
            time.sleep(0.5)
        raise BrokerStartError(f"ZooKeeper not ready\n{self.zookeeper.tail()}")

    def four_letter(self, word: str, timeout: float = 5) -> str:
        try:
            with socket.create_connection(("127.0.0.1", self.zk_port), timeout=timeout) as s:
                s.sendall(word.encode())
                chunks = []
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
        except OSError:
            return ""

    def _initialize_metadata(self) -> None:
        """As Pulsar's docs do it: cluster metadata (and BookKeeper's), then the coordinators'."""
        zk = f"127.0.0.1:{self.zk_port}"
        first = self.brokers[0]
        setup = [
            "--cluster",
            self.name,
            "--web-service-url",
            first.admin_url,
            "--broker-service-url",
            first.service_url,
            "--initial-num-transaction-coordinators",
            str(self.coordinator_count),
        ]
        # 2.10 spells the stores --zookeeper/--configuration-store; newer lines --metadata-store/...
        self._tool(
            "org.apache.pulsar.PulsarClusterMetadataSetup",
            [
                setup + ["--metadata-store", f"zk:{zk}", "--configuration-metadata-store", f"zk:{zk}"],
                setup + ["--zookeeper", zk, "--configuration-store", zk],
            ],
            "initialize-cluster-metadata",
        )
        self._tool(
            "org.apache.pulsar.PulsarTransactionCoordinatorMetadataSetup",
            [
                [
                    "--cluster",
                    self.name,
                    "--configuration-store",
                    zk,
                    "--initial-num-transaction-coordinators",
                    str(self.coordinator_count),
                ]
            ],
            "initialize-transaction-coordinator-metadata",
        )

    def _tool(self, main: str, variants: list[list[str]], what: str) -> None:
        log4j = self.base / "log4j2-tool.xml"
        log4j.write_text(_log4j_xml(str(self.base / "tools.log")))
        failures = []
        for args in variants:
            cmd = [
                "java",
                *HEAPS["tool"],
                "-Djava.net.preferIPv4Stack=true",
                f"-Dlog4j.configurationFile={log4j}",
                "-cp",
                self.classpath,
                main,
                *args,
            ]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=self.base)
            if res.returncode == 0:
                return
            failures.append(f"{' '.join(args)} -> exit {res.returncode}:\n{(res.stdout + res.stderr)[-3000:]}")
        raise BrokerStartError(f"{what} failed:\n" + "\n".join(failures))

    def _start_bookie(self, deadline: float) -> None:
        data = self.base / "data" / "bookie"
        for sub in ("journal", "ledgers"):
            (data / sub).mkdir(parents=True, exist_ok=True)
        conf = self.base / "bookie.conf"
        conf.write_text(
            "\n".join(
                [
                    f"bookiePort={self.bookie_port}",
                    "advertisedAddress=127.0.0.1",
                    "listeningInterface=lo",
                    "allowLoopback=true",
                    "useHostNameAsBookieID=false",
                    f"metadataServiceUri=zk+null://127.0.0.1:{self.zk_port}/ledgers",
                    f"zkServers=127.0.0.1:{self.zk_port}",
                    f"journalDirectories={data / 'journal'}",
                    f"ledgerDirectories={data / 'ledgers'}",
                    "ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage",
                    "dbStorage_writeCacheMaxSizeMb=16",
                    "dbStorage_readAheadCacheMaxSizeMb=16",
                    "dbStorage_rocksDB_blockCacheSize=16777216",
                    "journalSyncData=false",
                    "journalMaxGroupWaitMSec=1",
                    "diskUsageThreshold=0.99",
                    "diskUsageWarnThreshold=0.99",
                    "gcWaitTime=60000",
                    "httpServerEnabled=false",
                    "numAddWorkerThreads=2",
                    "numReadWorkerThreads=2",
                    "numJournalCallbackThreads=2",
                    "serverNumIOThreads=2",
                    "zkTimeout=30000",
                    "",
                ]
            )
        )
        log4j = self.base / "log4j2-bookie.xml"
        log4j.write_text(_log4j_xml(str(self.bookie.log_path)))
        self.bookie.start(
            [
                "java",
                *HEAPS["bookie"],
                *harness.JVM_COMMON,
                f"-Dlog4j.configurationFile={log4j}",
                "-cp",
                self.classpath,
                "org.apache.bookkeeper.server.Main",
                "--conf",
                str(conf),
            ],
            self.base,
        )
        wanted = f"/ledgers/available/127.0.0.1:{self.bookie_port}"
        while time.monotonic() < deadline:
            if not self.bookie.alive:
                raise BrokerStartError(f"the bookie exited\n{self.bookie.tail()}")
            if wanted in self.four_letter("dump"):  # its ephemeral registration node
                if self.broker_bookie_port:
                    self._advertise_bookie_port(self.broker_bookie_port)
                return
            time.sleep(0.5)
        raise BrokerStartError(f"the bookie did not register\n{self.bookie.tail()}")

    def _advertise_bookie_port(self, port: int) -> None:
        """Point the bookie's registration at `port` (a proxy in front of it), so the brokers reach it there.

        A bookie binds its advertised address and port, so no proxy can sit on that address; but a BookKeeper
        client connects to the `bookie-rpc` endpoint the bookie publishes in its registration node, which is
        rewritten here. The bookie writes that node again only when it registers again (a restart), and
        `_start_bookie` then calls this again."""
        from kazoo.client import KazooClient  # only the faults tests put a proxy there

        node = f"/ledgers/available/127.0.0.1:{self.bookie_port}"
        zk = KazooClient(hosts=f"127.0.0.1:{self.zk_port}", timeout=10)
        zk.start(timeout=30)
        try:
            info, _ = zk.get(node)
            zk.set(node, _endpoint_port(info, port))
        finally:
            zk.stop()
            zk.close()

    def restart_bookie(self, timeout: float = READY_TIMEOUT, down: float = 0) -> None:
        """The bookie killed (SIGKILL), `down` seconds without it, then started on its data until registered."""
        self.bookie.kill(signal.SIGKILL)
        time.sleep(down)
        self._start_bookie(time.monotonic() + timeout)

    def restart_zookeeper(self, timeout: float = READY_TIMEOUT, down: float = 0) -> None:
        """ZooKeeper killed (SIGKILL), `down` seconds without it, then started on its data until it answers."""
        self.zookeeper.kill(signal.SIGKILL)
        time.sleep(down)
        self._start_zookeeper(time.monotonic() + timeout)

    # ----------------------------------------------------------------- brokers

    def broker(self, index: int) -> Broker:
        return self.brokers[index]

    @property
    def admin_url(self) -> str:
        return self.brokers[0].admin_url

    def live_brokers(self) -> list[Broker]:
        return [b for b in self.brokers if b.proc.alive]

    def wait_brokers(self, timeout: float) -> None:
        """Every running broker answers `ready` and the cluster lists exactly the running ones."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for b in self.brokers:
                if b.proc.proc is not None and not b.proc.alive:
                    raise BrokerStartError(f"{b.name} exited\n{b.proc.tail()}")
            live = self.live_brokers()
            if live and all(b.ready() for b in live):
                try:
                    status, listed = live[0].rest("GET", f"/admin/v2/brokers/{self.name}", timeout=10)
                    last = f"{status} {listed}"
                    if status == 200 and sorted(listed) == sorted(b.address for b in live):
                        return
                except OSError as e:
                    last = repr(e)
            time.sleep(1)
        raise BrokerStartError(
            f"brokers not ready after {timeout:.0f}s (last: {last})\n"
            + "\n".join(f"--- {b.name}\n{b.proc.tail(3000)}" for b in self.brokers)
        )

    def kill_broker(self, index: int) -> None:
        """A crash: SIGKILL, no graceful unload; its ownerships move when its session expires."""
        self.brokers[index].proc.kill(signal.SIGKILL)

    def start_broker(
        self, index: int, classpath: str | None = None, timeout: float = READY_TIMEOUT, version: str | None = None
    ) -> float:
        """Start a stopped broker (optionally on another Pulsar line); seconds until the cluster lists it."""
        t0 = time.monotonic()
        broker = self.brokers[index]
        broker.start(classpath, version)
        self.wait_brokers(timeout)
        broker.start_seconds = time.monotonic() - t0
        return broker.start_seconds

    def restart_broker(
        self, index: int, classpath: str | None = None, timeout: float = READY_TIMEOUT, version: str | None = None
    ) -> float:
        """A clean stop (SIGTERM), then a start on the same data: with version, a rolling version change."""
        self.brokers[index].proc.kill(signal.SIGTERM)
        return self.start_broker(index, classpath, timeout, version)

    # ----------------------------------------------------------------- coordinators

    def rest(self, method: str, path: str, body: Any = None, timeout: float = 30) -> tuple[int, Any]:
        """Through the first live broker (it redirects to owners itself)."""
        live = self.live_brokers()
        if not live:
            raise OSError("no broker is running")
        return live[0].rest(method, path, body, timeout)

    def coordinator_owners(self) -> dict[int, str]:
        """Coordinator id -> the owning broker's web address (host:port), by lookup."""
        owners = {}
        for tc in range(self.coordinator_count):
            status, body = self.rest(
                "GET", f"/lookup/v2/topic/persistent/pulsar/system/transaction_coordinator_assign-partition-{tc}"
            )
            if status != 200:
                raise RuntimeError(f"lookup of coordinator {tc}: HTTP {status} {body}")
            owners[tc] = urllib.parse.urlsplit(body["httpUrl"]).netloc
        return owners

    def spread_coordinators(self, deadline: float) -> None:
        """Until every broker owns a coordinator: unload the bundle of a coordinator of the busiest
        broker, so the load manager places it again (it picks among brokers with no load)."""
        while time.monotonic() < deadline:
            owners = self.coordinator_owners()
            by_broker: dict[str, list[int]] = {}
            for tc, owner in owners.items():
                by_broker.setdefault(owner, []).append(tc)
            live = {b.address for b in self.live_brokers()}
            if live <= set(by_broker):
                return
            busiest = max(by_broker.values(), key=len)
            self._unload_bundle_of(busiest[-1])
            time.sleep(1)
        raise BrokerStartError(f"coordinators never spread over the brokers: {self.coordinator_owners()}")

    def _unload_bundle_of(self, tc: int) -> None:
        topic = f"persistent/pulsar/system/transaction_coordinator_assign-partition-{tc}"
        status, bundle = self.rest("GET", f"/lookup/v2/topic/{topic}/bundle")
        if status != 200:
            raise RuntimeError(f"bundle of coordinator {tc}: HTTP {status} {bundle}")
        status, body = self.rest(
            "PUT", f"/admin/v2/namespaces/pulsar/system/{urllib.parse.quote(bundle, safe='')}/unload"
        )
        if status not in (200, 204):
            raise RuntimeError(f"unload of bundle {bundle}: HTTP {status} {body}")

    def ping_coordinators(self, timeout: float = 120) -> None:
        self.run_workload(timeout=timeout, ping=2 * self.coordinator_count)

    def coordinator_stats(self) -> dict:
        status, body = self.rest("GET", "/admin/v3/transactions/coordinatorStats", timeout=20)
        if status != 200:
            raise RuntimeError(f"coordinatorStats: HTTP {status} {body}")
        return body

    def wait_coordinators_ready(self, timeout: float = 180) -> dict:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                self.ping_coordinators(timeout=max(20.0, deadline - time.monotonic()))
                stats = self.coordinator_stats()
                last = stats
                if len(stats) == self.coordinator_count and all(v.get("state") == "Ready" for v in stats.values()):
                    return stats
            except (OSError, RuntimeError, ValueError) as e:
                last = repr(e)[:2000]
            time.sleep(1)
        raise RuntimeError(f"coordinators not Ready after {timeout:.0f}s: {last}")

    # ----------------------------------------------------------------- workload

    def run_workload(self, timeout: float = 300, **kw: Any) -> list[dict]:
        window = harness.Window(harness.broker_logs(self))
        try:
            return self.start_workload(**kw).finish(timeout=timeout)
        except RuntimeError as exc:
            if self.restart_deadlocked():
                return self.start_workload(**kw).finish(timeout=timeout)
            if labels := window.cause(harness.METRICS_LABELS):  # the broker's own line, logged in this run
                harness.note_retry("cluster workload run once more", labels)
                return self.start_workload(**kw).finish(timeout=timeout)
            if "TimeoutException" not in str(exc) or "ping" in kw:
                raise
            # Seen on 4.0.7 (docs/real-broker-findings.md): right after an unload a subscribe can hang
            # for good when the topic was unloaded while its pending-ack store was still initialising.
            # Not what the tests check: unload the workload's topics once more and run it again.
            harness.note_retry(
                f"cluster workload rerun after unloading the '{kw.get('prefix')}' topics",
                harness._first_line_with(exc, "TimeoutException"),
            )
            self.unload_prefix(str(kw.get("prefix", "txn")))
            return self.start_workload(**kw).finish(timeout=timeout)

    def deadlocks(self) -> list[tuple[Broker, str]]:
        """(broker, its one-line report) for every running broker whose JVM reports a Java-level deadlock."""
        return [(b, d) for b in self.brokers if b.proc.alive and (d := harness.java_deadlock(b.proc.proc.pid))]

    def restart_deadlocked(self) -> bool:
        """Restart every deadlocked broker (`deadlocks`; each a reported retry); True if any was."""
        found = self.deadlocks()
        for b, deadlock in found:
            harness.note_retry(f"cluster {b.name} restarted after a Java-level deadlock", deadlock)
            self.restart_broker(b.index)
        if found:
            self.wait_coordinators_ready()
        return bool(found)

    def unload_prefix(self, prefix: str) -> None:
        status, names = self.rest("GET", "/admin/v2/namespaces/public/default/topics")
        for name in names if status == 200 else []:
            local = name.rsplit("/", 1)[-1]
            if local.startswith(prefix) and "__" not in local:
                self.rest("PUT", f"/admin/v2/persistent/public/default/{urllib.parse.quote(local)}/unload")

    def start_workload(self, **kw: Any) -> WorkloadRun:
        live = self.live_brokers()
        if not live:
            raise RuntimeError("no broker is running")
        log4j = self.base / "log4j2-workload.xml"
        log4j.write_text(_log4j_xml(str(self.base / "workload.log")))
        args = {
            "service-url": ",".join(b.service_url.removeprefix("pulsar://") for b in live),
            "admin-url": live[0].admin_url,
        }
        args["service-url"] = "pulsar://" + args["service-url"]
        if self.token:
            args["token"] = self.token
        for k, v in kw.items():
            args[k.replace("_", "-")] = str(v)
        flat = [x for k, v in args.items() for x in (f"--{k}", v)]
        cmd = [
            "java",
            *HEAPS["tool"],
            "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j.configurationFile={log4j}",
            "-Dlog4j2.is.webapp=false",
            "-cp",
            self.tools_classpath,
            "pulsartxn.harness.TxnWorkload",
            *flat,
        ]
        return WorkloadRun(cmd, cwd=self.base)

    def logs(self, chars: int = 4000) -> str:
        procs = [self.zookeeper, self.bookie, *(b.proc for b in self.brokers)]
        return "\n".join(f"----- {p.name} ({p.log_path})\n{p.tail(chars)}" for p in procs)


def _rest(
    base: str,
    method: str,
    path: str,
    body: Any = None,
    timeout: float = 30,
    follow: bool = True,
    token: str | None = None,
) -> tuple[int, Any]:
    """One HTTP call. Pulsar's 307s to the owning broker are followed with the same method (as
    pulsar-admin does) unless follow=False, which returns (307, {"location": ...})."""
    url = base + path
    for _ in range(6):
        status, payload, location = _once(method, url, body, timeout, token)
        if status not in (301, 302, 307, 308):
            break
        if not follow:
            return status, {"location": location}
        url = location
    text = payload.decode("utf-8", errors="replace")
    if not text:
        return status, None
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def _once(method: str, url: str, body: Any, timeout: float, token: str | None = None) -> tuple[int, bytes, str | None]:
    data = None
    headers = {"Accept": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(req, timeout=timeout) as resp:
            return resp.status, resp.read(), None
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("Location")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def start_cluster(classpath: str | None = None, attempts: int = 2, log=print, **kw: Any) -> PulsarCluster:
    """Start a cluster, once more on fresh ports and directories if that fails; keywords as
    PulsarCluster's (version="2.10.5" for another Pulsar line)."""
    errors = []
    for attempt in range(attempts):
        cluster = PulsarCluster(classpath, **kw)
        try:
            cluster.start()
            log(
                f"cluster harness: {cluster.name} ready in {cluster.timings['ready']:.1f}s "
                f"({', '.join(f'{k} {v:.1f}s' for k, v in cluster.timings.items())}) at "
                f"{', '.join(b.admin_url for b in cluster.brokers)} (dir {cluster.base})"
            )
            return cluster
        except Exception as e:  # noqa: BLE001 - retried once, then reported
            errors.append(f"attempt {attempt + 1}: {e}\n{cluster.logs(3000)}")
            cluster.cleanup()
            if attempt + 1 < attempts:
                harness.note_retry(
                    "cluster started again on fresh ports", str(e).splitlines()[0] if str(e) else repr(e)
                )
    raise BrokerStartError("\n\n".join(errors))


if __name__ == "__main__":
    # python tests/integration/cluster.py [VERSION]: start a cluster of that Pulsar line (default the
    # pinned one), print its start figures and every broker's version, and stop it.
    version = sys.argv[1] if len(sys.argv) > 1 else None
    started = start_cluster(attempts=1, version=version)
    try:
        print(f"cluster: coordinators {started.coordinator_owners()}")
        for b in started.brokers:
            print(f"cluster: {b.name} version {b.rest('GET', '/admin/v2/brokers/version')[1]}")
    finally:
        started.cleanup()


def _endpoint_port(info: bytes, port: int) -> bytes:
    """BookKeeper's registration data (protobuf BookieServiceInfoFormat: endpoints = 6, each with
    id = 1, port = 2, host = 3, protocol = 4) with the `bookie-rpc` endpoint's port replaced."""

    def fields(data: bytes):
        i = 0
        while i < len(data):
            key, i = _varint(data, i)
            if key & 7 == 0:
                value, i = _varint(data, i)
            elif key & 7 == 2:
                size, i = _varint(data, i)
                value, i = data[i : i + size], i + size
            else:
                raise ValueError(f"unexpected wire type {key & 7} in the bookie's registration: {info!r}")
            yield key, value

    def encode(items) -> bytes:
        out = b""
        for key, value in items:
            out += _put_varint(key) + (_put_varint(value) if key & 7 == 0 else _put_varint(len(value)) + value)
        return out

    top, replaced = [], 0
    for key, value in fields(info):
        if key == (6 << 3 | 2) and (4 << 3 | 2, b"bookie-rpc") in list(fields(value)):
            value = encode((k, port if k == (2 << 3) else v) for k, v in fields(value))
            replaced += 1
        top.append((key, value))
    if replaced != 1:
        raise ValueError(f"no single bookie-rpc endpoint in the bookie's registration: {info!r}")
    return encode(top)


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        value |= (byte & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if byte < 0x80:
            return value, i


def _put_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)
