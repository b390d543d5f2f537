"""OAuth2 client credentials (Pulsar's AuthenticationOAuth2) against a stand-in OAuth2 server and a
stand-in broker, both real local HTTP servers (tests/admin/oauth2standin.py, fakebroker.py). The
`secured` suite runs the same against a real OAuth2 server and a real broker
(tests/integration/test_oauth2_broker.py)."""

import base64
import json

import pytest

from pulsar_txn_cli.target.settings import resolve
from pulsar_txn_cli.transport.oauth2 import OAuth2Params, TokenSource
from pulsar_txn_cli.transport.http_client import RestTransport
from pulsar_txn_cli.target.settings import TargetFlags
from pulsar_txn_cli.errors import ConnectionFailed, UsageError
from tests.admin.fakebroker import FakeBroker
from tests.admin.oauth2standin import OAuth2StandIn

PLUGIN = "org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2"
CLIENT, SECRET = "txn-ops", "S3CRET-client-secret-value"


def key_file(tmp_path, client=CLIENT, secret=SECRET):
    path = tmp_path / "key.json"
    path.write_text(
        json.dumps(
            {
                "type": "client_credentials",
                "client_id": client,
                "client_secret": secret,
                "client_email": f"{client}@example",
                "issuer_url": "unused",
            }
        )
    )
    return path


def params(issuer, key, **more):
    return json.dumps({"type": "client_credentials", "issuerUrl": issuer, "privateKey": key, **more})


@pytest.fixture
def servers():
    broker = FakeBroker(token="nothing-issued-yet")
    standin = OAuth2StandIn(CLIENT, SECRET, on_issue=lambda token: setattr(broker, "token", token))
    yield broker, standin
    standin.close()
    broker.close()


def assert_clean(result, standin):
    for text in (result.stdout, result.stderr):
        assert SECRET not in text
        assert all(token not in text for token in standin.issued)


# --- parameters ---------------------------------------------------------------------------


def test_auth_params_with_a_key_file_url(tmp_path):
    key = key_file(tmp_path)
    target = resolve(
        TargetFlags(
            admin_url="http://b:8080",
            auth_plugin=PLUGIN,
            auth_params=params("https://idp.example/", f"file://{key}", audience="urn:pulsar", scope="admin"),
        ),
        environ={},
    )
    assert target.oauth2 == OAuth2Params("https://idp.example", CLIENT, SECRET, "urn:pulsar", "admin", str(key))
    assert SECRET not in repr(target) and SECRET not in repr(target.oauth2)


@pytest.mark.parametrize(
    "encode",
    [
        lambda doc: "data:application/json;base64," + base64.b64encode(doc.encode()).decode(),
        lambda doc: "data:application/json," + doc.replace('"', "%22"),
    ],
    ids=["base64", "percent-encoded"],
)
def test_auth_params_with_a_data_url(encode):
    doc = json.dumps({"client_id": CLIENT, "client_secret": SECRET})
    target = resolve(
        TargetFlags(
            admin_url="http://b:8080", auth_plugin="AuthenticationOAuth2", auth_params=params("http://idp", encode(doc))
        ),
        environ={},
    )
    assert (target.oauth2.client_id, target.oauth2.client_secret) == (CLIENT, SECRET)


def test_client_conf_as_java_writes_it(tmp_path):
    key = key_file(tmp_path)
    conf = tmp_path / "client.conf"
    # Java's Properties.store() escapes ':' and '=' in values; javaproperties reads them back.
    conf.write_text(
        "webServiceUrl=http\\://broker\\:8080\n"
        f"authPlugin={PLUGIN}\n"
        'authParams={"type"\\:"client_credentials","issuerUrl"\\:"https\\://idp.example",\\\n'
        f'  "privateKey"\\:"file\\://{key}","audience"\\:"urn\\:pulsar"}}\n'
    )
    target = resolve(TargetFlags(), environ={"PULSAR_CLIENT_CONF": str(conf)})
    assert target.oauth2 == OAuth2Params("https://idp.example", CLIENT, SECRET, "urn:pulsar", None, str(key))


def test_pulsarctl_context_with_oauth2(tmp_path):
    key = key_file(tmp_path, client="")  # pulsarctl's client_id stands in for the key file's
    config = tmp_path / "config"
    # the shape pulsarctl's `context set --issuer-endpoint --client-id --audience --key-file --scope` writes
    config.write_text(f"""auth-info:
  cloud:
    locationoforigin: {config}
    tls_trust_certs_file_path: ""
    tls_allow_insecure_connection: false
    token: ""
    tokenFile: ""
    issuer_endpoint: https://auth.example/
    client_id: {CLIENT}
    audience: urn:sn:pulsar:o:i
    scope: ""
    key_file: file://{key}
contexts:
  cloud:
    admin-service-url: https://cloud.example:443
    bookie-service-url: ""
current-context: cloud
""")
    target = resolve(TargetFlags(), environ={"PULSARCONFIG": str(config)})
    assert target.url == "https://cloud.example:443"
    assert target.oauth2 == OAuth2Params("https://auth.example", CLIENT, SECRET, "urn:sn:pulsar:o:i", None, str(key))


