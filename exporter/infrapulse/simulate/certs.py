"""Throwaway TLS material for the simulator and tests: a CA, a server and a client certificate.

Generated at runtime with `cryptography` (never committed): `make_test_pki(dir)` writes PEM
files into `dir` and returns their paths. The server certificate is valid for localhost,
127.0.0.1 and any extra names given (switch names, for `tls.server_name`).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class TestPKI:
    ca_file: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def read(self, which: Literal["ca_file", "server_cert", "server_key", "client_cert", "client_key"]
             ) -> bytes:
        path: Path = getattr(self, which)
        return path.read_bytes()


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "infrapulse test"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _issue(subject: str, key: ec.EllipticCurvePrivateKey, issuer_name: x509.Name,
           issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool = False,
           sans: list[x509.GeneralName] | None = None,
           usage: x509.ObjectIdentifier | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(subject))
               .issuer_name(issuer_name)
               .public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=7))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
            decipher_only=False), critical=True)
    return builder.sign(issuer_key, hashes.SHA256())


def make_test_pki(directory: str | Path, names: tuple[str, ...] = (),
                  ca_name: str = "infrapulse test CA") -> TestPKI:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = _issue(ca_name, ca_key, _name(ca_name), ca_key, ca=True)
    sans: list[x509.GeneralName] = [x509.DNSName("localhost"),
                                    x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    sans += [x509.DNSName(n) for n in names]
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = _issue("gnmi-target", server_key, ca_cert.subject, ca_key, sans=sans,
                         usage=ExtendedKeyUsageOID.SERVER_AUTH)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_cert = _issue("infrapulse", client_key, ca_cert.subject, ca_key,
                         usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    pki = TestPKI(directory / "ca.pem", directory / "server.pem", directory / "server-key.pem",
                  directory / "client.pem", directory / "client-key.pem")
    pem = serialization.Encoding.PEM
    pki.ca_file.write_bytes(ca_cert.public_bytes(pem))
    pki.server_cert.write_bytes(server_cert.public_bytes(pem))
    pki.client_cert.write_bytes(client_cert.public_bytes(pem))
    for path, key in ((pki.server_key, server_key), (pki.client_key, client_key)):
        path.write_bytes(_key_pem(key))
        path.chmod(0o600)
    return pki
