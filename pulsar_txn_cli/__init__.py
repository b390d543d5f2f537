"""pulsar-txn: operate Apache Pulsar transactions and PIP-160 batched transaction logs."""

__version__ = "0.1.0"
