"""Where credentials follow a redirect (docs/authentication.md): Pulsar's brokers redirect to the owner broker's
advertised web service URL, another host of the cluster on the port they share, or another port of the same host
on one machine. Each side of the rule, against real local servers; 127.0.0.2 is "another host" (Linux answers on
all of 127/8), localhost and 127.0.0.1 are one."""

from __future__ import annotations

import base64
import subprocess

import pytest

from pulsar_txn_cli.errors import ConnectionFailed
from tests.admin.conftest import TOKEN, rest_admin
from tests.admin.scripted import ScriptedServer
from tests.admin.test_rest import TENANTS, always, json_answer, tls_server_context


def redirecting_to(where: dict):
    return lambda request: (307, {"Location": where["url"] + request.path}, b"")


def test_to_another_host_on_the_same_port_the_token_follows():
    where = {}
    with ScriptedServer(redirecting_to(where)) as first:
        port = int(first.url.rsplit(":", 1)[1])
        with ScriptedServer(always(json_answer(TENANTS)), host="127.0.0.2", port=port) as owner:
            where["url"] = owner.url
            assert rest_admin(first.url).tenants() == TENANTS
    assert owner.requests[0].headers["Authorization"] == f"Bearer {TOKEN}"


def test_to_the_same_host_under_another_name_the_token_follows():
    where = {}
    with ScriptedServer(always(json_answer(TENANTS))) as owner:
        where["url"] = owner.url  # 127.0.0.1, another port
        with ScriptedServer(redirecting_to(where), host="localhost") as first:
            assert rest_admin(first.url).tenants() == TENANTS
    assert owner.requests[0].headers["Authorization"] == f"Bearer {TOKEN}"


def test_to_another_host_on_another_port_credentials_are_refused_and_nothing_is_sent():
    where = {}
    with ScriptedServer(always(json_answer(TENANTS)), host="127.0.0.2") as elsewhere:
        where["url"] = elsewhere.url
        with ScriptedServer(redirecting_to(where)) as first:
            with pytest.raises(ConnectionFailed) as info:
                rest_admin(first.url).tenants()
    message = str(info.value)
    assert f"was redirected to {elsewhere.url}, another host on another port; refusing to send the credentials" in (
        message
    )
    assert TOKEN not in message and elsewhere.requests == []


def test_without_credentials_any_redirect_is_followed():
    where = {}
    with ScriptedServer(always(json_answer(TENANTS)), host="127.0.0.2") as elsewhere:
        where["url"] = elsewhere.url
        with ScriptedServer(redirecting_to(where)) as first:
            assert rest_admin(first.url, token=None).tenants() == TENANTS
    assert "Authorization" not in elsewhere.requests[0].headers


def test_a_chain_of_hops_cannot_walk_away_from_the_admin_url():
    """127.0.0.1:A -> 127.0.0.1:B (the same host) -> 127.0.0.2:B (the hop's port, not the admin URL's): refused."""
    where = {}
    with ScriptedServer(redirecting_to(where)) as middle:
        port = int(middle.url.rsplit(":", 1)[1])
        with ScriptedServer(always(json_answer(TENANTS)), host="127.0.0.2", port=port) as far:
            where["url"] = far.url
            with ScriptedServer(redirecting_to({"url": middle.url})) as first:
                with pytest.raises(ConnectionFailed, match="another host on another port"):
                    rest_admin(first.url).tenants()
    assert len(middle.requests) == 1 and far.requests == []


def test_basic_credentials_from_the_url_follow_the_same_rule():
    where = {}
    with ScriptedServer(always(json_answer(TENANTS)), host="127.0.0.2") as elsewhere:
        where["url"] = elsewhere.url
        with ScriptedServer(redirecting_to(where)) as first:
            from pulsar_txn_cli.target.settings import TargetFlags, resolve

            url = first.url.replace("http://", "http://ops:pa55%40word@")
            target = resolve(TargetFlags(admin_url=url), environ={})
            assert target.url == first.url and target.basic == ("ops", "pa55@word")
            from pulsar_txn_cli.admin.client import PulsarAdmin
            from pulsar_txn_cli.transport.http_client import RestTransport

            admin = PulsarAdmin(RestTransport(target, retries=0), target)
            with pytest.raises(ConnectionFailed, match="refusing to send the credentials there"):
                admin.tenants()
    assert first.requests[0].headers["Authorization"] == "Basic " + base64.b64encode(b"ops:pa55@word").decode()
    assert elsewhere.requests == []


@pytest.fixture(scope="module")
def other_host_cert(tmp_path_factory):
    """A self-signed certificate for 127.0.0.2 (the openssl CLI)."""
    directory = tmp_path_factory.mktemp("tls2")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=other"]
        + ["-addext", "subjectAltName=IP:127.0.0.2", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_over_https_the_token_follows_to_any_host_the_clusters_ca_vouches_for(self_signed, other_host_cert, tmp_path):
    (cert, key), (cert2, key2) = self_signed, other_host_cert
    bundle = tmp_path / "cluster-ca.pem"
    bundle.write_text(cert.read_text() + cert2.read_text())
    where = {}
    with ScriptedServer(
        always(json_answer(TENANTS)), host="127.0.0.2", ssl_context=tls_server_context(cert2, key2)
    ) as owner:
        where["url"] = owner.url
        with ScriptedServer(redirecting_to(where), ssl_context=tls_server_context(cert, key)) as first:
            assert rest_admin(first.url, tls_trust_cert_path=str(bundle)).tenants() == TENANTS
            with pytest.raises(ConnectionFailed, match="another host on another port"):
                rest_admin(first.url, tls_allow_insecure=True).tenants()  # nothing vouches for the other host
    assert len(owner.requests) == 1 and owner.requests[0].headers["Authorization"] == f"Bearer {TOKEN}"
