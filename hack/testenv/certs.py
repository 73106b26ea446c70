"""Certificates and keys for a throw-away control plane (owns all PKI of the harness).

One call, :func:`generate_pki`, writes into a directory:

- ``ca.crt``/``ca.key``: a self-signed CA trusted by every component;
- ``apiserver.crt``/``.key``: the kube-apiserver serving certificate (SANs for
  loopback, ``localhost`` and the in-cluster ``kubernetes.default.svc`` names);
- ``<user>.crt``/``.key``: client certificates, each for one user in the
  ``system:masters`` group (admin, kube-controller-manager, kube-scheduler, kwok);
- ``sa.key``/``sa.pub``: the RSA service-account signing key pair, so the
  TokenRequest API works.

:func:`generate_serving_pki` writes just a CA and one serving certificate
(``server.crt``/``.key``) for other test servers, such as the registry.

:func:`issue_serving` and :func:`issue_client` sign one more certificate with an
existing :class:`Pki`'s CA: the fault-injecting proxy (``hack.testenv.faultproxy``)
serves with one, and reaches the apiserver as ``front-proxy-client`` with another
(the apiserver trusts the CA for request-header authentication).

Keys for TLS are ECDSA P-256 (fast to generate); the service-account key is RSA
(RS256, what every client library expects).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Users that get a client certificate; all are in system:masters (a test cluster).
CLIENT_USERS = ("admin", "kube-controller-manager", "kube-scheduler", "kwok")
MASTERS_GROUP = "system:masters"
# The first address of --service-cluster-ip-range: the "kubernetes" Service's IP.
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"

_VALIDITY = dt.timedelta(days=30)
_SKEW = dt.timedelta(minutes=5)

_PrivateKey: TypeAlias = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class CertPair:
    """A certificate and its private key, as PEM files."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    """Paths of everything :func:`generate_pki` wrote."""

    dir: Path
    ca: CertPair
    apiserver: CertPair
    clients: dict[str, CertPair]
    sa_key: Path
    sa_pub: Path

    def client(self, user: str) -> CertPair:
        return self.clients[user]


def _ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: _PrivateKey) -> None:
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.write_bytes(pem)
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _SKEW)
        .not_valid_after(now + _VALIDITY)
    )


def _leaf(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    sans: list[x509.GeneralName] | None = None,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _ec_key()
    builder = (
        _builder(subject, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _make_ca(
    directory: Path, common_name: str = "bootc-operator-test-ca"
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A self-signed CA written to ``directory/ca.crt`` and ``ca.key``."""
    ca_key = _ec_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_cert(directory / "ca.crt", ca_cert)
    _write_key(directory / "ca.key", ca_key)
    return ca_key, ca_cert


def generate_pki(directory: Path, extra_sans: tuple[str, ...] = ()) -> Pki:
    """Write a fresh CA, serving/client certificates and the SA key pair into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)

    ca_key, ca_cert = _make_ca(directory)
    ca = CertPair(directory / "ca.crt", directory / "ca.key")

    dns_names = [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    ips = ["127.0.0.1", "::1", KUBERNETES_SERVICE_IP]
    for san in extra_sans:
        try:
            ipaddress.ip_address(san)
        except ValueError:
            dns_names.append(san)
        else:
            ips.append(san)
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    serving_key, serving_cert = _leaf(
        ca_key,
        ca_cert,
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
        ExtendedKeyUsageOID.SERVER_AUTH,
        sans,
    )
    apiserver = CertPair(directory / "apiserver.crt", directory / "apiserver.key")
    _write_cert(apiserver.cert, serving_cert)
    _write_key(apiserver.key, serving_key)

    clients: dict[str, CertPair] = {}
    for user in CLIENT_USERS:
        subject = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, MASTERS_GROUP),
                x509.NameAttribute(NameOID.COMMON_NAME, user),
            ]
        )
        key, cert = _leaf(ca_key, ca_cert, subject, ExtendedKeyUsageOID.CLIENT_AUTH)
        pair = CertPair(directory / f"{user}.crt", directory / f"{user}.key")
        _write_cert(pair.cert, cert)
        _write_key(pair.key, key)
        clients[user] = pair

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_key_path, sa_pub_path = directory / "sa.key", directory / "sa.pub"
    _write_key(sa_key_path, sa_key)
    sa_pub_path.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return Pki(directory, ca, apiserver, clients, sa_key_path, sa_pub_path)


def _load_ca(pki: Pki) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = serialization.load_pem_private_key(pki.ca.key.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki.ca.key}: not an EC key")
    return key, x509.load_pem_x509_certificate(pki.ca.cert.read_bytes())


def _sans(hosts: tuple[str, ...]) -> list[x509.GeneralName]:
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    return sans


def issue_serving(
    pki: Pki,
    name: str,
    hosts: tuple[str, ...] = ("127.0.0.1", "::1", "localhost"),
) -> CertPair:
    """A serving certificate for ``hosts`` signed by ``pki``'s CA, written to
    ``pki.dir/<name>.crt``/``.key`` (clients that trust the cluster CA trust it)."""
    ca_key, ca_cert = _load_ca(pki)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    key, cert = _leaf(ca_key, ca_cert, subject, ExtendedKeyUsageOID.SERVER_AUTH, _sans(hosts))
    pair = CertPair(pki.dir / f"{name}.crt", pki.dir / f"{name}.key")
    _write_cert(pair.cert, cert)
    _write_key(pair.key, key)
    return pair


def issue_client(pki: Pki, user: str, groups: tuple[str, ...] = ()) -> CertPair:
    """A client certificate for ``user`` in ``groups`` signed by ``pki``'s CA, written to
    ``pki.dir/<user>.crt``/``.key`` (``front-proxy-client``: the request-header
    authenticator's allowed name)."""
    ca_key, ca_cert = _load_ca(pki)
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    subject = x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, user)])
    key, cert = _leaf(ca_key, ca_cert, subject, ExtendedKeyUsageOID.CLIENT_AUTH)
    pair = CertPair(pki.dir / f"{user}.crt", pki.dir / f"{user}.key")
    _write_cert(pair.cert, cert)
    _write_key(pair.key, key)
    return pair


@dataclass(frozen=True)
class ServingPki:
    """A CA and one serving certificate signed by it (see :func:`generate_serving_pki`)."""

    dir: Path
    ca: CertPair
    server: CertPair


def generate_serving_pki(
    directory: Path,
    common_name: str,
    hosts: tuple[str, ...] = ("127.0.0.1", "::1", "localhost"),
) -> ServingPki:
    """Write a fresh CA (``ca.crt``/``ca.key``) and a serving certificate for ``hosts``
    (``server.crt``/``server.key``) into ``directory``: for test servers other than
    the kube-apiserver (e.g. the registry)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _make_ca(directory, f"{common_name}-ca")
    key, cert = _leaf(
        ca_key,
        ca_cert,
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]),
        ExtendedKeyUsageOID.SERVER_AUTH,
        _sans(hosts),
    )
    server = CertPair(directory / "server.crt", directory / "server.key")
    _write_cert(server.cert, cert)
    _write_key(server.key, key)
    return ServingPki(directory, CertPair(directory / "ca.crt", directory / "ca.key"), server)
