"""A stand-in Pulsar broker: a real HTTP server answering Pulsar's admin paths with Pulsar's JSON.

It exists because a real broker is not available in the fast suite (the integration suite has
one) and it lets the tests script situations a real broker reaches only slowly: an unload that
reopens a store, a dynamic setting changed elsewhere, ambiguous pending-ack names. Its shapes
follow Pulsar's admin REST (admin/v3/Transactions.java, admin/v2)
and the captured real answers in tests/fixtures/real/rest/. It is a stand-in, not the engine: the both-backends tests use the engine.
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, unquote, urlsplit

from tests.admin.scripted import ScriptedServer

T0 = 1_767_225_600_000

METRICS = """# HELP pulsar_txn_tc_bufferedwriter_batch_records Records per batch histogram
# TYPE pulsar_txn_tc_bufferedwriter_batch_records histogram
pulsar_txn_tc_bufferedwriter_batch_records_bucket{cluster="standalone",broker="localhost",le="10.0"} 3.0
pulsar_txn_tc_bufferedwriter_batch_records_bucket{cluster="standalone",broker="localhost",le="+Inf"} 4.0
pulsar_txn_tc_bufferedwriter_batch_records_count{cluster="standalone",broker="localhost"} 4.0
pulsar_txn_tc_bufferedwriter_batch_records_sum{cluster="standalone",broker="localhost"} 40.0
pulsar_txn_tc_bufferedwriter_batch_size_bytes_count{cluster="standalone",broker="localhost"} 4.0
pulsar_txn_tc_bufferedwriter_batch_size_bytes_sum{cluster="standalone",broker="localhost"} 2000.0
pulsar_txn_tc_bufferedwriter_batch_oldest_record_delay_seconds_bucket{cluster="standalone",broker="localhost",le="1.0"} 4.0
pulsar_txn_tc_bufferedwriter_batch_oldest_record_delay_seconds_bucket{cluster="standalone",broker="localhost",le="5.0"} 4.0
pulsar_txn_tc_bufferedwriter_batch_oldest_record_delay_seconds_bucket{cluster="standalone",broker="localhost",le="+Inf"} 4.0
pulsar_txn_tc_bufferedwriter_batch_oldest_record_delay_seconds_count{cluster="standalone",broker="localhost"} 4.0
pulsar_txn_tc_bufferedwriter_batch_oldest_record_delay_seconds_sum{cluster="standalone",broker="localhost"} 0.008
pulsar_txn_tc_bufferedwriter_flush_trigger_max_records_total{cluster="standalone",broker="localhost"} 1.0
pulsar_txn_tc_bufferedwriter_flush_trigger_max_size_total{cluster="standalone",broker="localhost"} 0.0
pulsar_txn_tc_bufferedwriter_flush_trigger_max_delay_total{cluster="standalone",broker="localhost"} 3.0
pulsar_txn_tc_bufferedwriter_flush_trigger_large_data_total{cluster="standalone",broker="localhost"} 0.0
"""


def ml_stats(name: str, ledgers: list[int]) -> dict:
    return {
        "managedLedgerName": name,
        "managedLedgerInternalStats": {
            "entriesAddedCounter": 3,
            "numberOfEntries": 3,
            "totalSize": 300,
            "currentLedgerEntries": 0,
            "currentLedgerSize": 0,
            "lastLedgerCreatedTimestamp": "2026-01-01T00:00:00Z",
            "waitingCursorsCount": 0,
            "pendingAddEntriesCount": 0,
            "lastConfirmedEntry": f"{ledgers[-1]}:-1",
            "state": "LedgerOpened",
            "ledgers": [
                {"ledgerId": l, "entries": 1, "size": 100, "offloaded": False, "underReplicated": False}
                for l in ledgers
            ],
            "cursors": {
                "transaction.subscription": {
                    "markDeletePosition": f"{ledgers[0]}:0",
                    "readPosition": f"{ledgers[-1]}:0",
                    "individuallyDeletedMessages": "[]",
                }
            },
        },
    }


class FakeBroker:
    def __init__(self, *, token: str | None = None, coordinators: int = 2, version: str = "4.0.7"):
        self.token = token
        self.version = version
        self.clock = T0
        self.dynamic: dict[str, str] = {}
        self.runtime = {
            "transactionLogBatchedWriteEnabled": "false",
            "transactionPendingAckBatchedWriteEnabled": "false",
            "transactionCoordinatorEnabled": "true",
        }
        self.coordinators = {i: self._opened() for i in range(coordinators)}
        self.subscriptions = {
            "persistent://public/default/my-topic": ["my-sub"],
            "persistent://public/default/a-b": ["c-d"],
            "persistent://public/default/a": ["x"],
        }
        self.pending_ack = {
            ("persistent://public/default/my-topic", "my-sub"): self._opened(),
            ("persistent://public/default/a-b", "c-d"): self._opened(),
        }
        self.unloaded: list[str] = []
        self.extra_routes: list = []  # a test's own routes, tried first
        self.server = ScriptedServer(self.handle)
        self.url = self.server.url

    def _opened(self) -> dict:
        self.clock += 1000
        return {"recoverStartTime": self.clock, "recoverEndTime": self.clock + 5}

    def close(self):
        self.server.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- routing ----------------------------------------------------------------------------

    def handle(self, request):
        if self.token and request.headers.get("Authorization") != f"Bearer {self.token}":
            # Echo the header back, as some proxies do, to prove the client scrubs answers.
            return 401, {}, {"reason": f"Authentication required, got {request.headers.get('Authorization')}"}
        parts = urlsplit(request.path)
        path, query = parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()}
        for pattern, method, fn in [*self.extra_routes, *self.routes()]:
            match = re.fullmatch(pattern, path)
            if match and method == request.method:
                answer = fn(
                    *[unquote(g) for g in match.groups()],
                    **({"query": query} if "query" in fn.__code__.co_varnames else {}),
                )
                if isinstance(answer, tuple):
                    return answer
                if isinstance(answer, str):
                    return 200, {"Content-Type": "text/plain"}, answer
                return (204, {}, b"") if answer is None else (200, {}, answer)
        return 404, {}, {"reason": f"no route for {request.method} {path}"}

    def routes(self):
        txn = "/admin/v3/transactions"
        topic = r"([^/]+)/([^/]+)/([^/]+)"
        return [
            (f"{txn}/coordinatorStats", "GET", self.coordinator_stats),
            (
                f"{txn}/coordinatorInternalStats/(\\d+)",
                "GET",
                lambda i: {
                    "transactionLogStats": ml_stats(f"pulsar/system/persistent/__transaction_log_{i}", [10, 12])
                },
            ),
            (f"{txn}/pendingAckStats/{topic}/([^/]+)", "GET", self.pending_ack_stats),
            (
                f"{txn}/pendingAckInternalStats/{topic}/([^/]+)",
                "GET",
                lambda t, n, l, s: {
                    "pendingAckLogStats": ml_stats(f"{t}/{n}/persistent/{l}-{s}__transaction_pending_ack", [20])
                },
            ),
            (f"{txn}/transactionMetadata/(\\d+)/(\\d+)", "GET", self.txn_meta),
            (f"{txn}/slowTransactions/(\\d+)", "GET", lambda ms, query=None: {"(0,7)": self.txn_meta("0", "7")}),
            (
                f"{txn}/transactionBufferStats/{topic}",
                "GET",
                lambda t, n, l: {
                    "state": "Ready",
                    "maxReadPosition": "30:4",
                    "lastSnapshotTimestamps": T0,
                    "ongoingTxnSize": 0,
                    "recoverStartTime": T0,
                    "recoverEndTime": T0 + 1,
                },
            ),
            (
                f"{txn}/transactionBufferInternalStats/{topic}",
                "GET",
                lambda t, n, l: (405, {}, {"reason": "Snapshot segment is not enabled"}),
            ),
            (
                r"/admin/v2/persistent/pulsar/system/transaction_coordinator_assign/partitions",
                "GET",
                lambda: {"partitions": len(self.coordinators)},
            ),
            (
                r"/lookup/v2/topic/persistent/" + topic,
                "GET",
                lambda t, n, l: {
                    "brokerUrl": "pulsar://127.0.0.1:6650",
                    "httpUrl": self.url,
                    "nativeUrl": "pulsar://127.0.0.1:6650",
                },
            ),
            (r"/admin/v2/tenants", "GET", lambda: ["public", "pulsar"]),
            (r"/admin/v2/namespaces/([^/]+)", "GET", lambda t: [f"{t}/default"] if t == "public" else [f"{t}/system"]),
            (r"/admin/v2/namespaces/([^/]+)/([^/]+)/topics", "GET", self.namespace_topics),
            (r"/admin/v2/persistent/" + topic + "/subscriptions", "GET", self.topic_subscriptions),
            (r"/admin/v2/persistent/" + topic + "/unload", "PUT", self.unload),
            (r"/admin/v2/brokers/configuration", "GET", lambda: sorted(self.runtime)),
            (r"/admin/v2/brokers/configuration/values", "GET", lambda: dict(self.dynamic)),
            (r"/admin/v2/brokers/configuration/runtime", "GET", lambda: {**self.runtime, **self.dynamic}),
            (r"/admin/v2/brokers/configuration/([^/]+)/([^/]+)", "POST", self.update_config),
            (r"/admin/v2/clusters", "GET", lambda: ["standalone"]),
            (
                r"/admin/v2/clusters/standalone",
                "GET",
                lambda: {"serviceUrl": self.url, "brokerServiceUrl": "pulsar://127.0.0.1:6650"},
            ),
            (r"/admin/v2/brokers/standalone", "GET", lambda: [self.url.split("://")[1]]),
            (r"/metrics/?", "GET", lambda: METRICS),
            (r"/admin/v2/brokers/version", "GET", lambda: self.version),
        ]

    # --- handlers -------------------------------------------------------------------------------

    def _coordinator(self, i: int) -> dict:
        opened = self.coordinators[i]
        return {"state": "Ready", "leastSigBits": 7, "lowWaterMark": 0, "ongoingTxnSize": 1, **opened}

    def coordinator_stats(self, query):
        if "coordinatorId" in query:
            i = int(query["coordinatorId"])
            return (
                self._coordinator(i)
                if i in self.coordinators
                else (404, {}, {"reason": f"Transaction coordinator {i} not found"})
            )
        return {str(i): self._coordinator(i) for i in self.coordinators}

    def pending_ack_stats(self, tenant, ns, local, sub, query):
        key = (f"persistent://{tenant}/{ns}/{local}", sub)
        if key not in self.pending_ack:
            return 404, {}, {"reason": "Subscription not found"}
        return {
            "state": "Ready",
            "lowWaterMarks": {"0": 0} if query.get("lowWaterMarks") == "true" else None,
            "ongoingTxnSize": 0,
            **self.pending_ack[key],
        }

    def txn_meta(self, most, least):
        return {
            "txnId": f"({most},{least})",
            "status": "OPEN",
            "openTimestamp": T0,
            "timeoutAt": T0 + 60_000,
            "producedPartitions": {"persistent://public/default/my-topic": {"startPosition": "30:0", "aborted": False}},
            "ackedPartitions": {"persistent://public/default/my-topic": {"my-sub": {"cumulativeAckPosition": None}}},
        }

    def namespace_topics(self, tenant, ns, query):
        if f"{tenant}/{ns}" == "pulsar/system":
            names = [
                f"persistent://pulsar/system/transaction_coordinator_assign-partition-{i}" for i in self.coordinators
            ]
            names += [f"persistent://pulsar/system/__transaction_log_{i}" for i in self.coordinators]
            return names if query.get("includeSystemTopic") == "true" else []
        names = [t for t in self.subscriptions if t.startswith(f"persistent://{tenant}/{ns}/")]
        if query.get("includeSystemTopic") == "true":
            names += [f"{t}-{s}__transaction_pending_ack" for t, s in self.pending_ack]
            names.append(f"persistent://{tenant}/{ns}/gone-sub__transaction_pending_ack")
        return sorted(names)

    def topic_subscriptions(self, tenant, ns, local):
        name = f"persistent://{tenant}/{ns}/{local}"
        return self.subscriptions[name] if name in self.subscriptions else (404, {}, {"reason": "Topic not found"})

    def unload(self, tenant, ns, local):
        name = f"persistent://{tenant}/{ns}/{local}"
        self.unloaded.append(name)
        match = re.fullmatch(r"persistent://pulsar/system/transaction_coordinator_assign-partition-(\d+)", name)
        if match:
            self.coordinators[int(match.group(1))] = self._opened()
        for key in self.pending_ack:
            if key[0] == name:
                self.pending_ack[key] = self._opened()

    def update_config(self, name, value):
        if name not in self.runtime:
            return 404, {}, {"reason": f"Couldn't find configuration {name}"}
        if value not in ("true", "false"):
            return 412, {}, {"reason": "Invalid dynamic-config value"}
        self.dynamic[name] = value


def dumps(value) -> str:
    return json.dumps(value, sort_keys=True)
