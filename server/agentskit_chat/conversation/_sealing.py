"""Sealing route responses that application code produced, so records hold no content.

A replay must not call application code again, so such a response is kept with its
decision. It is kept sealed: AES-SIV under a key derived from the deployment key, bound to
the session and message it belongs to. AES-SIV is deterministic, so a record encodes to
the same bytes every time, and a sealed response can neither be read nor moved to another
message without the key.
"""

from __future__ import annotations

import base64

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ._decisions import MIN_KEY_BYTES
from ._errors import SealedResponseError

_LABEL = b"agentskit.chat.response-seal/1"


class ResponseSealer:
    """Seals and opens stored responses with one deployment key."""

    __slots__ = ("_cipher",)

    def __init__(self, key: bytes) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"the deployment key must be at least {MIN_KEY_BYTES} bytes")
        # HKDF keys its extraction with the label and feeds the deployment key in as data:
        # input digests are HMACs keyed with the deployment key, so no digest of any input
        # can equal (or reveal) the sealing key.
        derived = HKDF(algorithm=SHA256(), length=64, salt=_LABEL, info=b"aes-siv").derive(key)
        self._cipher = AESSIV(derived)

    def seal(self, response: str, *, session_id: str, message_id: str) -> str:
        """`response` sealed for one message of one session, as URL-safe base64."""
        data = response.encode("utf-8", "surrogatepass")
        sealed = self._cipher.encrypt(data, _context(session_id, message_id))
        return base64.urlsafe_b64encode(sealed).decode("ascii")

    def open(self, sealed: str, *, session_id: str, message_id: str) -> str:
        """The response sealed by `seal`; SealedResponseError when it does not open."""
        try:
            data = base64.urlsafe_b64decode(sealed.encode("ascii"))
            opened: bytes = self._cipher.decrypt(data, _context(session_id, message_id))
            return opened.decode("utf-8", "surrogatepass")
        except (InvalidTag, ValueError) as exc:
            raise SealedResponseError(
                "a sealed response does not open with this key (another key, or tampered)"
            ) from exc


def _context(session_id: str, message_id: str) -> list[bytes]:
    return [_LABEL, session_id.encode("utf-8"), message_id.encode("utf-8")]
