"""`pulsar-txn collect`: every transaction log of a cluster, read from its bookies into JSONL dumps.

- plan.py:     which ledgers (every coordinator's and every transactional subscription's log,
               from the admin layer's internal stats) and how many entries each should hold;
- metadata.py: BookKeeper's metadata service URI, from the brokers' runtime configuration;
- shell.py:    one ledger through BookKeeper's own shell (`readledger`), parsed by codec.readledger;
- sink.py:     where the dumps go (a local directory now; the interface takes other destinations)
               and the manifest of completed ledgers that makes a second run resume;
- run.py:      the ledgers read in parallel (bounded), each written atomically, then recorded.

Library only: nothing here prints or exits.
"""
from __future__ import annotations

from pulsar_txn_cli.collect.run import collect

__all__ = ["collect"]
