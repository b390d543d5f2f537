"""`pulsar-txn exporter`: the downgrade's progress, batch-log effectiveness and held readers as
Prometheus metrics. snapshot.py observes the target, families.py turns one observation into metric
families, service.py refreshes in the background and serves them."""
