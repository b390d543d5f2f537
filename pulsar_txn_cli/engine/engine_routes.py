"""The engine's own REST endpoints, which no Pulsar broker has (under /pulsar-txn/v1/engine).

- GET  .../clock: the engine's virtual time, so a client of `engine serve` shows times on the
  engine's clock (a broker's clients use the wall clock: the broker's is the wall clock).
- POST .../simulate: run a seeded workload on the served engine, as a broker takes load from its
  clients while it runs (`engine simulate --admin-url`); the body holds SimOptions in camelCase.
A broker answers these paths with 404, which is how a client tells the two apart.
"""
from __future__ import annotations

from dataclasses import fields

from pulsar_txn_cli.admin.client import ENGINE_API
from pulsar_txn_cli.engine.router import HttpError, route
from pulsar_txn_cli.errors import UsageError

# SimOptions' fields a client may send (--ack-log writes a file where the engine runs: in process only).
REMOTE_OPTIONS = ("transactions", "concurrency", "topics", "partitions", "subscriptions", "abort_ratio",
                  "timeout_ratio", "seed", "txn_timeout_ms")


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)


@route("GET", ENGINE_API + "/clock")
def clock(engine, query, body):
    return 200, {"nowMs": engine.clock.now_ms, "clock": "engine"}


@route("POST", ENGINE_API + "/simulate")
def simulate(engine, query, body):
    from pulsar_txn_cli.engine.simulate import SimOptions, simulate as run

    if not isinstance(body, dict):
        raise HttpError(400, "the body must be a JSON object of workload options")
    known = {camel(f.name): f for f in fields(SimOptions) if f.name in REMOTE_OPTIONS}
    unknown = sorted(set(body) - set(known))
    if unknown:
        raise HttpError(400, f"unknown workload option(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    values = {}
    for key, value in body.items():
        kind = float if known[key].type in (float, "float") else int
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
            raise HttpError(400, f"workload option {key} must be {'a number' if kind is float else 'an integer'}, not {value!r}")
        values[known[key].name] = kind(value)
    options = SimOptions(**values)
    try:
        options.check()
    except UsageError as exc:
        raise HttpError(400, str(exc)) from None
    return 200, run(engine, options)
