"""The REST transport against real local servers that misbehave on purpose."""

import ssl

import pytest

from pulsar_txn_cli.errors import ConnectionFailed
from tests.admin.conftest import TOKEN, Sleeps, rest_admin
from tests.admin.scripted import DROP, ScriptedServer, json_answer
from tests.conftest import assert_no_crash

TENANTS = ["public", "pulsar"]


def always(answer):
    return lambda request: answer


def sequence(*answers):
    """Answer with each in turn, then repeat the last one."""
    remaining = list(answers)
    return lambda request: remaining.pop(0) if len(remaining) > 1 else remaining[0]


def test_307_to_another_port_keeps_authorization():
    with ScriptedServer(always(json_answer(TENANTS))) as owner:
        with ScriptedServer(lambda r: (307, {"Location": owner.url + r.path}, b"")) as first:
            admin = rest_admin(first.url)
            assert admin.tenants() == TENANTS
    assert first.requests[0].headers["Authorization"] == f"Bearer {TOKEN}"
    assert owner.requests[0].headers["Authorization"] == f"Bearer {TOKEN}"
    assert owner.requests[0].path == "/admin/v2/tenants"


def test_307_keeps_method_and_body_of_a_post():
    with ScriptedServer(always((204, {}, b""))) as owner:
        with ScriptedServer(lambda r: (307, {"Location": owner.url + r.path}, b"")) as first:
            rest_admin(first.url).update_dynamic_config("transactionLogBatchedWriteEnabled", True)
    assert owner.requests[0].method == "POST"
    assert owner.requests[0].path == "/admin/v2/brokers/configuration/transactionLogBatchedWriteEnabled/true"


def test_redirect_chain_within_the_hop_limit_is_followed():
    hops = {"n": 0}

    def chain(request):
        hops["n"] += 1
        if hops["n"] <= 4:
            return 307, {"Location": f"/admin/v2/tenants?hop={hops['n']}"}, b""
        return json_answer(TENANTS)

    with ScriptedServer(chain) as server:
        assert rest_admin(server.url).tenants() == TENANTS
    assert len(server.requests) == 5
    assert all(r.headers.get("Authorization") == f"Bearer {TOKEN}" for r in server.requests)


def test_redirect_loop_is_one_clear_error():
    with ScriptedServer(lambda r: (307, {"Location": "/admin/v2/tenants"}, b"")) as server:
        with pytest.raises(ConnectionFailed, match="redirect loop"):
            rest_admin(server.url).tenants()
    assert len(server.requests) == 1


def test_endless_redirects_stop_at_the_hop_limit():
    counter = {"n": 0}

    def endless(request):
        counter["n"] += 1
        return 307, {"Location": f"/next/{counter['n']}"}, b""

    with ScriptedServer(endless) as server:
        with pytest.raises(ConnectionFailed, match="redirected more than 5 times"):
            rest_admin(server.url).tenants()
    assert len(server.requests) == 6


def test_429_honours_retry_after_then_succeeds():
    sleeps = Sleeps()
    answers = sequence((429, {"Retry-After": "2"}, "slow down"), (429, {"Retry-After": "1"}, ""), json_answer(TENANTS))
    with ScriptedServer(answers) as server:
        assert rest_admin(server.url, sleeps=sleeps).tenants() == TENANTS
    assert sleeps == [2.0, 1.0]
    assert len(server.requests) == 3


def test_a_retry_after_that_is_neither_seconds_nor_a_date_is_ignored():
    sleeps = Sleeps()
    answers = sequence((429, {"Retry-After": "soon"}, "slow down"), json_answer(TENANTS))
    with ScriptedServer(answers) as server:
        assert rest_admin(server.url, sleeps=sleeps).tenants() == TENANTS
    assert len(sleeps) == 1 and 0.1 <= sleeps[0] <= 0.3  # the usual first backoff (0.2 s with jitter)


def test_5xx_then_success_for_get_with_backoff():
    sleeps = Sleeps()
    answers = sequence((502, {}, "bad gateway"), (503, {}, "unavailable"), (504, {}, ""), json_answer(TENANTS))
    with ScriptedServer(answers) as server:
        assert rest_admin(server.url, sleeps=sleeps).tenants() == TENANTS
    assert len(sleeps) == 3
    # exponential backoff with jitter: each nominal delay doubles, jitter keeps it within 0.5x..1.5x
    for attempt, delay in enumerate(sleeps):
        nominal = 0.2 * 2**attempt
        assert 0.5 * nominal <= delay <= 1.5 * nominal