@pytest.mark.parametrize(
    "given, message",
    [
        ('{"type": "device_code", "issuerUrl": "http://i", "privateKey": "file:///k"}', "only client_credentials"),
        ('{"issuerUrl": "http://i"}', "needs issuerUrl and privateKey"),
        ('{"issuerUrl": "idp.example", "privateKey": "file:///k"}', "must start with http"),
        (
            '{"issuerUrl": "http://i", "privateKey": "file:///nonexistent/key.json"}',
            "cannot read the OAuth2 key file /nonexistent/key.json",
        ),
        (
            '{"issuerUrl": "http://i", "privateKey": "data:application/json;base64,e30="}',
            "needs client_id and client_secret",
        ),
        ('{"issuerUrl": "http://i", "privateKey": "data:application/json,not json"}', "is not JSON"),
    ],
)
def test_bad_parameters_are_one_sentence(given, message):
    with pytest.raises(UsageError, match=message):
        resolve(TargetFlags(admin_url="http://b:8080", auth_plugin=PLUGIN, auth_params=given), environ={})


# --- the flow -----------------------------------------------------------------------------


def test_commands_authenticate_with_a_cached_token(cli, servers, tmp_path):
    broker, standin = servers
    key = key_file(tmp_path)
    result = cli(
        [
            "subscriptions",
            "--admin-url",
            broker.url,
            "--auth-plugin",
            PLUGIN,
            "--debug",
            "-o",
            "json",
            "--auth-params",
            params(standin.issuer, f"file://{key}", audience="urn:pulsar", scope="txn"),
        ]
    )
    assert result.exit_code == 0, result.stderr
    assert result.json()  # the broker's subscriptions, reached with the issued token
    assert len(standin.issued) == 1 and len(broker.server.requests) > 1  # one token for every request
    assert standin.forms[0] == {
        "grant_type": "client_credentials",
        "client_id": CLIENT,
        "client_secret": SECRET,
        "audience": "urn:pulsar",
        "scope": "txn",
    }
    assert "OAuth2: token 1 for client 'txn-ops'" in result.stderr and "Authorization: ***" in result.stderr
    assert_clean(result, standin)


def test_a_refused_token_is_fetched_again_once(servers, tmp_path):
    broker, standin = servers
    target = resolve(
        TargetFlags(
            admin_url=broker.url, auth_plugin=PLUGIN, auth_params=params(standin.issuer, str(key_file(tmp_path)))
        ),
        environ={},
    )
    transport = RestTransport(target)
    try:
        assert transport.request("GET", "/admin/v2/clusters")[0] == 200
        broker.token = "rotated-by-the-broker"  # the cached token is no longer accepted
        assert transport.request("GET", "/admin/v2/clusters")[0] == 200
        assert len(standin.issued) == 2
        standin.on_issue, broker.token = None, "accepts-no-issued-token"  # one retry, then the 401 stands
        assert transport.request("GET", "/admin/v2/clusters")[0] == 401
        assert len(standin.issued) == 3
    finally:
        transport.close()


def test_an_expired_token_is_fetched_again(servers, tmp_path):
    _broker, standin = servers
    standin.lifetime = 100
    now = [1000.0]
    source = TokenSource(
        resolve(
            TargetFlags(
                admin_url="http://b:8080",
                auth_plugin=PLUGIN,
                auth_params=params(standin.issuer, str(key_file(tmp_path))),
            ),
            environ={},
        ).oauth2,
        clock=lambda: now[0],
    )
    first = source.bearer()
    now[0] += 85  # 15 s left: still more than a tenth of the lifetime
    assert source.bearer() == first
    now[0] += 6  # 9 s left: refreshed before the broker would refuse it
    assert source.bearer() != first and len(standin.issued) == 2
    assert len(standin.forms) == 2  # discovery is not repeated: two token requests in all


