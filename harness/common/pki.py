"""Certificates and keys for the local environment (a CA, serving certs for kube-apiserver and Kueue's
webhook server, the service-account signing key), made with `cryptography`. Keys are written 0600.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def write_private(path: Path, data: bytes) -> None:
    """Write secret material readable by the owner only (0600), creating it with that mode."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        os.fchmod(fd, 0o600)  # the open mode applies only on creation; tighten a pre-existing file too
        fh.write(data)


@dataclass
class CA:
    """A self-signed CA. `cert_pem` is what goes into caBundle / certificate-authority."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _validity(builder: x509.CertificateBuilder, days: int) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.timezone.utc)
    return builder.not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))


def make_ca(cn: str = "kueue-harness-ca", days: int = 7) -> CA:
    """A new EC P-256 CA valid for `days` days."""
    key = ec.generate_private_key(ec.SECP256R1())
    b = x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
    b = _validity(b.public_key(key.public_key()).serial_number(x509.random_serial_number()), days)
    b = b.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    b = b.add_extension(
        x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
    )
    return CA(key, b.sign(key, hashes.SHA256()))


def issue(
    ca: CA, cn: str, *, ips: tuple[str, ...] = (), dns: tuple[str, ...] = (), org: str | None = None,
    server: bool = True, client: bool = False, days: int = 7,
) -> tuple[bytes, bytes]:
    """Issue a leaf certificate. Returns (cert PEM, key PEM); SANs from `ips` and `dns`."""
    key = ec.generate_private_key(ec.SECP256R1())
    b = x509.CertificateBuilder().subject_name(_name(cn, org)).issuer_name(ca.cert.subject)
    b = _validity(b.public_key(key.public_key()).serial_number(x509.random_serial_number()), days)
    sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    sans += [x509.DNSName(d) for d in dns]
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    )
    b = b.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    b = b.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    cert = b.sign(ca.key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def rsa_keypair(bits: int = 2048) -> tuple[bytes, bytes]:
    """(private PEM, public PEM) for the service-account token signer."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    priv = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    pub = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return priv, pub
