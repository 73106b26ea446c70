"""A self-signed serving certificate: ``python -m bootc_operator.runtime.selfsigned``.

Prints a self-signed certificate and its new EC P-256 private key (PEM,
certificate first) to stdout. Run as a child process by ``servingcert.self_signed`` so the
operator's processes never import ``cryptography`` (its reason is there).
``generate`` is the pure part, also used by tests.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import sys
from collections.abc import Sequence


def default_names() -> list[str]:
    """``localhost`` and this host's name (a Pod's name in a cluster), 127.0.0.1, ::1."""
    names = ["localhost", socket.gethostname(), "127.0.0.1", "::1"]
    return list(dict.fromkeys(n for n in names if n))


def generate(names: Sequence[str], days: int = 365) -> tuple[bytes, bytes]:
    """(key PEM, certificate PEM) of a self-signed certificate for ``names`` (DNS or IP)."""
    from cryptography import x509  # noqa: PLC0415 - only this child process pays for it
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: PLC0415

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    alt: list[x509.GeneralName] = []
    for name in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt.append(x509.DNSName(name))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


def main() -> int:
    key_pem, cert_pem = generate(default_names())
    sys.stdout.buffer.write(cert_pem + key_pem)
    return 0


if __name__ == "__main__":
    sys.exit(main())
