"""Throwaway credentials for a deployment on this machine: a TLS certificate authority and a server
certificate for 127.0.0.1, and SuperNode key pairs -- in the formats Flower 1.41 reads.

Nothing here is cryptography of drflmodel's own: keys and certificates are made with the
``cryptography`` package (a dependency of Flower itself), and everything that *uses* them is
Flower's -- the SuperLink serves HTTPS with ``--ssl-certfile``/``--ssl-keyfile`` (and
``--ssl-ca-certfile``), SuperNodes and the ``flwr`` command verify it against the CA
(``--root-certificates``, ``root-certificates`` in the CLI's ``config.toml``), and with
``--enable-supernode-auth`` the SuperLink admits only SuperNodes whose public key was registered
with ``flwr supernode register`` (EC keys on a NIST curve, OpenSSH format; the SuperNode signs with
``--auth-supernode-private-key``).

For loopback trials and tests. A deployment across sites uses its organization's CA and keys made
and kept by each site (the private key never leaves the site; only the public key is registered).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TLSFiles", "loopback_certificates", "supernode_key_pair"]


@dataclass(frozen=True)
class TLSFiles:
    """The TLS files of a SuperLink: ``ca_cert`` (the certificate authority the SuperNodes and the
    ``flwr`` command trust), ``server_cert`` and ``server_key`` (the SuperLink's own, PEM)."""

    ca_cert: Path
    server_cert: Path
    server_key: Path

    def check(self) -> "TLSFiles":
        from ..errors import InvalidParameterError

        for name in ("ca_cert", "server_cert", "server_key"):
            if not Path(getattr(self, name)).is_file():
                raise InvalidParameterError(f"tls.{name}: no such file {getattr(self, name)}")
        return self


def _write_private(path: Path, data: bytes) -> None:
    """Write a private key readable by its owner only (created with mode 600, never wider)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)                      # an existing file keeps its mode through O_CREAT


def _ec_key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP384R1())


def _certificate(subject, issuer, public_key, signing_key, days: float, ca: bool, san=None):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True))
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


def loopback_certificates(directory, name: str = "drflmodel loopback", days: float = 1.0) -> TLSFiles:
    """A new certificate authority and a server certificate it signs for ``127.0.0.1`` and
    ``localhost`` (EC P-384, valid ``days`` days), written to ``directory`` as ``ca.crt``,
    ``server.pem`` and ``server.key`` (the names of Flower's TLS guide). The CA's private key is not
    kept: nothing else can be signed with it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.x509.oid import NameOID

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    ca_key, server_key = _ec_key(), _ec_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
    ca = _certificate(ca_name, ca_name, ca_key.public_key(), ca_key, days, ca=True)
    server = _certificate(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]), ca_name,
                          server_key.public_key(), ca_key, days, ca=False,
                          san=[x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
    pem = serialization.Encoding.PEM
    files = TLSFiles(out / "ca.crt", out / "server.pem", out / "server.key")
    files.ca_cert.write_bytes(ca.public_bytes(pem))
    files.server_cert.write_bytes(server.public_bytes(pem))
    _write_private(files.server_key, server_key.private_bytes(pem, serialization.PrivateFormat.TraditionalOpenSSL,
                                                              serialization.NoEncryption()))
    return files


def supernode_key_pair(directory, name: str) -> tuple[Path, Path]:
    """A SuperNode's EC P-384 key pair in OpenSSH format: ``(private, public)`` written to
    ``directory/name`` (mode 600) and ``directory/name.pub`` -- what ``flower-supernode
    --auth-supernode-private-key`` and ``flwr supernode register`` read."""
    from cryptography.hazmat.primitives import serialization

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    key = _ec_key()
    private, public = out / name, out / f"{name}.pub"
    _write_private(private, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                              serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                     serialization.PublicFormat.OpenSSH))
    return private, public
