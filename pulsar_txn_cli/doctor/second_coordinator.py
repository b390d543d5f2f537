"""The doctor's check on Pulsar 5.0's scalable-topics coordinator (scalable_coordinator.py says what the tool
cannot see of it): the topics whose buffers hold its transactions, and the readers they hold."""

from __future__ import annotations

from pulsar_txn_cli.names import parse_bool
from pulsar_txn_cli.scalable_coordinator import SETTING, SecondCoordinator, beyond_classic

CHECK = "second-coordinator"
ADVICE = (
    "the admin API cannot abort them; on Pulsar 5.0.0-M1 their commits, aborts and timeouts never reached a "
    "persistent:// topic's buffer (its messages stayed unreadable), and a broker rolled back to 4.x cannot end "
    "them either (tried: 5.0.0-M1 to 4.2.4); keep clients that set scalableTransactions to scalable topics"
)


def from_reading(reading) -> SecondCoordinator | None:
    """The second coordinator as the doctor read it: the brokers' runtime settings, and per partition what its
    buffer counts (transactionBufferStats' ongoingTxnSize) beyond the classic coordinators' open transactions."""
    on = [
        url for url, broker in sorted(reading.brokers.items()) if parse_bool((broker.get("runtime") or {}).get(SETTING))
    ]
    if not on:
        return None
    found = SecondCoordinator(on)
    if reading.open_error or reading.unlisted:
        first = reading.open_error or next(iter(sorted(reading.unlisted.items())))[1]
        found.error = f"the classic coordinators' transactions could not all be listed: {first}"
        return found
    buffers = {
        partition: int((entry.get("stats") or {}).get("ongoingTxnSize") or 0)
        for partition, entry in reading.partitions.items()
        if not entry.get("error")
    }
    found.counted = beyond_classic(buffers, reading.open_txns)
    return found


def check(reading, found: SecondCoordinator, held: dict[str, dict]) -> list:
    """One warning per partition whose buffer counts transactions no classic coordinator lists. `held`:
    partition -> its partition_state (doctor/transactions.py), for the readers those transactions hold."""
    from pulsar_txn_cli.doctor.findings import WARNING, Finding, evidence
    from pulsar_txn_cli.doctor.transactions import BUFFER, SLOW, rest

    out = []
    for partition, count in sorted(found.counted.items()):
        view = held.get(partition) or {}
        summary = (
            f"its transaction buffer counts {count} open transaction(s) that no classic coordinator lists: "
            "Pulsar 5.0's scalable-topics coordinator's, which the admin API does not list, look up or abort"
        )
        if (view.get("entriesBehind") or 0) > 0:
            summary += (
                f"; readers wait at maxReadPosition {view['maxReadPosition']}, {view['entriesBehind']} entries "
                f"behind {view['lastConfirmedEntry']}"
            )
        out.append(
            Finding(
                CHECK,
                WARNING,
                partition,
                summary,
                [
                    evidence(
                        BUFFER.format(rest(partition)),
                        ongoingTxnSize=view.get("ongoingTxnSize"),
                        maxReadPosition=view.get("maxReadPosition"),
                    ),
                    evidence(SLOW, classicOpenTransactionsOnPartition=(view.get("ongoingTxnSize") or 0) - count),
                ],
                [],
                ADVICE,
            )
        )
    return out
