"""A throwaway certificate authority for tests: a CA, server certificates for the loopback
addresses and client certificates with a chosen subject, as PEM files under a directory.
Built with `cryptography`; nothing is fetched or cached between runs."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _pem_key(key, password: str | None) -> bytes:
    encryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


@dataclass(frozen=True)
class Issued:
    """One certificate: `cert` (its chain, leaf first), `key`, and `pem` (both in one file,
    the form a broker's or registry's keystore location takes)."""

    cert: Path
    key: Path
    pem: Path


class TestCA:
    __test__ = False  # not a pytest test class

    def __init__(self, directory: Path, name: str = "Test CA") -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(_name(name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.cert = self.directory / "ca.pem"
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def _issue(
        self, file_stem: str, subject: x509.Name, extensions, password: str | None
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
        )
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        cert = builder.sign(self._key, hashes.SHA256())
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        key_pem = _pem_key(key, password)
        paths = Issued(
            self.directory / f"{file_stem}.crt",
            self.directory / f"{file_stem}.key",
            self.directory / f"{file_stem}.pem",
        )
        paths.cert.write_bytes(cert_pem)
        paths.key.write_bytes(key_pem)
        paths.pem.write_bytes(cert_pem + key_pem)
        return paths

    def server(self, file_stem: str = "server", password: str | None = None) -> Issued:
        """A server certificate valid for localhost, 127.0.0.1 and ::1."""
        names = [
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ]
        return self._issue(
            file_stem,
            _name("localhost"),
            [
                (x509.SubjectAlternativeName(names), False),
                (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
            ],
            password,
        )

    def client(
        self,
        common_name: str,
        organization: str | None = None,
        password: str | None = None,
    ) -> Issued:
        """A client certificate whose subject is CN=<common_name>[,O=<organization>]."""
        return self._issue(
            f"client-{common_name}",
            _name(common_name, organization),
            [(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)],
            password,
        )
