"""The sample dump shipped in the package (used by docs/decode.md)."""

from __future__ import annotations

from importlib import resources

SAMPLE = resources.files("pulsar_txn_cli") / "samples" / "txn-logs.jsonl"


def test_sample_dump_decodes_cleanly_with_every_kind_of_entry(cli):
    result = cli(["decode", str(SAMPLE), "-o", "json"])
    assert result.exit_code == 0, result.stderr
    kinds = {(e["log"], e["batched"]) for e in result.json()}
    assert kinds == {("tc", False), ("tc", True), ("pending-ack", False), ("pending-ack", True)}
    ops = {r.get("metadataOp") or r.get("pendingAckOp") for e in result.json() for r in e["records"]}
    assert ops == {"NEW", "ADD_PARTITION", "ADD_SUBSCRIPTION", "UPDATE", "ACK", "COMMIT", "ABORT"}
    assert "decoded 12 entries (27 records)" in result.stderr
