"""Throwaway CA and server certificate for 127.0.0.1 (one per process, cached)."""

from __future__ import annotations

import atexit
import datetime as dt
import ipaddress
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

_lock = threading.Lock()
_cached: TLS | None = None


@dataclass(frozen=True)
class TLS:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    ca_file: Path  # the CA alone: trust only the fake
    cert_file: Path
    key_file: Path
    bundle_file: Path  # the CA plus the system roots (for processes that also talk to real hosts)


def _generate() -> tuple[bytes, bytes, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fakebeaker test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    x509.DNSName("localhost"),
                    x509.DNSName("github.com"),  # served through `FakeBeaker.github_proxy` (gantry run)
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return ca.public_bytes(pem), cert.public_bytes(pem), key_pem


def _system_roots() -> bytes:
    import ssl

    for path in (ssl.get_default_verify_paths().cafile, "/etc/ssl/certs/ca-certificates.crt"):
        if path and os.path.isfile(path):
            return Path(path).read_bytes()
    return b""


def tls_material(directory: str | os.PathLike | None = None) -> TLS:
    """The process-wide CA and server certificate, written to `directory` (a temp dir by default).

    An existing CA in `directory` is reused. One CA per process on purpose: grpc reads GRPC_DEFAULT_SSL_ROOTS_FILE_PATH only once per process,
    so every fake started later in the same process must be signed by the same CA.
    """
    global _cached
    with _lock:
        if _cached is not None and directory is None:
            return _cached
        if directory is not None:
            d = Path(directory)
        else:
            d = Path(tempfile.mkdtemp(prefix="fakebeaker-tls-"))
            atexit.register(shutil.rmtree, d, ignore_errors=True)
        if all((d / n).is_file() for n in ("ca.pem", "server.pem", "server.key")):
            # reuse material a previous process wrote (so several processes can share one CA)
            ca_pem, cert_pem, key_pem = ((d / n).read_bytes() for n in ("ca.pem", "server.pem", "server.key"))
        elif _cached is not None:
            ca_pem, cert_pem, key_pem = _cached.ca_pem, _cached.cert_pem, _cached.key_pem
        else:
            ca_pem, cert_pem, key_pem = _generate()
        d.mkdir(parents=True, exist_ok=True)
        files = {
            "ca.pem": ca_pem,
            "server.pem": cert_pem,
            "server.key": key_pem,
            "bundle.pem": ca_pem + b"\n" + _system_roots(),
        }
        for name, data in files.items():
            (d / name).write_bytes(data)
        (d / "server.key").chmod(0o600)
        tls = TLS(
            ca_pem, cert_pem, key_pem, d / "ca.pem", d / "server.pem", d / "server.key", d / "bundle.pem"
        )
        if _cached is None:
            _cached = tls
        return tls