def test_5xx_is_not_retried_for_a_post():
    with ScriptedServer(always((503, {}, {"reason": "busy"}))) as server:
        with pytest.raises(ConnectionFailed, match="unavailable"):
            rest_admin(server.url).update_dynamic_config("transactionLogBatchedWriteEnabled", True)
    assert len(server.requests) == 1


def test_retries_run_out_on_a_persistent_503():
    with ScriptedServer(always((503, {}, {"reason": "Service unavailable"}))) as server:
        with pytest.raises(ConnectionFailed) as info:
            rest_admin(server.url, retries=2).tenants()
    assert info.value.status == 503
    assert len(server.requests) == 3


def test_slow_response_times_out_with_a_hint():
    with ScriptedServer(always(("sleep", 1.0, json_answer(TENANTS)))) as server:
        with pytest.raises(ConnectionFailed, match="--request-timeout"):
            rest_admin(server.url, timeout=0.2).tenants()  # retries left, but a timeout is final
    assert len(server.requests) == 1


def test_dropped_connection_then_success():
    with ScriptedServer(sequence(DROP, json_answer(TENANTS))) as server:
        assert rest_admin(server.url).tenants() == TENANTS
    assert len(server.requests) == 2


def test_dropped_connections_become_one_sentence():
    with ScriptedServer(always(DROP)) as server:
        with pytest.raises(ConnectionFailed, match="dropped the connection"):
            rest_admin(server.url, retries=1).tenants()


def test_connection_refused_names_the_target():
    with ScriptedServer(always(json_answer(TENANTS))) as server:
        url = server.url
    with pytest.raises(ConnectionFailed, match=r"cannot connect to cluster http://127\.0\.0\.1"):
        rest_admin(url, retries=1).tenants()


def test_not_json_is_reported():
    with ScriptedServer(always((200, {"Content-Type": "text/html"}, "<html>hello</html>"))) as server:
        with pytest.raises(ConnectionFailed, match="did not answer JSON"):
            rest_admin(server.url).tenants()


def test_an_empty_answer_to_a_read_is_not_none_found(cli):
    """200 with an empty body is a malformed answer (exit 4 naming the endpoint), not "(none)"."""
    with ScriptedServer(always((200, {}, b""))) as server:
        for args in (["subscriptions"], ["coordinators-list"], ["stuck-readers", "-n", "public/default"]):
            result = cli([*args, "--admin-url", server.url])
            assert result.exit_code == 4, (args, result.stdout, result.stderr)
            assert "with an empty body" in result.stderr and "(none)" not in result.stdout
            assert "TypeError" not in result.stderr
            assert_no_crash(result)


@pytest.mark.parametrize(
    "status, reason, expected",
    [
        (401, "Authentication required", "unauthenticated (401)"),
        (403, "Don't have permission to administrate resources on this tenant", "permission"),
        (404, "Coordinator not found", "check the coordinator id"),
        (405, "Pending ack handle don't use managedLedger!", "managed-ledger stores"),
        (409, "Concurrent modification", "conflicted"),
        (412, "Can't update non-dynamic configuration", "only dynamic settings"),
        (
            503,
            "This Broker is not configured with transactionCoordinatorEnabled=true.",
            "transactionCoordinatorEnabled=true in broker.conf",
        ),
    ],
)
def test_http_errors_become_sentences(status, reason, expected):
    with ScriptedServer(always((status, {}, {"reason": reason}))) as server:
        with pytest.raises(ConnectionFailed) as info:
            rest_admin(server.url, retries=0).coordinator_stats()
    message = str(info.value)
    assert expected in message
    assert reason in message
    assert "GET /admin/v3/transactions/coordinatorStats" in message
    assert TOKEN not in message


def test_a_slow_transactions_404_points_to_the_coordinator_id():
    """Its 404 means no coordinator of that id; it used to say "check the URL", even on an engine."""
    reason = "Transaction coordinator not found! coordinator id : 9"
    with ScriptedServer(always((404, {}, {"reason": reason}))) as server:
        with pytest.raises(ConnectionFailed) as info:
            rest_admin(server.url, retries=0).slow_transactions(1000, 9)
    assert "check the coordinator id (`pulsar-txn coordinators-list` shows them)" in str(info.value)
    assert "check the URL" not in str(info.value)


