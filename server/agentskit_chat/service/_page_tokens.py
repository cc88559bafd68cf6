"""ListTurns page tokens: opaque, fixed-size, signed, and bound to one stored session.

A token names the last turn of the page it followed (by a digest of its id, so the token
carries no identifier) and whether that turn was running. It is signed with HMAC-SHA256
under a key derived from the deployment key, over the token and the session it was issued
for: the tenant, the session id and the session's incarnation (so a session deleted and
created again under the same id does not accept its predecessor's tokens). Every replica
sharing the deployment key accepts the tokens of the others; after the key rotates, older
tokens are refused and the client starts again from the first page.

A token is 67 URL-safe base64 characters. Anything else, a token signed for another session
or tenant, or one altered in any byte, is refused with INVALID_ARGUMENT on `page_token`,
always with the same message, before any of it is decoded further.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Final

from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ._errors import ServiceError, invalid

_LABEL: Final = b"agentskit.chat.page-token/1"
_VERSION: Final = 1
_ANCHOR_BYTES: Final = 16
_MAC_BYTES: Final = 32
_BODY_BYTES: Final = 2 + _ANCHOR_BYTES
PAGE_TOKEN_CHARS: Final = -(-(_BODY_BYTES + _MAC_BYTES) * 4 // 3)
"""Length of every token this server issues (unpadded base64 of 50 bytes)."""
_SHAPE: Final = re.compile(rf"[A-Za-z0-9_-]{{{PAGE_TOKEN_CHARS}}}")


def anchor_of(turn_id: str) -> bytes:
    """The digest a token names turn `turn_id` by."""
    return hashlib.sha256(turn_id.encode("utf-8")).digest()[:_ANCHOR_BYTES]


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where a page continues: after the turn whose id has digest `digest`."""

    digest: bytes
    running: bool
    """The turn was running when the token was issued."""

    def names(self, turn_id: str) -> bool:
        """Whether this anchor is turn `turn_id`."""
        return hmac.compare_digest(self.digest, anchor_of(turn_id))


class PageTokens:
    """Issues and verifies page tokens under one deployment key."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        """`key` is the deployment key (its length is checked where input digests use it)."""
        # Derived like the response sealing key: the label keys the extraction and the
        # deployment key is its data, so no input digest (an HMAC under the deployment key)
        # can equal the signing key or a token's signature.
        self._key = HKDF(algorithm=SHA256(), length=32, salt=_LABEL, info=b"hmac").derive(key)

    def scope(self, tenant: str, session_id: str, incarnation: str) -> PageScope:
        """Tokens of one stored session."""
        context = b"".join(_framed(part) for part in (tenant, session_id, incarnation))
        return PageScope(hmac.new(self._key, context, hashlib.sha256))


class PageScope:
    """Issues and reads the page tokens of one stored session."""

    __slots__ = ("_mac",)

    def __init__(self, mac: hmac.HMAC) -> None:
        self._mac = mac

    def issue(self, turn_id: str, running: bool) -> str:
        """A token continuing after turn `turn_id`."""
        body = bytes((_VERSION, int(running))) + anchor_of(turn_id)
        return _encoded(body + self._sign(body))

    def read(self, token: str) -> Anchor:
        """The anchor of `token`; INVALID_ARGUMENT unless this scope issued it."""
        if _SHAPE.fullmatch(token) is None:
            raise _refused()
        try:
            data = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        except (ValueError, binascii.Error):
            raise _refused() from None
        if _encoded(data) != token:  # another spelling of the same bytes is not issued either
            raise _refused()
        body, mac = data[:_BODY_BYTES], data[_BODY_BYTES:]
        if len(mac) != _MAC_BYTES or not hmac.compare_digest(mac, self._sign(body)):
            raise _refused()
        if body[0] != _VERSION or body[1] not in (0, 1):  # signed, so never seen in practice
            raise _refused()
        return Anchor(body[2:], body[1] == 1)

    def _sign(self, body: bytes) -> bytes:
        mac = self._mac.copy()
        mac.update(body)
        return mac.digest()


def _encoded(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _framed(part: str) -> bytes:
    data = part.encode("utf-8", "surrogatepass")
    return len(data).to_bytes(4, "big") + data


def _refused() -> ServiceError:
    return invalid("page_token", "page_token is not a token this server issued for this session")
