"""A test CA and the certificates it signs, as PEM files (built with `cryptography`).

    ca = TestCA(tmp_path)
    server = ca.issue("broker", hosts=["127.0.0.1", "localhost"])   # .keystore: key + chain
    client = ca.issue("alice", organization="corp", client=True)
    ca.pem                                                          # the trust store

A key store is one PEM file with the private key and the certificate chain (what the
broker's `ssl.keystore.location` takes); `key`/`cert` are separate files too, for the
clients that want them apart (librdkafka's ssl.key.location, kafka-python's ssl_keyfile).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(common_name: str, organization: str | None, unit: str | None) -> x509.Name:
    attrs = []
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    if unit:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _key_pem(key, password: str | None) -> bytes:
    encryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


def _builder(subject: x509.Name, issuer: x509.Name, public_key, ca: bool):
    """A certificate valid from yesterday for 30 days."""
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )


@dataclass(frozen=True)
class Issued:
    key: Path  # the private key alone
    cert: Path  # the certificate alone
    keystore: Path  # key + certificate chain in one PEM
    subject: str  # RFC 2253, as the broker's principal mapping sees it


class TestCA:
    __test__ = False  # not a test class, whatever pytest thinks of the name

    def __init__(self, directory: Path, name: str = "Test CA") -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = _name(name, "kafka-hourly tests", None)
        self._cert = (
            _builder(subject, subject, self._key.public_key(), ca=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )  # fmt: skip
            .sign(self._key, hashes.SHA256())
        )
        self.pem = self.directory / "ca.pem"
        self.pem.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self,
        common_name: str,
        *,
        hosts: list[str] = (),
        organization: str | None = None,
        unit: str | None = None,
        password: str | None = None,
    ) -> Issued:
        """A certificate for `common_name` (server and client use), valid for `hosts`."""
        key = ec.generate_private_key(ec.SECP256R1())
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        subject = _name(common_name, organization, unit)
        builder = _builder(subject, self._cert.subject, key.public_key(), ca=False).add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        stem = self.directory / common_name
        key_pem = _key_pem(key, password)
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        chain = cert_pem + self._cert.public_bytes(serialization.Encoding.PEM)
        paths = Issued(
            stem.with_suffix(".key"),
            stem.with_suffix(".crt"),
            stem.with_suffix(".keystore.pem"),
            cert.subject.rfc4514_string(),
        )
        paths.key.write_bytes(key_pem)
        paths.cert.write_bytes(cert_pem)
        paths.keystore.write_bytes(key_pem + chain)
        return paths
