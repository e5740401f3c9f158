"""Certificates for serving the test API server over HTTPS, made when a server starts.

A real cluster's API server answers on HTTPS with a serving certificate signed by
the cluster CA, and kubeconfigs carry that CA (`certificate-authority` as a file,
or `certificate-authority-data` inline). Clients then verify the server: a
`kubectl` or the official Python client refuses a certificate that its CA did not
sign or that does not name the address it dialled. `ServingCertificates` makes
one CA and one serving certificate for 127.0.0.1 and `localhost` (both as
subject alternative names, as kubeadm puts the addresses in), with ECDSA P-256
keys (fast to make, accepted by Go's and OpenSSL's TLS alike).

What this does not do: no client certificates (the server authenticates bearer
tokens only), no rotation, no intermediate CAs; the CA key never leaves memory.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["ServingCertificates", "make_certificates"]

_VALID_FOR = dt.timedelta(days=2)


@dataclass(frozen=True)
class ServingCertificates:
    """A CA (certificate only) and a serving certificate with its key, all PEM."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    @property
    def ca_data(self) -> str:
        """The CA as a kubeconfig's `certificate-authority-data`: base64 of the PEM."""
        return base64.b64encode(self.ca_pem).decode()

    def server_context(self) -> ssl.SSLContext:
        """The TLS context a server socket is wrapped with (TLS 1.2 and later, as kube-apiserver's default)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        # load_cert_chain reads files only: hand it private temporary ones, removed at once.
        with tempfile.TemporaryDirectory(prefix="kubeapi-tls-") as folder:
            cert_file, key_file = Path(folder) / "tls.crt", Path(folder) / "tls.key"
            cert_file.write_bytes(self.cert_pem)
            key_file.write_bytes(self.key_pem)
            context.load_cert_chain(cert_file, key_file)
        context.set_alpn_protocols(["http/1.1"])
        return context


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_certificates(hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> ServingCertificates:
    """A fresh CA and a serving certificate naming `hosts` (IP addresses or DNS names)."""
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("raybridge-test-ca")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALID_FOR)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("kube-apiserver"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALID_FOR)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False, crl_sign=False,
                                     content_commitment=False, data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return ServingCertificates(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()),
    )
