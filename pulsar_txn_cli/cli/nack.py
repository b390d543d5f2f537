"""`pulsar-txn nack`: the Java client's negative-ack tracker (PIP-393), planned and simulated."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pulsar_txn_cli.cli import helptext
from pulsar_txn_cli.cli.common import command
from pulsar_txn_cli.cli.env import current

group = typer.Typer(
    cls=helptext.Group,
    help="Client memory of negative acks, before and after PIP-393 (Java client 4.0.2), and the precision to choose.",
    no_args_is_help=True,
)

Rate = Annotated[float, typer.Option("--rate", help="Messages nacked a second.")]
Bits = Annotated[
    int, typer.Option("--precision-bits", help="negativeAckPrecisionBitCnt: due times are trimmed to 2^N ms buckets.")
]
PerLedger = Annotated[
    int, typer.Option("--max-entries-per-ledger", help="managedLedgerMaxEntriesPerLedger of the broker.")
]
Batch = Annotated[
    int, typer.Option("--batch-size", help="Messages an entry holds, all nacked (K nacks into one entry).")
]


def register(app: typer.Typer) -> None:
    command(group, "plan")(plan)
    command(group, "simulate")(simulate)
    app.add_typer(group, name="nack")


def plan(
    rate: Rate,
    delay: Annotated[float, typer.Option("--delay", help="Seconds each nack is held (negativeAckRedeliveryDelay).")],
    bits: Bits = 8,
    per_ledger: PerLedger = 50_000,
    batch: Batch = 1,
    budget: Annotated[
        Optional[str],
        typer.Option(
            "--memory-budget",
            help="Client memory for nacks, e.g. 64MiB or 1GB: recommends the finest precision that fits.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Steady-state tracker memory of a workload, old design (before 4.0.2) and PIP-393's, and the precision to choose.

    Bytes are a model of the Java heap (compressed oops), held to JOL measurements of the real
    clients by the nack_java tests; see docs/nack.md.
    """
    from pulsar_txn_cli.nack.plan import Workload, parse_size
    from pulsar_txn_cli.nack.plan import plan as make_plan
    from pulsar_txn_cli.output import Result, Table, emit

    env = current()
    wanted = parse_size(budget) if budget is not None else None
    result = make_plan(Workload(rate, delay, bits, per_ledger, batch), wanted)
    before, after = result["before"], result["after"]
    summary = [
        {
            "design": "before 4.0.2 (pair map)",
            "bytes": _size(before["bytes"]),
            "perEntry": before["bytesPerEntry"],
            "detail": f"{before['slots']} slots for up to {before['peakEntries']} entries; late by up to {before['maxLateMs']} ms",
        },
        {
            "design": f"PIP-393, {bits} bits",
            "bytes": _size(after["bytes"]),
            "perEntry": after["bytesPerEntry"],
            "detail": f"{after['buckets']} buckets of {after['bucketMs']} ms, {after['ledgers']} bitmaps; early by up to {after['maxEarlyMs']} ms",
        },
    ]
    tables = [
        Table(
            [("design", "DESIGN"), ("bytes", "MEMORY"), ("perEntry", "BYTES/ENTRY"), ("detail", "WHY")],
            summary,
            title=f"{result['entries']} entries held ({rate:g}/s for {delay:g} s, batch {batch})",
        )
    ]
    lines = []
    if wanted is not None:
        rows = [{**r, "size": _size(r["bytes"]), "fits": "yes" if r["fits"] else "no"} for r in result["precisions"]]
        tables.append(
            Table(
                [
                    ("bits", "BITS"),
                    ("bucketMs", "BUCKET MS"),
                    ("size", "MEMORY"),
                    ("bytesPerEntry", "BYTES/ENTRY"),
                    ("maxEarlyMs", "EARLY BY <= MS"),
                    ("fits", f"FITS {budget}"),
                ],
                rows,
            )
        )
        choice = result["budget"]["recommendedPrecisionBits"]
        lines.append(
            f"recommended: --precision-bits {choice} (negativeAckPrecisionBitCnt={choice}), the finest that fits {budget}"
            if choice is not None
            else f"no precision up to {rows[-1]['bits']} bits fits {budget}: raise the budget or lower the rate or delay"
        )
    emit(Result(data=result, tables=tables, lines=lines), env)


