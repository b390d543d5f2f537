"""`pulsar-txn collect`: every transaction log of a cluster, read from its bookies into dumps.

- plan.py:     which ledgers (every coordinator's and every transactional subscription's log,
               from the admin layer's internal stats) and how many entries each should hold;
- metadata.py: BookKeeper's metadata service URI, from the brokers' runtime configuration;
- shell.py:    one ledger through BookKeeper's own shell (`readledger`), parsed by codec.readledger;
- layout.py:   what a destination holds: the dumps' names and format, the header naming the cluster;
- sink.py:     where the dumps go (JSONL or Parquet, in a local directory) and the manifest of
               completed ledgers that makes a second run resume;
- hadoop_sink.py: the same on a Hadoop file system (s3a://, hdfs://), through a local Spark's JVM;
- run.py:      the ledgers read in parallel (bounded), each written atomically, then recorded.

Library only: nothing here prints or exits.
"""

from __future__ import annotations

from pulsar_txn_cli.collect.run import collect

__all__ = ["collect"]