def tls_server_context(cert, key):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def test_untrusted_certificate_is_a_tls_error(self_signed):
    cert, key = self_signed
    with ScriptedServer(always(json_answer(TENANTS)), ssl_context=tls_server_context(cert, key)) as server:
        with pytest.raises(ConnectionFailed, match="TLS handshake .* --tls-trust-cert-path"):
            rest_admin(server.url).tenants()
        assert rest_admin(server.url, tls_trust_cert_path=str(cert)).tenants() == TENANTS
        assert rest_admin(server.url, tls_allow_insecure=True).tenants() == TENANTS


def test_https_to_http_redirect_keeps_no_token(self_signed):
    cert, key = self_signed
    with ScriptedServer(always(json_answer(TENANTS))) as plain:

        def redirect(r):
            return (307, {"Location": plain.url + r.path}, b"")

        with ScriptedServer(redirect, ssl_context=tls_server_context(cert, key)) as secure:
            with pytest.raises(
                ConnectionFailed, match="from https to plain http .*refusing to send the credentials unencrypted"
            ):
                rest_admin(secure.url, tls_trust_cert_path=str(cert)).tenants()
    assert plain.requests == []


def test_a_broker_500_keeps_the_message_not_the_stack_trace():
    page = (
        "\n --- An unexpected error occurred in the server --- \n\nMessage: org.apache.pulsar.client.admin.PulsarAdminException"
        "$NotFoundException: Transaction coordinator not found! coordinator id : 0\n\nStacktrace:\n\njava.util.concurrent."
        "CompletionException: ...\n\tat java.base/java.util.concurrent.CompletableFuture.encodeThrowable(CompletableFuture.java:332)\n"
    )
    with ScriptedServer(always((500, {"Content-Type": "text/plain"}, page))) as server:
        with pytest.raises(ConnectionFailed) as info:
            rest_admin(server.url).slow_transactions(1000)
    message = str(info.value)
    assert (
        "failed inside the broker (500)" in message
        and "Transaction coordinator not found! coordinator id : 0" in message
    )
    assert "Stacktrace" not in message and "CompletableFuture" not in message


def test_pending_ack_not_initialised_is_explained():
    """The real broker's 503 for a subscription whose pending-ack store is not open yet."""
    from pulsar_txn_cli.transport.http_errors import http_failure

    error = http_failure(
        503,
        "GET",
        "/admin/v3/transactions/pendingAckInternalStats/public/default/t/s",
        "cluster http://broker:8080",
        '{"reason":"org.apache.pulsar.broker.service.BrokerServiceException$ServiceUnitNotReadyException: Pending ack have not init success!"}',
    )
    assert "pending-ack store is not open yet" in str(error) and error.status == 503


def test_basic_authentication_is_sent_and_never_shown(cli):
    import base64

    with ScriptedServer(always((401, {}, {"reason": "Authentication required"}))) as server:
        result = cli(
            [
                "coordinators-list",
                "--admin-url",
                server.url,
                "--auth-plugin",
                "org.apache.pulsar.client.impl.auth.AuthenticationBasic",
                "--auth-params",
                '{"userId": "ops", "password": "pa55-word"}',
                "--debug",
            ]
        )
    credential = base64.b64encode(b"ops:pa55-word").decode()
    assert server.requests[0].headers["Authorization"] == f"Basic {credential}"
    assert result.exit_code == 4
    assert "pa55-word" not in result.stdout + result.stderr and credential not in result.stdout + result.stderr


# --- the connection pool (transport/http_pool.py, libcurl) ------------------------------------------------


def test_requests_share_one_kept_alive_connection():
    with ScriptedServer(always(json_answer(TENANTS))) as server:
        admin = rest_admin(server.url)
        for _ in range(3):
            assert admin.tenants() == TENANTS
    assert len({r.peer for r in server.requests}) == 1


def test_concurrent_requests_each_get_a_connection_and_give_it_back():
    from concurrent.futures import ThreadPoolExecutor

    with ScriptedServer(always(json_answer(TENANTS))) as server:
        admin = rest_admin(server.url)
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: admin.tenants(), range(200)))
    assert answers == [TENANTS] * 200
    assert len(server.requests) == 200
    assert len({r.peer for r in server.requests}) <= 8


