"""The certificates and keys a test cluster's programs are started with.

A real control plane speaks TLS everywhere: kube-apiserver serves HTTPS and knows its
clients by certificates signed by the cluster CA, signs ServiceAccount tokens with a key
pair, and calls webhooks (Kueue's) only over HTTPS with a CA bundle it is given. `Pki`
makes one CA for the whole stack (written into a directory of the stack's own) and from
it: the API server's serving certificate for 127.0.0.1 and the in-cluster names, a
client certificate per identity (`system:masters` for the admin and the controllers,
as kubeadm's admin.conf and envtest do; the API server's to etcd and to the nodes'
kubelet port), etcd's serving and peer certificate, the ServiceAccount signing key pair,
and serving certificates for the webhook and metrics servers of the operators.

What this does not do: no rotation (a stack lives for a test session), no intermediate
CAs, no front-proxy CA (no aggregated API server is started). Keys are ECDSA P-256
(quick to make, accepted by Go's TLS), the ServiceAccount key RSA (what the API server's
`--service-account-key-file` reads first and what every token verifier supports).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Pki", "CertPair"]

_VALID_FOR = dt.timedelta(days=7)


@dataclass(frozen=True)
class CertPair:
    """A certificate and its key, as files."""

    cert: Path
    key: Path

    def cert_data(self) -> str:
        return base64.b64encode(self.cert.read_bytes()).decode()

    def key_data(self) -> str:
        return base64.b64encode(self.key.read_bytes()).decode()


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _san(hosts: tuple[str, ...]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


class Pki:
    """One CA in `directory` (created owner-only) and the certificates issued from it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._now = dt.datetime.now(dt.timezone.utc)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "testcluster-ca")])
        self._ca_name = name
        self._ca_cert = (
            self._builder(name, self._ca_key.public_key())
            .issuer_name(name)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca_file = self._write("ca.crt", self._ca_cert.public_bytes(serialization.Encoding.PEM))
        self.ca_key_file = self._write("ca.key", _pem_key(self._ca_key))

    @classmethod
    def load(cls, directory: Path) -> "Pki":
        """The CA a stack made in `directory` (its `ca.crt` and `ca.key`), to issue more certificates from: a
        process other than the stack's own (a test worker's fault proxy, fault_proxy.py) names itself by it."""
        pki = cls.__new__(cls)
        pki.directory = directory
        pki._now = dt.datetime.now(dt.timezone.utc)
        pki._ca_cert = x509.load_pem_x509_certificate((directory / "ca.crt").read_bytes())
        loaded = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), password=None)
        assert isinstance(loaded, ec.EllipticCurvePrivateKey)
        pki._ca_key = loaded
        pki._ca_name = pki._ca_cert.subject
        pki.ca_file = directory / "ca.crt"
        pki.ca_key_file = directory / "ca.key"
        return pki

    @property
    def ca_data(self) -> str:
        """The CA as base64 PEM: a kubeconfig's `certificate-authority-data`, a webhook's `caBundle`."""
        return base64.b64encode(self.ca_file.read_bytes()).decode()

    def _write(self, name: str, data: bytes) -> Path:
        path = self.directory / name
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    def _builder(self, subject: x509.Name, public_key: object) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .public_key(public_key)  # type: ignore[arg-type]
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._now - dt.timedelta(minutes=5))
            .not_valid_after(self._now + _VALID_FOR)
        )

    def _issue(self, stem: str, subject: x509.Name, usage: list, hosts: tuple[str, ...] = ()) -> CertPair:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            self._builder(subject, key.public_key())
            .issuer_name(self._ca_name)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        )
        if hosts:
            builder = builder.add_extension(_san(hosts), critical=False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        return CertPair(self._write(f"{stem}.crt", cert.public_bytes(serialization.Encoding.PEM)), self._write(f"{stem}.key", _pem_key(key)))

    def serving(self, stem: str, hosts: tuple[str, ...], peer: bool = False) -> CertPair:
        """A serving certificate naming `hosts` (IP addresses or DNS names); with `peer`, good for client
        authentication too (an etcd member's peer certificate serves and dials with one key)."""
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])])
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] + ([ExtendedKeyUsageOID.CLIENT_AUTH] if peer else [])
        return self._issue(stem, subject, usages, hosts)

    def client(self, stem: str, user: str, groups: tuple[str, ...] = ()) -> CertPair:
        """A client certificate: the API server takes CN as the user name and each O as a group."""
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
        return self._issue(stem, x509.Name(attributes), [ExtendedKeyUsageOID.CLIENT_AUTH])

    def service_account_keys(self) -> tuple[Path, Path]:
        """The key pair ServiceAccount tokens are signed with: (private key, public key)."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        return self._write("sa.key", _pem_key(key)), self._write("sa.pub", public)
