"""A secured standalone broker for the `secured` tests: JWT authentication (HS256 secret made here),
authorization with a superuser and an ordinary role, and TLS on the web service with a CA made here.

The CA signs a broker certificate for the name `localhost` only, so https://127.0.0.1 is a host-name
mismatch on purpose. Keys and tokens live in a temporary directory of the test session.
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
import subprocess
from pathlib import Path

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import harness

SUPERUSER, ORDINARY, BASIC_USER = "admin", "app", "ops"


class Credentials:
    """The token secret, one JWT per role, and a CA with a broker certificate (plus a stranger CA)."""

    def __init__(self, directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        self.dir = directory
        self.secret = secrets.token_bytes(32)
        (directory / "secret.key").write_bytes(self.secret)
        self.tokens = {
            role: jwt.encode({"sub": role}, self.secret, algorithm="HS256") for role in (SUPERUSER, ORDINARY)
        }
        self.ca, ca_key = _ca("pulsar-txn test CA")
        self.ca_path = _write_cert(directory / "ca.crt", self.ca)
        self.stranger_ca_path = _write_cert(directory / "stranger-ca.crt", _ca("a CA nobody trusts")[0])
        self.cert_path, self.key_path = _write_pair(directory / "broker", *_leaf("localhost", self.ca, ca_key))
        # The cluster's brokers advertise 127.0.0.1, so their 307s point there: that certificate names both.
        self.ip_cert_path, self.ip_key_path = _write_pair(
            directory / "cluster-broker", *_leaf("localhost", self.ca, ca_key, ip="127.0.0.1")
        )

    def basic_conf(self) -> dict:
        """A broker that also takes HTTP basic authentication for BASIC_USER (a superuser), checked
        against an htpasswd-style file (Apache MD5, made with openssl)."""
        # Starting with "-" on purpose: openssl read such a password as an option when it was an argument (a CI run
        # failed so, one random password in 64); on stdin it is only a password.
        self.basic_password = "-" + secrets.token_urlsafe(12)
        hashed = subprocess.run(
            ["openssl", "passwd", "-apr1", "-stdin"],
            input=self.basic_password + "\n",
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        (self.dir / "htpasswd").write_text(f"{BASIC_USER}:{hashed}\n")
        return {
            **self.broker_conf(None),
            "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken,"
            "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic",
            "basicAuthConf": f"file://{self.dir / 'htpasswd'}",
            "superUserRoles": f"{SUPERUSER},{BASIC_USER}",
        }

    def token_file(self, role: str) -> Path:
        path = self.dir / f"{role}.token"
        path.write_text(self.tokens[role] + "\n")
        return path

    def broker_conf(self, tls_port: int | None, cluster: bool = False) -> dict:
        conf = {
            "authenticationEnabled": "true",
            "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
            "tokenSecretKey": f"file://{self.dir / 'secret.key'}",
            "authorizationEnabled": "true",
            "superUserRoles": SUPERUSER,
            "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
            "brokerClientAuthenticationParameters": f"token:{self.tokens[SUPERUSER]}",
            "tlsCertificateFilePath": str(self.ip_cert_path if cluster else self.cert_path),
            "tlsKeyFilePath": str(self.ip_key_path if cluster else self.key_path),
            "tlsTrustCertsFilePath": str(self.ca_path),
        }
        if tls_port is not None:
            conf["webServicePortTls"] = tls_port
        return conf


def start_secured_broker(credentials: Credentials, basic: bool = False) -> harness.PulsarBroker:
    tls_port = harness.free_port()
    conf = credentials.basic_conf() if basic else credentials.broker_conf(tls_port)
    broker = harness.PulsarBroker(
        {"managedLedgerMaxEntriesPerLedger": 50, **conf}, name="basic" if basic else "secured"
    )
    broker.token = credentials.tokens[SUPERUSER]
    broker.tls_port = tls_port
    broker.start()
    harness.SESSION_BROKERS.append(broker)
    return broker


def start_secured_cluster(credentials: Credentials):
    """Two brokers of one cluster, each with its own TLS port, authenticating like the standalone."""
    from cluster import PulsarCluster

    cluster = PulsarCluster(name="secured", extra_conf=credentials.broker_conf(None, cluster=True))
    cluster.token = credentials.tokens[SUPERUSER]
    for broker in cluster.brokers:
        broker.tls_port = harness.free_port()
        broker.extra_conf["webServicePortTls"] = broker.tls_port
    try:
        cluster.start()
    except BaseException:
        cluster.cleanup()
        raise
    return cluster


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _ca(common: str):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(_name(common))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _leaf(host: str, ca, ca_key, ip: str | None = None):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(host))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(host)] + ([x509.IPAddress(ipaddress.ip_address(ip))] if ip else [])
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _write_pair(stem: Path, cert, key) -> tuple[Path, Path]:
    key_path = stem.with_suffix(".key")
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return _write_cert(stem.with_suffix(".crt"), cert), key_path


def _write_cert(path: Path, cert) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path
