"""A secured standalone broker for the `secured` tests: JWT authentication (HS256 secret made here),
authorization with a superuser and an ordinary role, and TLS on the web service with a CA made here.

The CA signs a broker certificate for the name `localhost` only, so https://127.0.0.1 is a host-name
mismatch on purpose. Keys and tokens live in a temporary directory of the test session.
"""
from __future__ import annotations

import datetime
import secrets
from pathlib import Path

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import harness

SUPERUSER, ORDINARY = "admin", "app"


class Credentials:
    """The token secret, one JWT per role, and a CA with a broker certificate (plus a stranger CA)."""

    def __init__(self, directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        self.dir = directory
        self.secret = secrets.token_bytes(32)
        (directory / "secret.key").write_bytes(self.secret)
        self.tokens = {role: jwt.encode({"sub": role}, self.secret, algorithm="HS256") for role in (SUPERUSER, ORDINARY)}
        self.ca, ca_key = _ca("pulsar-txn test CA")
        self.ca_path = _write_cert(directory / "ca.crt", self.ca)
        self.stranger_ca_path = _write_cert(directory / "stranger-ca.crt", _ca("a CA nobody trusts")[0])
        cert, key = _leaf("localhost", self.ca, ca_key)
        self.cert_path = _write_cert(directory / "broker.crt", cert)
        self.key_path = directory / "broker.key"
        self.key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))

    def token_file(self, role: str) -> Path:
        path = self.dir / f"{role}.token"
        path.write_text(self.tokens[role] + "\n")
        return path

    def broker_conf(self, tls_port: int) -> dict:
        return {
            "authenticationEnabled": "true",
            "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
            "tokenSecretKey": f"file://{self.dir / 'secret.key'}",
            "authorizationEnabled": "true",
            "superUserRoles": SUPERUSER,
            "brokerClientAuthenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
            "brokerClientAuthenticationParameters": f"token:{self.tokens[SUPERUSER]}",
            "webServicePortTls": tls_port,
            "tlsCertificateFilePath": str(self.cert_path),
            "tlsKeyFilePath": str(self.key_path),
            "tlsTrustCertsFilePath": str(self.ca_path),
        }


def start_secured_broker(credentials: Credentials) -> harness.PulsarBroker:
    tls_port = harness.free_port()
    broker = harness.PulsarBroker({"managedLedgerMaxEntriesPerLedger": 50, **credentials.broker_conf(tls_port)},
                                  name="secured")
    broker.token = credentials.tokens[SUPERUSER]
    broker.tls_port = tls_port
    broker.start()
    harness.SESSION_BROKERS.append(broker)
    return broker


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _ca(common: str):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name(common)).issuer_name(_name(common))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert, key


def _leaf(host: str, ca, ca_key):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name(host)).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert, key


def _write_cert(path: Path, cert) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path
