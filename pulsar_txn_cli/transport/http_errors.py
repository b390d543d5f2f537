"""HTTP error answers -> one ConnectionFailed sentence that names what to check."""

from __future__ import annotations

import json
import re

from pulsar_txn_cli.transport.redact import redact
from pulsar_txn_cli.errors import ConnectionFailed


def reason_of(body: bytes | str | None) -> str:
    """Pulsar's `{"reason": ...}` text, or the start of a plain body, scrubbed of secrets."""
    if body is None:
        return ""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    try:
        doc = json.loads(text)
        if isinstance(doc, dict) and doc.get("reason"):
            text = str(doc["reason"])
    except ValueError:
        pass
    text = " ".join(text.split())
    if "Message:" in text and "unexpected error occurred" in text:
        # Pulsar's 500 page: keep the message, drop the Java stack trace
        text = text.split("Message:", 1)[1].split("Stacktrace:", 1)[0].strip()
    if text.lstrip().startswith("<"):  # an HTML error page: nothing useful to quote
        return ""
    return redact(text[:300])


def no_such_endpoint(body) -> bool:
    """Jersey's own 404 (`{"servlet": ..., "message": "Not Found"}`): the broker has no such path at all,
    as opposed to Pulsar's 404 for a missing topic or transaction, which carries a `reason`."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    return isinstance(doc, dict) and "servlet" in doc and doc.get("message") == "Not Found"


PERMISSION = "broker dynamic config and transaction stats need a super-user role (superUserRoles)"


def http_failure(status: int, method: str, path: str, where: str, body=None) -> ConnectionFailed:
    if status == 404 and no_such_endpoint(body):
        return ConnectionFailed(
            f"{where} has no {endpoint_of(path)} endpoint (404): either its Pulsar release is older "
            "than this command (`pulsar-admin brokers version` shows it) or the admin URL has a path "
            "(give the web service root, e.g. http://broker:8080)",
            status=status,
        )
    reason = reason_of(body)
    said = f": {reason}" if reason else ""
    what = f"{method} {path} on {where}"
    lowered = reason.lower()
    if status == 401 and "unauthorized to" in lowered:
        # Pulsar answers 401, not 403, when an authenticated role fails an authorization check
        # (seen on 4.0.7: "Unauthorized to validateTopicOperation for operation [LOOKUP] ...").
        msg = f"{what} was refused: the token's role lacks permission (401){said}; {PERMISSION}"
    elif status == 401:
        msg = f"{what} was refused as unauthenticated (401){said}; check the token (--token, --token-file, --auth-params) and the auth plugin"
    elif status == 403:
        msg = f"{what} was forbidden (403){said}; the token's role lacks permission: {PERMISSION}"
    elif status == 404:
        msg = f"{what} found nothing (404){said}; {_what_to_check(path)}"
    elif status == 405 and "managedledger" in lowered.replace(" ", ""):
        msg = f"{what} is not available (405){said}; internal stats exist only for managed-ledger stores (MLTransactionMetadataStore / MLPendingAckStore)"
    elif status == 405:
        msg = f"{what} is not allowed (405){said}; the broker may be too old for this endpoint"
    elif status == 406 and "/replicas" in path:
        msg = f"{what} was refused (406){said}; the number of coordinators can only grow"
    elif status == 409:
        msg = (
            f"{what} conflicted with the broker's state (409){said}; retry once the operation in progress has finished"
        )
    elif status == 412:
        msg = f"{what} was rejected (412){said}; check the configuration name and value (only dynamic settings can be updated)"
    elif status == 503 and "transactioncoordinatorenabled" in lowered:
        msg = f"{what}: transactions are not enabled (503){said}; set transactionCoordinatorEnabled=true in broker.conf and restart the brokers"
    elif status == 503 and "pending ack" in lowered and "init" in lowered:
        msg = (
            f"{what}: the subscription's pending-ack store is not open yet (503){said}; a broker opens a store "
            "that exists when its topic loads, which can take a few seconds, and a new one at the subscription's "
            "first transactional acknowledgement; check again shortly"
        )
    elif status in (502, 503, 504):
        msg = f"{what} failed: the broker is unavailable ({status}){said}; check that the brokers are up and the topic is loaded"
    elif status == 429:
        msg = f"{what} was rate limited (429) and retries ran out{said}; try again later"
    elif status == 400:
        msg = f"{what} was a bad request (400){said}; check the names and values given"
    elif 300 <= status < 400:
        msg = f"{what} answered a redirect ({status}) without a usable Location header"
    elif status == 500 and "/pendingAckStats/" in path and ("nullpointerexception" in lowered or "is null" in lowered):
        # A real broker's answer for a subscription the topic does not have: a Java NPE, not a 404.
        msg = (
            f"{what}: the topic has no such subscription (500): the broker fails with a NullPointerException "
            "there; check the subscription name (`pulsar-txn subscriptions` lists those that use transactions)"
        )
    elif status == 500 and _LISTS_TRANSACTIONS.search(path) and (topic := _UNLOADED_TOPIC.search(reason)):
        msg = (
            f"{what}: the broker cannot list a transaction while {topic[1]}, a topic it touched, is not loaded "
            f"(500, as after a broker restart); `pulsar-admin topics stats {topic[1]}` loads it, then run this "
            "again (the next such topic is named then; docs/doctor.md)"
        )
    elif status == 500:
        msg = f"{what} failed inside the broker (500){said}; retry, and check the broker's log if it persists"
    else:
        msg = f"{what} failed with HTTP {status}{said}"
    return ConnectionFailed(msg, status=status)


# The calls that list transactions with the stats of every topic each touched (Pulsar's getTransactionMetadata):
# a real 4.0.7 broker fails them while one of those topics is not loaded (docs/real-broker-findings.md).
_LISTS_TRANSACTIONS = re.compile(r"/transactions/(slowTransactions|transactionMetadata)/")
_UNLOADED_TOPIC = re.compile(r"Topic not found (persistent://[^\s'\"]+)")


def no_answer_hint(path: str) -> str:
    """What to do about a call that got no answer in time."""
    if _LISTS_TRANSACTIONS.search(path):
        return (
            "a Pulsar broker does not answer this while a topic an open transaction produced to is not loaded (as "
            "after a restart): load the topics its clients produce to (`pulsar-admin topics stats TOPIC`), or raise "
            "--request-timeout (docs/doctor.md)"
        )
    return "raise --request-timeout or check the broker's load"


def endpoint_of(path: str) -> str:
    """The endpoint of a call (an admin path's first four segments: the API, its version, the resource and the
    call's name) from its whole path."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    return "/" + "/".join(parts[:4] if parts[:1] == ["admin"] else parts)


def _what_to_check(path: str) -> str:
    """The 404 hint that fits the endpoint."""
    if "coordinator" in path.lower() or "/slowTransactions/" in path:  # its 404: no such coordinatorId
        return "check the coordinator id (`pulsar-txn coordinators-list` shows them)"
    if "/transactionMetadata/" in path or "/abortTransaction/" in path:
        return "check the transaction id; a committed or aborted transaction is forgotten by its coordinator"
    if "/pendingAck" in path:
        return "check the topic and the subscription (`pulsar-txn subscriptions` lists those that use transactions)"
    if "/configuration/" in path:
        return "check the configuration name (dynamic settings only)"
    if "/namespaces/" in path:
        return "check the namespace (tenant/namespace; `pulsar-admin namespaces list TENANT` lists them)"
    if "/transactionBuffer" in path or "/persistent/" in path or "/lookup/" in path:
        return "check the topic name (persistent://tenant/namespace/topic)"
    return "check the URL (--admin-url should be the broker's web service, e.g. http://broker:8080)"
