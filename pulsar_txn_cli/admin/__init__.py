"""The admin layer: one interface (PulsarAdmin, Pulsar's admin REST API) over two transports.

`connect(flags)` resolves the target (target/settings.py) and returns a PulsarAdmin talking either to a
real cluster over HTTP (transport/http_client.py) or to the embedded engine in process (engine/transport.py).
Commands use only PulsarAdmin and never ask which backend they have.
"""

from __future__ import annotations


def connect(flags, log=None, environ=None):
    """A PulsarAdmin for the target these TargetFlags (and the environment) select."""
    from pulsar_txn_cli.admin.client import PulsarAdmin
    from pulsar_txn_cli.target.settings import resolve

    target = resolve(flags, environ)
    if target.kind == "cluster":
        from pulsar_txn_cli.transport.http_client import RestTransport

        transport = RestTransport(target, log=log)
    else:
        from pulsar_txn_cli.engine.transport import EngineTransport

        transport = EngineTransport(target, log=log)
    return PulsarAdmin(transport, target)