def test_a_wrong_secret_is_one_sentence_without_the_secret(cli, servers, tmp_path):
    broker, standin = servers
    key = key_file(tmp_path, secret="WRONG-secret-value-here")
    args = [
        "coordinators-list",
        "--admin-url",
        broker.url,
        "--auth-plugin",
        PLUGIN,
        "--auth-params",
        params(standin.issuer, f"file://{key}"),
    ]
    result = cli(args)
    assert result.exit_code == 4
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: the OAuth2 server {standin.issuer} refused client 'txn-ops' (invalid_client: "
        "Client authentication failed); check client_id and client_secret in the key file "
        f"{key}, the audience and the scope"
    )
    debug = cli([*args, "--debug"])  # the traceback of --debug carries no secret either
    assert debug.exit_code == 4 and "WRONG-secret-value-here" not in debug.stderr + debug.stdout
    assert broker.server.requests == []  # the broker was never asked without a token


def test_a_wrong_issuer_url_names_the_discovery_address(cli, servers, tmp_path):
    broker, standin = servers
    result = cli(
        [
            "coordinators-list",
            "--admin-url",
            broker.url,
            "--auth-plugin",
            PLUGIN,
            "--auth-params",
            params(standin.server.url + "/nowhere", str(key_file(tmp_path))),
        ]
    )
    assert result.exit_code == 4
    assert (
        f"OAuth2 discovery at {standin.server.url}/nowhere/.well-known/openid-configuration answered HTTP 404"
        in result.stderr
    )


def test_an_unreachable_issuer_is_a_connection_failure(cli, tmp_path):
    with FakeBroker() as broker:
        with OAuth2StandIn(CLIENT, SECRET) as gone:
            issuer = gone.issuer
        result = cli(
            [
                "coordinators-list",
                "--admin-url",
                broker.url,
                "--auth-plugin",
                PLUGIN,
                "--auth-params",
                params(issuer, str(key_file(tmp_path))),
            ]
        )
    assert result.exit_code == 4 and f"cannot reach the OAuth2 server {issuer}" in result.stderr


def test_the_secret_and_tokens_stay_out_of_the_state_file(cli, servers, tmp_path):
    broker, standin = servers
    result = cli(
        [
            "set-txn-tc-batch-log",
            "--enable",
            "--admin-url",
            broker.url,
            "--auth-plugin",
            PLUGIN,
            "--debug",
            "--auth-params",
            params(standin.issuer, f"file://{key_file(tmp_path)}"),
        ]
    )
    assert result.exit_code == 0, result.stderr
    assert_clean(result, standin)
    files = list((tmp_path / "state").rglob("*.json"))
    assert files and standin.issued
    for f in files:
        text = f.read_text()
        assert SECRET not in text and all(token not in text for token in standin.issued)


def test_direct_token_source_errors_carry_no_secret(tmp_path):
    with OAuth2StandIn(CLIENT, SECRET) as standin:
        source = TokenSource(OAuth2Params(standin.issuer, CLIENT, "another-wrong-secret", None, None, "key.json"))
        with pytest.raises(ConnectionFailed) as caught:
            source.bearer()
    assert "another-wrong-secret" not in str(caught.value) and caught.value.status == 401


def test_threads_share_one_token_and_a_stale_refusal_keeps_the_new_one(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with OAuth2StandIn(CLIENT, SECRET) as standin:
        source = TokenSource(OAuth2Params(standin.issuer, CLIENT, SECRET, None, None, "key.json"))
        with ThreadPoolExecutor(8) as pool:
            tokens = set(pool.map(lambda _: source.bearer(), range(16)))
        assert len(tokens) == 1 and len(standin.issued) == 1  # discovery-discover-fetch happened once
        first = tokens.pop()
        source.invalidate(first)
        second = source.bearer()
        source.invalidate(first)  # a late 401 for the old token does not throw away the new one
        assert source.bearer() == second and len(standin.issued) == 2


def test_an_https_issuer_is_verified_with_the_trust_settings(cli, tmp_path, self_signed):
    import ssl

    cert, key = self_signed
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with FakeBroker(token="none-yet") as broker:
        with OAuth2StandIn(
            CLIENT, SECRET, ssl_context=context, on_issue=lambda token: setattr(broker, "token", token)
        ) as standin:
            assert standin.issuer.startswith("https://")
            args = [
                "coordinators-list",
                "--admin-url",
                broker.url,
                "--auth-plugin",
                PLUGIN,
                "--auth-params",
                params(standin.issuer, str(key_file(tmp_path))),
            ]
            untrusted = cli(args)
            assert untrusted.exit_code == 4 and f"cannot reach the OAuth2 server {standin.issuer}" in untrusted.stderr
            assert "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr and "--tls-trust-cert-path" in untrusted.stderr
            assert cli([*args, "--tls-trust-cert-path", str(cert)]).exit_code == 0
            assert cli([*args, "--tls-allow-insecure"]).exit_code == 0
            assert len(standin.issued) == 2
