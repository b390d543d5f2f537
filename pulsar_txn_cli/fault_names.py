"""The engine's faults by name, with what each models (`engine simulate --fault NAME`, engine/faults.py).

A leaf, so `--help` lists them without loading the engine.
"""

FAULTS = {
    "client-crash": "a client opens a transaction, produces and acknowledges, and dies without ending it",
    "coordinator-not-ready": "coordinator 0 does not finish recovering (stuck Initializing) until it is unloaded",
    "buffer-recovering": "the first topic's transaction buffer stays Initializing until the topic is unloaded",
    "buffer-no-snapshot": "the first topic's buffer never takes its first snapshot and refuses transactional "
    "messages (Pulsar 4.0.7's race, apache/pulsar#24945); the client that tried is left open",
    "pending-ack-not-ready": "the first subscription's pending-ack store stays Initializing until its topic is unloaded",
    "leaked-pending-ack": "the first subscription is deleted; its pending-ack log stays",
    "phantom-fence": "the first topic's maxReadPosition stays behind its last message with no transaction open "
    "(apache/pulsar#14889) until the topic is unloaded",
    "replication-held": "the first topic is geo-replicated to cluster 'remote'; a client's transaction there is "
    "left open, so replication stops at maxReadPosition while plain messages are written after it",
}