def test_a_connection_the_server_closed_is_not_used_for_a_post():
    sleeps = Sleeps()
    with ScriptedServer(sequence(("close", json_answer(TENANTS)), (204, {}, b""))) as server:
        admin = rest_admin(server.url, retries=0, sleeps=sleeps)
        assert admin.tenants() == TENANTS
        server.wait_closed(1)  # the server closes its side after answering
        admin.update_dynamic_config("transactionLogBatchedWriteEnabled", True)
    assert [r.method for r in server.requests] == ["GET", "POST"]
    assert server.requests[0].peer != server.requests[1].peer
    assert sleeps == []


def test_a_connection_the_server_closed_is_replaced_without_the_transports_retries():
    """libcurl finds a kept-alive connection the server closed before it reuses it, and opens a new one."""
    sleeps = Sleeps()
    with ScriptedServer(always(("close", json_answer(TENANTS)))) as server:
        admin = rest_admin(server.url, retries=0, sleeps=sleeps)
        for answered in range(1, 4):
            assert admin.tenants() == TENANTS
            server.wait_closed(answered)  # before the next request, as an idle timeout would have
    assert len(server.requests) == 3 and len({r.peer for r in server.requests}) == 3
    assert sleeps == []


def test_tls_connections_are_kept_alive_too(self_signed):
    cert, key = self_signed
    with ScriptedServer(always(json_answer(TENANTS)), ssl_context=tls_server_context(cert, key)) as server:
        admin = rest_admin(server.url, tls_trust_cert_path=str(cert))
        for _ in range(5):
            assert admin.tenants() == TENANTS
    assert len(server.requests) == 5 and len({r.peer for r in server.requests}) == 1


def test_a_redirect_is_sent_escaped_and_a_bad_one_is_one_sentence():
    def redirect(request):
        if "?" in request.path:
            return json_answer(TENANTS)
        return 307, {"Location": "/admin/v2/tenants?owner=a b"}, b""

    with ScriptedServer(redirect) as server:
        assert rest_admin(server.url).tenants() == TENANTS
    assert server.requests[1].path == "/admin/v2/tenants?owner=a%20b"
    with ScriptedServer(always((307, {"Location": "http://127.0.0.1:notaport/x"}, b""))) as server:
        with pytest.raises(ConnectionFailed, match=r"failed \(invalid URL: .*notaport"):
            rest_admin(server.url).tenants()


# A real 4.0.7 broker's answers while a topic an open transaction touched is not loaded (after a restart,
# docs/real-broker-findings.md): 500 naming a topic it acknowledged on; no answer for one it produced to.
_UNLOADED = (
    "\n --- An unexpected error occurred in the server ---\n\nMessage: org.apache.pulsar.client.admin.PulsarAdminException"
    "$ServerSideErrorException: \n --- An unexpected error occurred in the server ---\n\nMessage: Topic not found "
    "persistent://public/default/orders\n\nStacktrace:\n\norg.apache.pulsar.client.admin.PulsarAdminException...\n"
)


def test_listing_transactions_past_an_unloaded_topic_says_which_and_how_to_load_it():
    with ScriptedServer(always(json_answer({"reason": _UNLOADED}, status=500))) as server:
        with pytest.raises(ConnectionFailed) as info:
            rest_admin(server.url).slow_transactions(-1)
    message = str(info.value)
    assert (
        "cannot list a transaction while persistent://public/default/orders, a topic it touched, is not loaded"
        in message
    )
    assert "`pulsar-admin topics stats persistent://public/default/orders` loads it" in message
    assert "Stacktrace" not in message and "\n" not in message


def test_a_500_naming_a_topic_elsewhere_keeps_the_generic_sentence():
    with ScriptedServer(always(json_answer({"reason": _UNLOADED}, status=500))) as server:
        with pytest.raises(ConnectionFailed, match="failed inside the broker") as info:
            rest_admin(server.url).coordinator_stats()
    assert "topics stats" not in str(info.value)


def test_a_listing_that_never_answers_names_the_unloaded_topic_cause():
    with ScriptedServer(always(("sleep", 1.0, json_answer({})))) as server:
        with pytest.raises(ConnectionFailed) as info:
            rest_admin(server.url, timeout=0.2).slow_transactions(-1, 0)
    message = str(info.value)
    assert "got no answer within 0.2s" in message and "a topic an open transaction produced to is not loaded" in message
    with ScriptedServer(always(("sleep", 1.0, json_answer(TENANTS)))) as server:
        with pytest.raises(ConnectionFailed) as info:
            rest_admin(server.url, timeout=0.2).tenants()
    assert "produced to" not in str(info.value) and "raise --request-timeout" in str(info.value)
