"""BookKeeper's metadata service URI, as the brokers' runtime configuration gives it.

A broker uses `bookkeeperMetadataServiceUri` when it is set; otherwise its BookKeeper client
finds the ledgers under `/ledgers` of the metadata store (`metadataStoreUrl`, formerly
`zookeeperServers`). BookieShell wants the URI form: `zk+null://host:port;host2:port/ledgers`.
"""

from __future__ import annotations

import re

from pulsar_txn_cli.errors import UsageError

HINT = "pass --metadata-service-uri (the bookies' metadataServiceUri, e.g. zk+null://zk1:2181/ledgers)"


def service_uri(runtime: dict) -> str:
    """The URI for BookieShell from a broker's runtime configuration; UsageError when it cannot be told."""
    explicit = str(runtime.get("bookkeeperMetadataServiceUri") or "").strip()
    if explicit:
        return explicit.removeprefix("metadata-store:")  # Pulsar's own driver prefix wraps a zk: URL
    store = str(runtime.get("metadataStoreUrl") or "").strip() or str(runtime.get("zookeeperServers") or "").strip()
    if not store:
        raise UsageError(
            f"the brokers' configuration names no metadata store (bookkeeperMetadataServiceUri, metadataStoreUrl); {HINT}"
        )
    return from_store_url(store)


_ZK_HOSTS = re.compile(r"^[\w.-]+:\d+(?:,[\w.-]+:\d+)*(?:/.*)?$")


def from_store_url(store: str) -> str:
    """`zk:h1:2181,h2:2181/chroot` (or a bare `h1:2181`) -> `zk+null://h1:2181;h2:2181/chroot/ledgers`."""
    url = store.removeprefix("metadata-store:")
    url = url[3:].removeprefix("//") if url.startswith("zk:") else url
    if not _ZK_HOSTS.match(url):
        raise UsageError(f"the metadata store {store!r} is not ZooKeeper, so the ledgers' path cannot be told; {HINT}")
    hosts, _, chroot = url.partition("/")
    chroot = chroot.strip("/")
    return f"zk+null://{hosts.replace(',', ';')}{'/' + chroot if chroot else ''}/ledgers"
