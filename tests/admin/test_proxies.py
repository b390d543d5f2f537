"""HTTP_PROXY, HTTPS_PROXY and NO_PROXY for the admin calls (libcurl) and the OAuth2 token requests (httpx), through
a real forward proxy on a local socket (tests/admin/forwardproxy.py): plain HTTP in absolute form, HTTPS through
CONNECT, a host NO_PROXY names reached directly, a proxy's password never printed."""

from __future__ import annotations

import pytest

from tests.admin.conftest import rest_admin
from tests.admin.fakebroker import FakeBroker
from tests.admin.forwardproxy import ForwardProxy
from tests.admin.oauth2standin import OAuth2StandIn
from tests.admin.scripted import ScriptedServer, json_answer
from tests.admin.test_oauth2 import CLIENT, PLUGIN, SECRET, key_file, params
from tests.admin.test_rest import always, tls_server_context

TENANTS = ["public", "pulsar"]


@pytest.mark.parametrize("name", ["HTTP_PROXY", "http_proxy"])
def test_plain_http_goes_through_the_proxy_the_environment_names(monkeypatch, name):
    with ScriptedServer(always(json_answer(TENANTS))) as server, ForwardProxy() as proxy:
        monkeypatch.setenv(name, proxy.url)
        assert rest_admin(server.url).tenants() == TENANTS
    assert proxy.seen == [f"GET {server.url}/admin/v2/tenants"]
    assert server.requests[0].headers["Authorization"].startswith("Bearer ")  # to the broker, through the proxy


def test_https_goes_through_a_connect_tunnel(monkeypatch, self_signed):
    cert, key = self_signed
    with ScriptedServer(always(json_answer(TENANTS)), ssl_context=tls_server_context(cert, key)) as server:
        with ForwardProxy() as proxy:
            monkeypatch.setenv("HTTPS_PROXY", proxy.url)
            monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # the other scheme's proxy is not used
            admin = rest_admin(server.url, tls_trust_cert_path=str(cert))
            assert admin.tenants() == TENANTS and admin.tenants() == TENANTS
    port = server.url.rsplit(":", 1)[1]
    assert proxy.seen == [f"CONNECT 127.0.0.1:{port}"]  # one tunnel, kept alive for both requests
    assert len(server.requests) == 2


def test_a_host_no_proxy_names_is_reached_directly(monkeypatch):
    with ScriptedServer(always(json_answer(TENANTS))) as server, ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "example.org,127.0.0.1")
        assert rest_admin(server.url).tenants() == TENANTS
    assert proxy.seen == [] and len(server.requests) == 1


def test_a_proxy_that_wants_credentials_gets_them_from_its_url_and_they_are_never_printed(cli, monkeypatch):
    with FakeBroker() as broker:
        with ForwardProxy(credentials=("px-user", "px-S3cret")) as proxy:
            port = proxy.url.rsplit(":", 1)[1]
            monkeypatch.setenv("HTTP_PROXY", f"http://px-user:px-S3cret@127.0.0.1:{port}")
            ok = cli(["coordinators-list", "--admin-url", broker.url, "--debug"])
            monkeypatch.setenv("HTTP_PROXY", f"http://px-user:wrong-pw@127.0.0.1:{port}")
            refused = cli(["coordinators-list", "--admin-url", broker.url, "--debug"])
    assert ok.exit_code == 0, ok.stderr
    assert any(line.startswith(f"GET {broker.url}/admin/") for line in proxy.seen)
    assert refused.exit_code == 4 and "407" in refused.stderr
    for result in (ok, refused):
        assert "px-S3cret" not in result.stdout + result.stderr
    assert "wrong-pw" not in refused.stdout + refused.stderr


def test_an_unreachable_proxy_is_one_sentence_without_its_password(cli, monkeypatch):
    with FakeBroker() as broker:
        monkeypatch.setenv("HTTP_PROXY", "http://px-user:px-S3cret@127.0.0.1:9")
        result = cli(["coordinators-list", "--admin-url", broker.url, "--request-timeout", "2", "--debug"])
    assert result.exit_code == 4
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "cannot connect to cluster" in errors[0]
    assert "px-S3cret" not in result.stdout + result.stderr
    assert broker.server.requests == []


def test_oauth2_token_requests_go_through_the_proxy_too(cli, monkeypatch, tmp_path):
    with FakeBroker(token="none-yet") as broker:
        with OAuth2StandIn(CLIENT, SECRET, on_issue=lambda token: setattr(broker, "token", token)) as standin:
            with ForwardProxy() as proxy:
                monkeypatch.setenv("HTTP_PROXY", proxy.url)
                result = cli(
                    [
                        "coordinators-list",
                        "--admin-url",
                        broker.url,
                        "--auth-plugin",
                        PLUGIN,
                        "--auth-params",
                        params(standin.issuer, f"file://{key_file(tmp_path)}"),
                    ]
                )
    assert result.exit_code == 0, result.stderr
    assert f"POST {standin.issuer}/oauth/token" in proxy.seen
    assert f"GET {standin.issuer}/.well-known/openid-configuration" in proxy.seen
    assert any(line.startswith(f"GET {broker.url}/admin/") for line in proxy.seen)
    assert len(standin.issued) == 1


@pytest.mark.parametrize(
    "env",
    [
        {"HTTP_PROXY": "http://upper:1", "http_proxy": "http://lower:2"},
        {"HTTP_PROXY": "http://upper:1", "http_proxy": ""},
        {"HTTP_PROXY": "http://upper:1", "REQUEST_METHOD": "GET"},
        {"Https_Proxy": "http://mixed:3", "NO_PROXY": "a,b", "no_proxy": "c"},
        {"ALL_PROXY": "http://all:4", "FTP_PROXY": "http://ftp:5"},
    ],
    ids=["lower-wins", "empty-lower-unsets", "cgi", "mixed-case", "other-schemes"],
)
def test_the_environment_is_read_as_pythons_urllib_and_so_httpx_read_it(monkeypatch, env):
    """The admin calls and the OAuth2 requests must agree on the proxy: http_pool reads the variables itself (to
    spare every command urllib.request's import), by urllib's rules."""
    import urllib.request

    from pulsar_txn_cli.transport.http_pool import proxies_from

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    expected = {k: v for k, v in urllib.request.getproxies_environment().items() if k in ("http", "https", "no")}
    assert proxies_from() == expected
