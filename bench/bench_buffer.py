"""Transaction buffer on the engine: publish/abort throughput and recovery time, single vs segmented.

Recovery is what a broker does on topic load: read the last snapshot, then replay the topic
after its maxReadPosition. With N aborted transactions the single snapshot holds all N ids in
one entry; the segmented form reads N / capacity segments plus the index.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path


def _run(directory: Path, aborted: int, segmented: bool) -> dict:
    from pulsar_txn_cli.names import TxnID
    from pulsar_txn_cli.engine.buffer.service import BufferService
    from pulsar_txn_cli.engine.clock import Clock
    from pulsar_txn_cli.engine.store import Store

    topic = "persistent://public/default/bench"
    settings = {
        "transactionBufferSegmentedSnapshotEnabled": segmented,
        "transactionBufferSnapshotSegmentSize": 16384,
        "transactionBufferSnapshotMaxTransactionCount": 1000,
    }
    store = Store(directory, create=True)
    service = BufferService(store, Clock(store), lambda name, default: settings.get(name, default))
    started = time.perf_counter()
    for n in range(aborted):
        service.publish(topic, b"payload", TxnID(0, n))
        service.end(topic, TxnID(0, n), committed=False)
    service.buffer(topic).take_snapshot()
    for _ in range(200):  # a tail to replay after the snapshot
        service.publish(topic, b"tail")
    written = time.perf_counter() - started
    store.close()

    store = Store(directory, create=False)
    service = BufferService(store, Clock(store), lambda name, default: settings.get(name, default))
    started = time.perf_counter()
    buffer = service.buffer(topic)
    recovered = time.perf_counter() - started
    assert all(buffer.is_aborted(TxnID(0, n)) for n in range(0, aborted, max(aborted // 10, 1)))
    store.close()
    return {"ops_per_s": 2 * aborted / written, "recover_ms": recovered * 1000}


def main(argv: list[str]) -> None:
    sizes = [1000, 5000] if "--quick" not in argv else [500]
    print(f"{'aborted txns':>12} {'form':>9} {'publish+abort ops/s':>20} {'recovery ms':>12}")
    for aborted in sizes:
        for segmented in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                figures = _run(Path(tmp) / "engine", aborted, segmented)
            form = "segmented" if segmented else "single"
            print(f"{aborted:>12} {form:>9} {figures['ops_per_s']:>20.0f} {figures['recover_ms']:>12.1f}")
