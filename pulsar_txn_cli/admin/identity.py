"""Who a target is, as the target itself says it: the key of everything pulsar-txn remembers.

The URL an operator types is not an identity: `127.0.0.1` and `localhost`, a load balancer, a
proxy or another broker of the same cluster all reach the same cluster. So the key is
- for a Pulsar cluster: its name (the clusters list, protocol.CLUSTERS; with several, the broker's own
  `clusterName`) and the web service URL in its cluster metadata (CLUSTERS/NAME),
  which every broker of the cluster answers alike;
- for the embedded engine (in process or served): the engine id made by `engine init`, which its
  cluster metadata carries as an extra field, so `engine reset` starts a new identity.
"""

from __future__ import annotations

from pulsar_txn_cli.errors import ConnectionFailed
from pulsar_txn_cli.protocol import CLUSTERS, ENGINE_ID_FIELD


def target_identity(admin) -> str:
    name = admin.own_cluster()
    data = admin.cluster_data(name)
    data = data if isinstance(data, dict) else {}
    engine_id = data.get(ENGINE_ID_FIELD)
    if engine_id:
        return f"engine {engine_id}"
    url = next(
        (data[k] for k in ("serviceUrl", "serviceUrlTls", "brokerServiceUrl", "brokerServiceUrlTls") if data.get(k)),
        None,
    )
    return f"cluster {name} ({url})" if url else f"cluster {name}"


def own_cluster(admin) -> str:
    """The target's cluster; the broker's own when the configuration store lists several (geo-replication)."""
    names = admin.clusters()
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or not names:
        raise ConnectionFailed(
            f"GET {CLUSTERS} on {admin.target.describe()} did not list any cluster; cannot tell which cluster this is"
        )
    real = [n for n in names if n != "global"] or names
    if len(real) == 1:
        return real[0]
    own = (admin.runtime_config() or {}).get("clusterName")
    if own in real:
        return own
    raise ConnectionFailed(
        f"{admin.target.describe()} lists the clusters {', '.join(sorted(real))} and does not say "
        "which one it belongs to (no clusterName in its runtime configuration)"
    )
