"""pulsar-admin's transaction commands, each declared once: its REST request, its options, its table.

An `AdminCall` says what `pulsar-admin transactions NAME` asks (method, path, query, body), with
pulsar-admin's option names and help, and the columns of its table. From it `PulsarAdmin.invoke`
builds the request (admin/client.py) and `cli/transactions.py` registers the command, so
docs/reference.md and the completions follow; only the engine's answer (engine/router.py), a captured
real answer and the tests are written by hand. A command whose behaviour is more than one request
(a fan-out, a fallback, a confirmation) is declared here all the same, its body written in the CLI.
Pure data: it imports only the leaves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from pulsar_txn_cli.names import TopicName
from pulsar_txn_cli.protocol import TXN

REQUIRED = ...  # a Param without a default: the option must be given


@dataclass(frozen=True)
class Param:
    """One input: the command's option (or argument) and where the request carries it.

    In the path when the path names it (`{name}`), else the query parameter `query`, else the body
    when the call says so; otherwise only the command reads it (a confirmation, a text form)."""

    name: str  # the Python keyword: the CLI function's and PulsarAdmin.invoke's
    flags: tuple[str, ...]  # pulsar-admin's option names, in the order the help shows them; () for an argument
    help: str
    type: type = str  # str, int, bool, list[str]; TopicName: a topic, typed as text, sent as tenant/ns/topic
    default: object = REQUIRED
    query: str | None = None
    omit_false: bool = False  # a false flag is left out of the query rather than sent as false
    show_default: bool | None = None  # None: typer's own choice
    metavar: str | None = None
    min: int | None = None
    max: int | None = None


@dataclass(frozen=True)
class AdminCall:
    """One command: its name (pulsar-admin's), its request (none for a composition of other calls),
    its help (the first sentence is the command list's summary) and its table."""

    name: str
    method: str | None
    path: str | None  # protocol.py's prefix and `{param}` segments
    params: tuple[Param, ...]
    help: str
    columns: tuple[tuple, ...] = ()  # (key, label) or (key, label, param): shown when that flag is given
    echo: tuple[str, ...] = ()  # inputs shown in the row before the answer's fields (cli/transactions.py)
    times: tuple[str, ...] = ()  # the answer's epoch-ms fields a table shows as UTC times
    log_stats: str | None = None  # the answer's key of a managed ledger's internal stats, shown as three tables
    body: str | None = None  # the param sent as the JSON body

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)

    def request(self, args: dict) -> tuple[str, dict | None, object]:
        """(path, query or None, body) of this call for these arguments (by Param name)."""
        if self.path is None:
            raise TypeError(f"{self.name} is a composition of other calls, not one request")
        unknown = set(args) - {p.name for p in self.params}
        if unknown:
            raise TypeError(f"{self.name} has no parameter {sorted(unknown)}")
        path = re.sub(r"\{(\w+)\}", lambda m: _segment(self.param(m.group(1)), args[m.group(1)]), self.path)
        query = {p.query: _query(p, args.get(p.name, _default(p))) for p in self.params if p.query}
        body = _typed(self.param(self.body), args[self.body]) if self.body else None
        return path, query or None, body

    def request_line(self, **args) -> str:
        """`METHOD path[?query]` of the request these arguments make, as evidence names it: a query
        parameter left unset or false (the broker's default) is not shown."""
        path, query, _ = self.request(args)
        shown = urlencode(
            {k: "true" if v is True else v for k, v in (query or {}).items() if v is not None and v is not False}
        )
        return f"{self.method} {path}" + (f"?{shown}" if shown else "")


def _default(p: Param):
    return None if p.default is REQUIRED else p.default


def _typed(p: Param, value):
    return int(value) if p.type is int else value


def _segment(p: Param, value) -> str:
    if p.type is TopicName:
        return TopicName(value).rest
    return str(int(value)) if p.type is int else quote(str(value), safe="")


def _query(p: Param, value):
    return None if (p.omit_false and not value) else value


# ---------------------------------------------------------------- the options several commands share


def _sub(*flags: str) -> Param:
    # pulsar-admin names the subscription option both ways; each command keeps its own order of the two
    return Param("subscription", ("-s", *flags), "The subscription.", show_default=False)


def _flag(name: str, flags: tuple[str, ...], help: str, query: str, **kw) -> Param:
    return Param(name, flags, help, bool, False, query, **kw)


TOPIC = Param(
    "topic",
    ("-t", "--topic"),
    "Topic: persistent://tenant/ns/topic, tenant/ns/topic or topic.",
    TopicName,
    show_default=False,
)
METADATA = _flag("metadata", ("-m", "--metadata"), "Include the ledgers' metadata.", "metadata")
LOW_WATER_MARK = _flag("low_water_mark", ("-l", "--low-water-mark"), "Include the low water marks.", "lowWaterMarks")
ONE_COORDINATOR = Param(
    "coordinator_id",
    ("-c", "--coordinator-id"),
    "One coordinator (default: all).",
    int,
    None,
    "coordinatorId",
    show_default=False,
    min=0,  # a coordinator id is a partition number: -1 is a usage error, not a request
)
MOST = Param(
    "most",
    ("-m", "--most-sig-bits"),
    "Most significant bits of the transaction id (the coordinator id).",
    int,
    show_default=False,
)
LEAST = Param(
    "least", ("-l", "--least-sig-bits"), "Least significant bits of the transaction id.", int, show_default=False
)
YES = Param("yes", ("--yes", "-y"), "Do not ask for confirmation.", bool, False)


def _txn_id(help: str) -> tuple[Param, ...]:
    """A transaction id as (most,least) or as -m/-l (the command parses which was given)."""
    return (
        Param("txn_id", (), help, default=None, show_default=False, metavar="[TXN_ID]"),
        Param(
            "most",
            ("-m", "--most-sig-bits"),
            "Most significant bits (the coordinator id).",
            int,
            None,
            show_default=False,
        ),
        Param("least", ("-l", "--least-sig-bits"), "Least significant bits.", int, None, show_default=False),
    )


# ---------------------------------------------------------------- the tables' columns

RECOVER_TIMES = ("recoverStartTime", "recoverEndTime")
STATS_COLUMNS = (
    ("coordinatorId", "coordinator"),
    ("state", "state"),
    ("leastSigBits", "sequence id"),
    ("lowWaterMark", "low water mark"),
    ("ongoingTxnSize", "ongoing"),
    ("recoverStartTime", "recover start"),
    ("recoverEndTime", "recover end"),
)
TXN_COLUMNS = (
    ("txnId", "txn id"),
    ("status", "status"),
    ("openTimestamp", "opened"),
    ("timeoutAt", "timeout"),
    ("producedPartitions", "produced"),
    ("ackedPartitions", "acked"),
)

# ---------------------------------------------------------------- the commands, in the order the help lists them

COORDINATORS_LIST = AdminCall(
    "coordinators-list",
    "GET",
    TXN + "/coordinators",
    (),
    "List the transaction coordinators and the broker that owns each.",
    # Pulsar's own answer keeps Pulsar's `id` (docs/output.md)
    columns=(("id", "coordinator"), ("brokerServiceUrl", "broker"), ("webServiceUrl", "web service")),
)

COORDINATOR_STATS = AdminCall(
    "coordinator-stats",
    "GET",
    TXN + "/coordinatorStats",
    (ONE_COORDINATOR,),
    "Stats of the transaction coordinators (state, sequence id, low water mark, recover times).",
    columns=STATS_COLUMNS,
    times=RECOVER_TIMES,
)

COORDINATOR_INTERNAL_STATS = AdminCall(
    "coordinator-internal-stats",
    "GET",
    TXN + "/coordinatorInternalStats/{coordinator_id}",
    (
        Param("coordinator_id", ("-c", "--coordinator-id"), "The coordinator id.", int, show_default=False, min=0),
        METADATA,
    ),
    "The coordinator's transaction-log managed ledger: ledgers, entries, cursor.",
    log_stats="transactionLogStats",
)

PENDING_ACK_STATS = AdminCall(
    "pending-ack-stats",
    "GET",
    TXN + "/pendingAckStats/{topic}/{subscription}",
    (TOPIC, _sub("--sub-name", "--subscription-name"), LOW_WATER_MARK),
    "Stats of a subscription's pending-ack handle.",
    # A pending-ack handle has no id, sequence id or low water mark of its own (those are a coordinator's).
    columns=(
        ("topic", "topic"),
        ("subscription", "subscription"),
        ("state", "state"),
        ("ongoingTxnSize", "ongoing"),
        ("recoverStartTime", "recover start"),
        ("recoverEndTime", "recover end"),
        ("lowWaterMarks", "low water marks", "low_water_mark"),
    ),
    echo=("topic", "subscription"),
    times=RECOVER_TIMES,
)

PENDING_ACK_INTERNAL_STATS = AdminCall(
    "pending-ack-internal-stats",
    "GET",
    TXN + "/pendingAckInternalStats/{topic}/{subscription}",
    (TOPIC, _sub("--subscription-name", "--sub-name"), METADATA),
    "The subscription's pending-ack managed ledger: ledgers, entries, cursor.",
    log_stats="pendingAckLogStats",
)

TRANSACTION_METADATA = AdminCall(
    "transaction-metadata",
    "GET",
    TXN + "/transactionMetadata/{most}/{least}",
    _txn_id("The transaction id as (most,least), as printed everywhere."),
    "Metadata of one transaction: status, timeout, produced and acknowledged partitions.",
    columns=TXN_COLUMNS,
)

SLOW_TRANSACTIONS = AdminCall(
    "slow-transactions",
    "GET",
    TXN + "/slowTransactions/{time}",  # milliseconds: the command parses the text
    (Param("time", ("-t", "--time"), "Older than this: 1s, 10s, 1m, 5h, 3d.", default="1s"), ONE_COORDINATOR),
    "Transactions open for longer than --time.",
    columns=TXN_COLUMNS,
)

ABORT_TRANSACTION = AdminCall(
    "abort-transaction",
    "POST",
    TXN + "/abortTransaction/{most}/{least}",
    (*_txn_id("The transaction id as (most,least)."), YES),
    "Abort an open transaction (PIP-325), e.g. one that holds readers back (see stuck-readers).",
    columns=(("txnId", "txn id"), ("aborted", "aborted"), ("target", "target")),
)

TRANSACTION_BUFFER_STATS = AdminCall(
    "transaction-buffer-stats",
    "GET",
    TXN + "/transactionBufferStats/{topic}",
    (
        TOPIC,
        LOW_WATER_MARK,
        _flag(
            "segment_stats",
            ("-s", "--segment-stats"),
            "Include segmented-snapshot stats.",
            "segmentStats",
            omit_false=True,
        ),
    ),
    "Stats of a topic's transaction buffer.",
    columns=(
        ("state", "state"),
        ("maxReadPosition", "max read position"),
        ("ongoingTxnSize", "ongoing"),
        ("lastSnapshotTimestamps", "last snapshot"),
        ("recoverStartTime", "recover start"),
        ("recoverEndTime", "recover end"),
    ),
    times=("lastSnapshotTimestamps", *RECOVER_TIMES),
)

BUFFER_SNAPSHOT_INTERNAL_STATS = AdminCall(
    "buffer-snapshot-internal-stats",
    "GET",
    TXN + "/transactionBufferInternalStats/{topic}",
    (TOPIC, METADATA),
    "Internal stats of the transaction buffer's snapshot system topics.",
)

SUBSCRIPTIONS = AdminCall(
    "subscriptions",
    None,  # the pending-ack topics of every namespace, each asked for its subscriptions (admin/discovery.py)
    None,
    (
        Param(
            "namespace",
            ("-n", "--namespace"),
            "Only these namespaces (tenant/ns); repeatable. Default: all.",
            list[str],
            None,
            show_default=False,
        ),
        Param("concurrency", ("--concurrency",), "Admin calls in flight at once.", int, 8, min=1, max=256),
    ),
    "Every subscription that uses transactions, from the pending-ack topics of all namespaces.",
    columns=(("topic", "topic"), ("subscription", "subscription"), ("status", "status")),
)

TRANSACTION_IN_BUFFER_STATS = AdminCall(
    "transaction-in-buffer-stats",
    "GET",
    TXN + "/transactionInBufferStats/{topic}/{most}/{least}",
    (TOPIC, MOST, LEAST),
    "One transaction in a topic's transaction buffer: where it starts and whether it was aborted.",
    columns=(("txnId", "txn id"), ("topic", "topic"), ("startPosition", "start position"), ("aborted", "aborted")),
    echo=("txnId", "topic"),
)

TRANSACTION_IN_PENDING_ACK_STATS = AdminCall(
    "transaction-in-pending-ack-stats",
    "GET",
    TXN + "/transactionInPendingAckStats/{topic}/{subscription}/{most}/{least}",
    (TOPIC, _sub("--sub-name", "--subscription-name"), MOST, LEAST),
    "One transaction in a subscription's pending-ack store: its cumulative ack position.",
    columns=(
        ("txnId", "txn id"),
        ("topic", "topic"),
        ("subscription", "subscription"),
        ("cumulativeAckPosition", "cumulative ack position"),
    ),
    echo=("txnId", "topic", "subscription"),
)

POSITION_STATS_IN_PENDING_ACK = AdminCall(
    "position-stats-in-pending-ack",
    "GET",
    TXN + "/positionStatsInPendingAck/{topic}/{subscription}/{ledger_id}/{entry_id}",
    (
        TOPIC,
        _sub("--subscription-name", "--sub-name"),
        Param("ledger_id", ("-l", "--ledger-id"), "The position's ledger id.", int, show_default=False),
        Param("entry_id", ("-e", "--entry-id"), "The position's entry id.", int, show_default=False),
        Param(
            "batch_index",
            ("-b", "--batch-index"),
            "The message's index in a batch.",
            int,
            None,
            "batchIndex",
            show_default=False,
        ),
    ),
    "Where one position stands in a subscription's pending-ack store (PendingAck, MarkDelete, ...).\n\n"
    "As in pulsar-admin, -l is the ledger id here, not a transaction's least significant bits.",
    columns=(("position", "position"), ("subscription", "subscription"), ("state", "state")),
    echo=("position", "subscription"),
)

SCALE_TRANSACTION_COORDINATORS = AdminCall(
    "scale-transactionCoordinators",
    "POST",
    TXN + "/transactionCoordinator/replicas",
    (
        Param(
            "replicas",
            ("-r", "--replicas"),
            "The new number of transaction coordinators (more than now; they never shrink).",
            int,
            show_default=False,
            min=1,
        ),
        YES,
    ),
    "Grow the number of transaction coordinators (the partitions of transaction_coordinator_assign).\n\n"
    "At most 1024: Pulsar only checks that the number grows, but it can never shrink again, and every\n"
    "coordinator is a partition with its own transaction log that each listing and check reads.",
    columns=(("replicas", "coordinators"), ("previous", "previous"), ("target", "target")),
    body="replicas",
)

COMMANDS: tuple[AdminCall, ...] = (
    COORDINATORS_LIST,
    COORDINATOR_STATS,
    COORDINATOR_INTERNAL_STATS,
    PENDING_ACK_STATS,
    PENDING_ACK_INTERNAL_STATS,
    TRANSACTION_METADATA,
    SLOW_TRANSACTIONS,
    ABORT_TRANSACTION,
    TRANSACTION_BUFFER_STATS,
    BUFFER_SNAPSHOT_INTERNAL_STATS,
    SUBSCRIPTIONS,
    TRANSACTION_IN_BUFFER_STATS,
    TRANSACTION_IN_PENDING_ACK_STATS,
    POSITION_STATS_IN_PENDING_ACK,
    SCALE_TRANSACTION_COORDINATORS,
)

BY_NAME = {call.name: call for call in COMMANDS}
