"""Property tests: whatever the cluster looks like, the verdict never says SAFE (or COMPLETE)
while anything it rests on is unclear, on, failed or unknown."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_txn_cli.downgrade import upgrade, verdict as v
from pulsar_txn_cli.downgrade.batched_since import baseline, since_last_check
from pulsar_txn_cli.downgrade.checkpoint import Checkpoint, Record
from pulsar_txn_cli.downgrade.observations import (
    COORDINATOR,
    SUBSCRIPTION,
    BrokerObservation,
    LogObservation,
    Observations,
    WriterCounters,
)
from pulsar_txn_cli.protocol import BATCH_INDEX_KEY, BATCH_KEYS
from pulsar_txn_cli.names import parse_bool as config_flag

TARGETS = ["http://a:8080", "http://b:8080"]
flag_values = st.sampled_from(["true", "false", "TRUE", "False", "", "1", None])
mostly_false = st.one_of(st.just("false"), st.just("false"), flag_values)
errors = st.one_of(st.none(), st.none(), st.sampled_from(["HTTP 500", "timed out", "connection refused"]))
ledger_ids = st.integers(min_value=0, max_value=30)
positions = st.one_of(st.none(), st.builds(lambda l, e: f"{l}:{e}", ledger_ids, st.integers(-1, 5)), st.just("junk"))


@st.composite
def configs(draw):
    config = {}
    for key in BATCH_KEYS + (BATCH_INDEX_KEY,):
        value = draw(mostly_false)
        if value is not None:
            config[key] = value
    return config


brokers = st.builds(
    lambda n, rt, ver, err: BrokerObservation(
        f"b{n}:8080", None if err == "none" else rt, ver, None if err in (None, "none") else err
    ),
    st.integers(0, 3),
    configs(),
    st.sampled_from(["4.0.4", "3.3.1", None]),
    st.one_of(errors, st.just("none")),
)
ledger_lists = st.one_of(st.none(), st.lists(ledger_ids, max_size=4, unique=True).map(lambda l: tuple(sorted(l))))
effective = st.sampled_from([False, False, False, True, None])
coordinators = st.builds(
    lambda cid, ledgers, eff, err, md, lac, txns: LogObservation(
        COORDINATOR,
        coordinator_id=cid,
        ledgers=ledgers,
        effective_batching=eff,
        error=err,
        mark_delete=md,
        last_confirmed=lac,
        ongoing_txns=txns,
    ),
    st.integers(0, 3),
    ledger_lists,
    effective,
    errors,
    positions,
    positions,
    st.one_of(st.none(), st.integers(0, 2)),
)
subscriptions = st.builds(
    lambda t, s, ledgers, eff, err, md, lac: LogObservation(
        SUBSCRIPTION,
        topic=f"persistent://public/default/t{t}",
        subscription=f"s{s}",
        ledgers=ledgers,
        effective_batching=eff,
        error=err,
        mark_delete=md,
        last_confirmed=lac,
    ),
    st.integers(0, 2),
    st.integers(0, 1),
    ledger_lists,
    effective,
    errors,
    positions,
    positions,
)


def _unique(items):
    seen, out = set(), []
    for item in items:
        if item.key not in seen:
            seen.add(item.key)
            out.append(item)
    return tuple(out)


def _counters(broker="http://b0:8080", created=1_000, tc=3, pa=4, error=None):
    return WriterCounters(broker, {"tc": created, "pendingAck": created}, {"tc": tc, "pendingAck": pa}, error)


# The counters a check may see: the same as the checkpoint's (QUIET), moved, restarted, unreadable, not gathered.
QUIET = (_counters(),)
writer_sets = st.sampled_from(
    [QUIET, QUIET, (_counters(tc=5),), (_counters(created=2_000, tc=0, pa=0),), (_counters(error="HTTP 500"),), None]
)


@st.composite
def observations(draw):
    return Observations(
        target=draw(st.sampled_from(TARGETS)),
        taken_at="2026-01-01T01:00:00Z",
        dynamic_config=draw(st.one_of(st.none(), configs())),
        dynamic_error=draw(errors),
        brokers=tuple(draw(st.lists(brokers, max_size=3))),
        brokers_error=draw(errors),
        coordinators=_unique(draw(st.lists(coordinators, max_size=4))),
        subscriptions=_unique(draw(st.lists(subscriptions, max_size=4))),
        problems=tuple(draw(st.lists(st.sampled_from(["namespace x failed"]), max_size=1))),
        writers=draw(writer_sets),
    )


records = st.builds(lambda l: Record(l, "2026-01-01T00:00:00Z"), ledger_ids)
checkpoints = st.one_of(
    st.none(),
    st.builds(
        Checkpoint,
        st.sampled_from(TARGETS),
        st.just("2026-01-01T00:00:00Z"),
        st.dictionaries(st.integers(0, 3), records, max_size=4),
        st.dictionaries(
            st.tuples(
                st.sampled_from([f"persistent://public/default/t{i}" for i in range(3)]), st.sampled_from(["s0", "s1"])
            ),
            records,
            max_size=4,
        ),
        st.sampled_from([baseline(QUIET, None), baseline(QUIET, None), None]),
    ),
)


def _everything_checked_off(o: Observations) -> bool:
    if o.dynamic_error or o.dynamic_config is None or o.brokers_error or not o.brokers or o.problems:
        return False
    if any(
        config_flag(o.dynamic_config.get(k)) is True
        or (o.dynamic_config.get(k) is not None and config_flag(o.dynamic_config.get(k)) is None)
        for k in BATCH_KEYS
    ):
        return False
    for b in o.brokers:
        if b.error or b.runtime is None or any(config_flag(b.runtime.get(k)) is not False for k in BATCH_KEYS):
            return False
    return bool(o.coordinators) and all(
        log.effective_batching is False and not log.error and log.ledgers for log in o.logs
    )


@settings(max_examples=300, deadline=None)
@given(observations(), checkpoints, st.one_of(st.none(), st.just("bad checkpoint")))
def test_downgrade_is_never_safe_unless_everything_was_seen_and_clear(o, cp, cp_error):
    result = v.downgrade_verdict(o, cp, checkpoint_error=cp_error)
    assert result.verdict in (v.SAFE, v.WAIT, v.BLOCKED)
    if result.verdict != v.SAFE:
        assert result.problems or not all(i.clear for i in result.items)
        return
    # SAFE: every batch setting off, every observation succeeded, every item clear against the
    # checkpoint it was given (a record taken in this very check can never clear its item).
    assert cp is not None and cp_error is None and cp.target == o.target
    assert _everything_checked_off(o)
    assert result.problems == [] and result.fixes == []
    for log in o.logs:
        record = cp.record_for(log.key)
        assert record is not None and min(log.ledgers) > record.last_batched_ledger_id
    assert all(i.clear for i in result.items)
    seen = {log.key for log in o.logs}
    assert all((("coordinator", cid) in seen) for cid in cp.coordinators)
    assert all((("subscription", t, s) in seen) for t, s in cp.subscriptions)


@settings(max_examples=150, deadline=None)
@given(observations(), checkpoints)
def test_records_only_grow_and_change_only_when_batching_may_have_run(o, cp):
    result = v.downgrade_verdict(o, cp)
    if result.checkpoint is None or cp is None or result.checkpoint.size < cp.size:
        return  # left alone, first check, or dropped because batching was seen on
    quiet = {log: since_last_check(cp.writers, o.writers, log).end is None for log in ("tc", "pendingAck")}
    for log, before, after in (
        ("tc", cp.coordinators, result.checkpoint.coordinators),
        ("pendingAck", cp.subscriptions, result.checkpoint.subscriptions),
    ):
        for key, record in before.items():
            assert after[key].last_batched_ledger_id >= record.last_batched_ledger_id
            if quiet[log]:  # (the cursor a record saw may move)
                assert (after[key].last_batched_ledger_id, after[key].recorded_at) == (
                    record.last_batched_ledger_id,
                    record.recorded_at,
                )


@settings(max_examples=150, deadline=None)
@given(observations(), checkpoints)
def test_the_first_check_is_never_safe(o, cp):
    assert v.downgrade_verdict(o, None).verdict != v.SAFE


@settings(max_examples=300, deadline=None)
@given(observations())
def test_upgrade_is_never_complete_unless_everything_was_seen_and_on(o):
    result = upgrade.upgrade_verdict(o)
    if result.verdict != upgrade.COMPLETE:
        assert result.problems
        return
    assert not (o.dynamic_error or o.brokers_error or o.problems) and o.brokers and o.coordinators
    assert len({b.version for b in o.brokers}) == 1 and all(b.version for b in o.brokers)
    for b in o.brokers:
        assert not b.error and all(config_flag(b.runtime.get(k)) is True for k in BATCH_KEYS)
    assert all(log.effective_batching is True and not log.error for log in o.logs)


# -- perturbations of a healthy cluster: SAFE exactly when nothing was perturbed ---------------

PERTURBATIONS = [
    "dynamic-on",
    "dynamic-garbage",
    "dynamic-error",
    "dynamic-missing",
    "runtime-on",
    "runtime-garbage",
    "runtime-missing",
    "broker-error",
    "brokers-error",
    "no-brokers",
    "problem",
    "log-error",
    "log-effective-on",
    "log-effective-unknown",
    "log-no-ledgers",
    "log-not-clear",
    "recorded-missing",
    "checkpoint-foreign",
    "checkpoint-error",
    "checkpoint-none",
    "record-missing",
    "no-coordinators",
    "writers-moved",
    "writers-restarted-and-batched",
    "writers-unreadable",
    "writers-not-kept",
    "writer-gone",
]


@st.composite
def perturbed(draw):
    """A healthy, drained cluster and its checkpoint, then a random subset of things gone wrong."""
    n_tc = draw(st.integers(1, 3))
    n_sub = draw(st.integers(0, 3))
    recorded = {i: draw(ledger_ids) for i in range(n_tc + n_sub)}
    logs = []
    for i in range(n_tc + n_sub):
        oldest = recorded[i] + draw(st.integers(1, 5))
        ledgers = tuple(range(oldest, oldest + draw(st.integers(1, 3))))
        if i < n_tc:
            logs.append(LogObservation(COORDINATOR, coordinator_id=i, ledgers=ledgers, effective_batching=False))
        else:
            logs.append(
                LogObservation(
                    SUBSCRIPTION,
                    topic=f"persistent://public/default/t{i}",
                    subscription="s",
                    ledgers=ledgers,
                    effective_batching=False,
                )
            )
    brokers_ = [
        BrokerObservation(f"b{i}:8080", {k: "false" for k in BATCH_KEYS}, "4.0.4")
        for i in range(draw(st.integers(1, 3)))
    ]
    writers = [_counters(f"http://b{i}:8080") for i in range(len(brokers_))]
    cp = Checkpoint(
        "http://a:8080",
        "t0",
        {i: Record(recorded[i], "t0") for i in range(n_tc)},
        {(logs[i].topic, "s"): Record(recorded[i], "t0") for i in range(n_tc, n_tc + n_sub)},
        baseline(tuple(writers), None),
    )
    state = dict(
        dynamic={},
        dynamic_error=None,
        brokers=brokers_,
        brokers_error=None,
        problems=(),
        logs=logs,
        cp=cp,
        cp_error=None,
        writers=writers,
    )
    chosen = draw(st.lists(st.sampled_from(PERTURBATIONS), max_size=3, unique=True))
    for name in chosen:
        _apply(name, state, draw)
    o = Observations(
        "http://a:8080",
        "t1",
        state["dynamic"],
        state["dynamic_error"],
        tuple(state["brokers"]),
        state["brokers_error"],
        tuple(l for l in state["logs"] if l.kind == COORDINATOR),
        tuple(l for l in state["logs"] if l.kind == SUBSCRIPTION),
        tuple(state["problems"]),
        writers=tuple(state["writers"]),
    )
    return o, state["cp"], state["cp_error"], chosen


def _has_record(cp, log) -> bool:
    if cp is None:
        return True  # checkpoint-none is itself a perturbation: the log's absence still counts
    if log.kind == COORDINATOR:
        return log.coordinator_id in cp.coordinators
    return (log.topic, log.subscription) in cp.subscriptions


def _apply(name, s, draw):
    from dataclasses import replace

    key = draw(st.sampled_from(BATCH_KEYS))
    pick = draw(st.integers(0, 10))
    logs, brokers_ = s["logs"], s["brokers"]
    li = pick % len(logs) if logs else 0
    bi = pick % len(brokers_) if brokers_ else 0
    if name.startswith("log-") or name in ("recorded-missing", "record-missing"):
        if not logs:
            return
    if name == "dynamic-on":
        s["dynamic"] = {**(s["dynamic"] or {}), key: "true"}
    elif name == "dynamic-garbage":
        s["dynamic"] = {**(s["dynamic"] or {}), key: "yes"}
    elif name == "dynamic-error":
        s["dynamic"], s["dynamic_error"] = None, "HTTP 500"
    elif name == "dynamic-missing":
        s["dynamic"] = None
    elif name in ("runtime-on", "runtime-garbage", "runtime-missing") and brokers_:
        runtime = dict(brokers_[bi].runtime or {})
        if name == "runtime-missing":
            runtime.pop(key, None)
        else:
            runtime[key] = "true" if name == "runtime-on" else "1"
        brokers_[bi] = replace(brokers_[bi], runtime=runtime)
    elif name == "broker-error" and brokers_:
        brokers_[bi] = replace(brokers_[bi], runtime=None, error="timed out")
    elif name == "brokers-error":
        s["brokers"], s["brokers_error"] = [], "HTTP 503"
    elif name == "no-brokers":
        s["brokers"] = []
    elif name == "problem":
        s["problems"] = ("namespace public/x could not be listed",)
    elif name == "log-error":
        logs[li] = replace(logs[li], ledgers=None, error="HTTP 500")
    elif name == "log-effective-on":
        logs[li] = replace(logs[li], effective_batching=True)
    elif name == "log-effective-unknown":
        logs[li] = replace(logs[li], effective_batching=None)
    elif name == "log-no-ledgers":
        logs[li] = replace(logs[li], ledgers=())
    elif name == "log-not-clear":
        record = s["cp"].record_for(logs[li].key) if s["cp"] else None
        low = record.last_batched_ledger_id if record else 0
        # (ledgers may be None when an earlier perturbation failed the read of this log)
        logs[li] = replace(logs[li], ledgers=(low - draw(st.integers(0, low)),) + (logs[li].ledgers or ()))
    elif name == "recorded-missing" and _has_record(s["cp"], logs[li]):
        # Only a log the checkpoint remembers can go missing: deleting one whose record an earlier
        # record-missing removed would leave a consistent, genuinely SAFE cluster.
        del logs[li]
    elif name == "checkpoint-foreign" and s["cp"] is not None:
        s["cp"] = replace(s["cp"], target="http://b:8080")
    elif name == "checkpoint-error":
        s["cp_error"] = "checkpoint is not valid JSON"
    elif name == "checkpoint-none":
        s["cp"] = None
    elif name == "record-missing" and s["cp"] is not None:
        log = logs[li]
        if log.kind == COORDINATOR:
            s["cp"] = replace(
                s["cp"], coordinators={k: r for k, r in s["cp"].coordinators.items() if k != log.coordinator_id}
            )
        else:
            s["cp"] = replace(
                s["cp"],
                subscriptions={k: r for k, r in s["cp"].subscriptions.items() if k != (log.topic, log.subscription)},
            )
    elif name == "no-coordinators":
        s["logs"][:] = [l for l in logs if l.kind != COORDINATOR]
    elif name.startswith("writer") and s["writers"]:
        # Batching on and off again since the last check, a restart whose spell cannot be ruled out, counters
        # that cannot be read, a checkpoint that kept none, a broker gone: each leaves the verdict short of SAFE.
        writers, wi = s["writers"], pick % len(s["writers"])
        recorded = s["cp"] is not None and s["cp"].subscriptions  # a writer with no record to raise changes nothing
        log = draw(st.sampled_from(["tc", "pendingAck"])) if recorded else "tc"
        if name == "writers-moved":
            writers[wi] = replace(
                writers[wi], batches={**writers[wi].batches, log: writers[wi].batches.get(log, 0) + 1}
            )
        elif name == "writers-restarted-and-batched":  # (a restart with no batch since can be harmless)
            writers[wi] = _counters(writers[wi].broker, created=5_000, tc=1, pa=1)
        elif name == "writers-unreadable":
            writers[wi] = replace(writers[wi], created_ms={}, batches={}, error="HTTP 500")
        elif name == "writers-not-kept" and s["cp"] is not None:
            s["cp"] = replace(s["cp"], writers=None)
        elif name == "writer-gone":
            del writers[wi]


@settings(max_examples=400, deadline=None)
@given(perturbed())
def test_safe_exactly_when_nothing_went_wrong(case):
    o, cp, cp_error, chosen = case
    result = v.downgrade_verdict(o, cp, checkpoint_error=cp_error)
    if not chosen:
        assert result.verdict == v.SAFE, result.problems
    else:
        assert result.verdict in (v.WAIT, v.BLOCKED), chosen
        assert result.problems or not all(i.clear for i in result.items)
