"""--verify-entries: what decoding the dumps found, applied to a downgrade verdict (it can only fail it)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pulsar_txn_cli.downgrade.causes import CAUSE_INCONSISTENT
from pulsar_txn_cli.downgrade.verdict import BLOCKED, WAIT, DowngradeVerdict


@dataclass(frozen=True)
class EntryScan:
    """What decoding the given dumps found: batched entries per ledger, and decode failures."""

    batched: dict  # ledgerId -> (managed ledger name or None, number of batched entries)
    entries: int
    decode_errors: int
    error: str | None = None  # the dumps could not be read at all


def apply_entry_scan(result: DowngradeVerdict, scan: EntryScan) -> DowngradeVerdict:
    """Fail the verdict when a batched entry sits in a ledger the ledger ids said was past the
    last batched one (batching was on after the record), or when the dumps could not be read."""
    blocked, waiting = [], []
    if scan.error:
        waiting.append(f"--verify-entries: {scan.error}")
    if scan.decode_errors:
        waiting.append(
            f"--verify-entries: {scan.decode_errors} of {scan.entries} entries could not be decoded, "
            "so they may be batched"
        )
    owner = {ledger: item for item in result.items for ledger in (item.observation.ledgers or ())}
    items = {id(i): i for i in result.items}
    for ledger, (_managed_ledger, count) in sorted(scan.batched.items()):
        item = owner.get(ledger)
        if item is None or item.last_batched_ledger_id is None:
            continue  # a ledger already deleted, or not recorded yet (already not clear)
        if ledger > item.last_batched_ledger_id:
            blocked.append(
                f"--verify-entries: {count} batched entr{'y' if count == 1 else 'ies'} in ledger {ledger} of "
                f"{item.observation.label}, after its recorded last batched ledger {item.last_batched_ledger_id}: "
                "batching was on after the record, so the record cannot be trusted; make sure batching is off, "
                "then `pulsar-txn downgrade reset` and check again"
            )
            items[id(item)] = replace(
                item, clear=False, cause=CAUSE_INCONSISTENT, reason=f"batched entries found in ledger {ledger}"
            )
    if not blocked and not waiting:
        return result
    fixed = lambda group: [items[id(i)] for i in group]  # noqa: E731
    verdict = BLOCKED if blocked or result.verdict == BLOCKED else WAIT
    return replace(
        result,
        verdict=verdict,
        coordinators=fixed(result.coordinators),
        subscriptions=fixed(result.subscriptions),
        problems=result.problems + blocked + waiting,
    )
