"""TLS for the gRPC listener: certificate files checked at start, swapped in on reload.

`TlsFiles` names a certificate chain and key, and optionally a CA bundle: with one, every
client must present a certificate it signed (mTLS). `ServerTls.reload()` reads the files
again; the new certificate is used from the next handshake on, connections already open
keep theirs. Files that do not load are refused and the current ones stay.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

log = logging.getLogger("agentskit_chat.tls")


class TlsFileError(ValueError):
    """A certificate, key or CA file is missing, unreadable or does not fit."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """Where the listener's TLS material lives."""

    cert: Path
    """PEM certificate chain, the server's own certificate first."""
    key: Path
    """PEM private key of that certificate (unencrypted)."""
    client_ca: Path | None = None
    """PEM CA bundle; when set, clients must present a certificate it signed."""


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TlsFileError(f"{what} {path}: cannot read it ({exc.strerror})") from None


def load_configuration(files: TlsFiles) -> grpc.ServerCertificateConfiguration:
    """The certificate configuration of `files`; TlsFileError when they do not load or fit."""
    chain = _read(files.cert, "TLS certificate")
    key = _read(files.key, "TLS key")
    try:
        certificates = x509.load_pem_x509_certificates(chain)
    except ValueError:
        raise TlsFileError(f"TLS certificate {files.cert}: not a PEM certificate") from None
    try:
        private = serialization.load_pem_private_key(key, password=None)
    except (ValueError, TypeError):
        raise TlsFileError(f"TLS key {files.key}: not an unencrypted PEM private key") from None
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    encoding = serialization.Encoding.DER
    if certificates[0].public_key().public_bytes(encoding, public) != (
        private.public_key().public_bytes(encoding, public)
    ):
        raise TlsFileError(f"TLS key {files.key} does not belong to certificate {files.cert}")
    roots = None
    if files.client_ca is not None:
        roots = _read(files.client_ca, "TLS client CA")
        try:
            x509.load_pem_x509_certificates(roots)
        except ValueError:
            raise TlsFileError(
                f"TLS client CA {files.client_ca}: not a PEM certificate bundle"
            ) from None
    return grpc.ssl_server_certificate_configuration([(key, chain)], root_certificates=roots)


class ServerTls:
    """Server credentials over `files` whose certificates can be replaced while serving."""

    def __init__(self, files: TlsFiles) -> None:
        self.files = files
        self._initial = load_configuration(files)
        self._pending: grpc.ServerCertificateConfiguration | None = None

    def credentials(self) -> grpc.ServerCredentials:
        """Credentials that pick up reloaded certificates at the next handshake."""
        return grpc.dynamic_ssl_server_credentials(
            self._initial,
            self._fetch,  # type: ignore[arg-type]  # None means "no change", as grpc documents
            require_client_authentication=self.files.client_ca is not None,
        )

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        pending, self._pending = self._pending, None
        return pending

    def reload(self) -> bool:
        """Use the files' current contents from the next handshake; False when refused."""
        try:
            self._pending = load_configuration(self.files)
        except TlsFileError as exc:
            log.error("TLS reload refused, current certificates stay: %s", exc)
            return False
        log.warning("TLS certificates reloaded")
        return True