def simulate(
    rate: Rate = 1000.0,
    delays: Annotated[
        Optional[list[float]],
        typer.Option(
            "--delay",
            help="Seconds a nack is held; repeat to draw each nack's delay from several (the first is the consumer's configured delay).",
            show_default=False,
        ),
    ] = None,
    duration: Annotated[
        float, typer.Option("--duration", help="Seconds of nacks to generate (simulated time).")
    ] = 60.0,
    bits: Bits = 8,
    per_ledger: PerLedger = 50_000,
    batch: Batch = 1,
    samples: Annotated[int, typer.Option("--samples", help="Memory samples over the run.")] = 10,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the delays drawn.")] = 1,
) -> None:
    """Drive both trackers with a generated workload: memory over time, time per timer run, redelivery error, the batch problem.

    Default: 1000 nacks/s held 20 s for 60 s of simulated time.
    """
    from pulsar_txn_cli.nack.simulate import SimWorkload
    from pulsar_txn_cli.nack.simulate import simulate as run
    from pulsar_txn_cli.output import Result, Table, emit

    env = current()
    delays_ms = tuple(int(round(d * 1000)) for d in (delays or [20.0]))
    result = run(SimWorkload(rate, delays_ms, duration, bits, per_ledger, batch, samples, seed))
    memory = [{**m, "before": _size(m["beforeBytes"]), "after": _size(m["afterBytes"])} for m in result["memory"]]
    timer = [
        {
            "design": name,
            **{f"timer_{k}": v for k, v in result["timer"][key].items()},
            **{f"error_{k}": v for k, v in result["error"][key].items()},
        }
        for name, key in (("before 4.0.2", "before"), (f"PIP-393, {bits} bits", "after"))
    ]
    for row in timer:
        row["work"] = row.get("timer_slotsScannedPerRun", row.get("timer_bucketsRedeliveredPerRun"))
    tables = [
        Table(
            [
                ("atS", "AT S"),
                ("beforeEntries", "OLD ENTRIES"),
                ("before", "OLD MEMORY"),
                ("afterEntries", "NEW ENTRIES"),
                ("afterBuckets", "NEW BUCKETS"),
                ("after", "NEW MEMORY"),
            ],
            memory,
            title="memory over time (Java heap, modelled)",
        ),
        Table(
            [
                ("design", "DESIGN"),
                ("timer_runs", "TIMER RUNS"),
                ("timer_meanMs", "MS/RUN"),
                ("timer_maxMs", "MAX MS/RUN"),
                ("work", "SLOTS|BUCKETS/RUN"),
                ("error_minMs", "ERR MIN"),
                ("error_p50Ms", "ERR P50"),
                ("error_maxMs", "ERR MAX"),
                ("error_late", "LATE"),
                ("error_early", "EARLY"),
                ("error_earlyWithSibling", "EARLY W/ SIBLING"),
            ],
            timer,
            title="timer runs (wall time of the Python model) and redelivery error (simulated ms; negative = early)",
        ),
        Table(
            [
                ("order", "NACKS (one entry)"),
                ("design", "DESIGN"),
                ("firstTimerMs", "FIRST TIMER MS"),
                ("entryRedeliveredAtMs", "ENTRY REDELIVERED AT MS"),
                ("msg10sLateMs", "10S MSG LATE BY MS"),
            ],
            result["batchProblem"],
            title="the PIP's batch problem",
        ),
    ]
    emit(Result(data=result, tables=tables), env)


def _size(count: int | None) -> str:
    if count is None:
        return "impossible"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.2f} {unit}"
    return f"{count} B"
