"""Unit tests for harness.common.pki: CA and leaf certificates (chain, SANs, usages) and owner-only key files."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from harness.common import pki


@pytest.fixture(scope="module")
def ca() -> pki.CA:
    return pki.make_ca()


def _verify_signed_by(cert: x509.Certificate, issuer: x509.Certificate) -> None:
    """Raise InvalidSignature unless `issuer`'s key signed `cert`."""
    pub = issuer.public_key()
    assert isinstance(pub, ec.EllipticCurvePublicKey)
    pub.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))


def test_ca_is_self_signed_ca(ca: pki.CA) -> None:
    cert = x509.load_pem_x509_certificate(ca.cert_pem)
    assert cert.subject == cert.issuer
    _verify_signed_by(cert, cert)
    bc = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca is True
    ku = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert ku.key_cert_sign and ku.crl_sign
    now = dt.datetime.now(dt.timezone.utc)
    assert cert.not_valid_before_utc <= now < cert.not_valid_after_utc


def test_leaf_chains_to_ca_and_carries_sans(ca: pki.CA) -> None:
    ips = ("127.0.0.1", "::1")
    dns = ("localhost", "kueue-webhook-service.kueue-system.svc")
    cert_pem, key_pem = pki.issue(ca, "kube-apiserver", ips=ips, dns=dns)
    cert = x509.load_pem_x509_certificate(cert_pem)

    assert cert.issuer == ca.cert.subject
    _verify_signed_by(cert, ca.cert)
    cert.verify_directly_issued_by(ca.cert)

    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.IPAddress)) == {ipaddress.ip_address(i) for i in ips}
    assert set(san.get_values_for_type(x509.DNSName)) == set(dns)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kube-apiserver"

    bc = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert bc.ca is False
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]

    # The returned key is the certificate's key.
    key = serialization.load_pem_private_key(key_pem, password=None)
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()
    assert b"ENCRYPTED" not in key_pem


def test_leaf_does_not_chain_to_another_ca(ca: pki.CA) -> None:
    other = pki.make_ca("other-ca")
    cert = x509.load_pem_x509_certificate(pki.issue(ca, "x", dns=("localhost",))[0])
    with pytest.raises(InvalidSignature):
        _verify_signed_by(cert, other.cert)


def test_client_cert_usages_and_org(ca: pki.CA) -> None:
    cert_pem, _ = pki.issue(ca, "admin", org="system:masters", server=False, client=True)
    cert = x509.load_pem_x509_certificate(cert_pem)
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    with pytest.raises(x509.ExtensionNotFound):  # no SANs asked for, none added
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)


def test_leaf_validity_window(ca: pki.CA) -> None:
    cert = x509.load_pem_x509_certificate(pki.issue(ca, "x", days=3)[0])
    now = dt.datetime.now(dt.timezone.utc)
    assert cert.not_valid_before_utc <= now
    assert dt.timedelta(days=2, hours=23) < cert.not_valid_after_utc - now <= dt.timedelta(days=3)


def test_rsa_keypair_matches() -> None:
    priv_pem, pub_pem = pki.rsa_keypair(bits=1024)
    priv = serialization.load_pem_private_key(priv_pem, password=None)
    pub = serialization.load_pem_public_key(pub_pem)
    assert isinstance(priv, rsa.RSAPrivateKey) and isinstance(pub, rsa.RSAPublicKey)
    assert priv.public_key().public_numbers() == pub.public_numbers()
    sig = priv.sign(b"token", padding.PKCS1v15(), pki.hashes.SHA256())
    pub.verify(sig, b"token", padding.PKCS1v15(), pki.hashes.SHA256())


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.mark.parametrize("umask", [0o000, 0o002, 0o022])
def test_write_private_creates_0600_under_permissive_umask(tmp_path: Path, umask: int) -> None:
    path = tmp_path / "tls.key"
    old = os.umask(umask)
    try:
        pki.write_private(path, b"secret")
    finally:
        os.umask(old)
    assert path.read_bytes() == b"secret"
    assert _mode(path) == 0o600


def test_write_private_tightens_and_truncates_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_bytes(b"a much longer previous content\n")
    path.chmod(0o644)
    old = os.umask(0)
    try:
        pki.write_private(path, b"new")
    finally:
        os.umask(old)
    assert path.read_bytes() == b"new"
    assert _mode(path) == 0o600
