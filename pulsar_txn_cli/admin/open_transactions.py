"""Every open transaction; coordinator by coordinator when the broker cannot list them all at once.

Pulsar lists an open transaction (slowTransactions) with the stats of every topic it touched. A real 4.0.7
broker (docs/real-broker-findings.md) therefore fails the all-coordinators call while one coordinator is
not loaded (500), and while a topic one transaction touched is not loaded, as after a restart (500 naming
the topic, or no answer at all). Asking each coordinator then lists the others' transactions and names
those that could not be listed, with the error table's sentence for why: never an empty list that reads
as "none open".
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pulsar_txn_cli.errors import ConnectionFailed

# -1, not 0: the broker lists transactions open *longer* than the bound, and on the engine's still clock a
# transaction may be open for 0 ms.
EVERY_OPEN = -1


@dataclass
class OpenTransactions:
    transactions: dict = field(default_factory=dict)  # txn id -> Pulsar's TransactionMetadata
    unlisted: dict[int, str] = field(default_factory=dict)  # coordinator id -> why it could not be listed

    def unlisted_rows(self) -> list[dict]:
        """JSON's `unlistedCoordinators`."""
        return [{"coordinatorId": c, "error": why} for c, why in sorted(self.unlisted.items())]


def open_transactions(admin, coordinator_id: int | None = None, concurrency: int = 8) -> OpenTransactions:
    """One coordinator's (an error raises: it was asked for by name), or every coordinator's."""
    if coordinator_id is not None:
        return OpenTransactions(admin.slow_transactions(EVERY_OPEN, coordinator_id) or {})
    try:
        return OpenTransactions(admin.slow_transactions(EVERY_OPEN) or {})
    except ConnectionFailed as exc:
        if not _broker_could_not_list(exc):
            raise  # the target did not answer at all: nothing is known
    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="open-txns") as pool:
        coordinators = range(admin.tc_partitions())
        answers = list(zip(coordinators, pool.map(lambda c: _one(admin, c), coordinators)))
    found = OpenTransactions()
    for coordinator, (listed, why) in answers:
        found.transactions.update(listed)
        if why is not None:
            found.unlisted[coordinator] = why
    return found


def _one(admin, coordinator: int) -> tuple[dict, str | None]:
    try:
        return admin.slow_transactions(EVERY_OPEN, coordinator) or {}, None
    except ConnectionFailed as exc:
        if not _broker_could_not_list(exc):
            raise
        return {}, str(exc)


def _broker_could_not_list(exc: ConnectionFailed) -> bool:
    """An error answer, or none in time (the listing's hang): not an unreachable target."""
    return (exc.status is not None and exc.status >= 400) or exc.no_answer
