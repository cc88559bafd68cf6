"""Bearer-token authentication: a file of token digests, each mapped to a tenant.

The tokens file (YAML or JSON) holds only SHA-256 digests, never tokens::

    tokens:
      - sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
        tenant: acme
      - sha256: ...
        tenant: globex
        definitions: [support]   # optional: the only definitions this token may use
        rates: {turns: 2, turns_burst: 5, sessions: 0.5}   # optional: this tenant's own

A call carries `authorization: Bearer <token>`; the token's digest picks the principal.
Several digests may map to one tenant, which is how a token is rotated; `rates` (turns or
session creations per second, and their bursts, default 10) replace the server's
`--rate-*` for that tenant, and every entry of a tenant must give the same ones. Nothing here
logs or returns a token, a digest or which of them was wrong. The check takes plain
(key, value) pairs, so every transport (gRPC here through `Guard`, an HTTP listener with
its `authorization` header) authenticates the same way and then runs the call under
`agentskit_chat.service.act_as(principal)`.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from agentskit_chat.service import Principal, Rate, RateLimits

log = logging.getLogger("agentskit_chat.auth")

MAX_TOKEN_LENGTH: Final = 4096
_DIGEST: Final = re.compile(r"[0-9a-f]{64}")
_TENANT: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}")
_BEARER: Final = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +(\S+) *")


class TokenFileError(ValueError):
    """The tokens file cannot be used; the message names the entry, never a value."""


def token_digest(token: str) -> str:
    """The hex SHA-256 of `token` as the tokens file holds it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def load_tokens(path: Path) -> dict[str, Principal]:
    """Digest -> principal, from the tokens file at `path`; TokenFileError when unusable."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TokenFileError(f"tokens file {path}: cannot read it ({exc.strerror})") from None
    except (yaml.YAMLError, UnicodeDecodeError):
        raise TokenFileError(f"tokens file {path}: not valid YAML or JSON") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("tokens"), list):
        raise TokenFileError(f"tokens file {path}: expected a mapping with a `tokens` list")
    table: dict[str, Principal] = {}
    rates: dict[str, RateLimits | None] = {}
    for index, entry in enumerate(data["tokens"]):
        where = f"tokens file {path}: tokens[{index}]"
        digest, principal = _entry(where, entry)
        if digest in table:
            raise TokenFileError(f"{where}: repeats the digest of an earlier entry")
        if rates.setdefault(principal.tenant, principal.rates) != principal.rates:
            raise TokenFileError(f"{where}.rates: differ from an earlier entry of the same tenant")
        table[digest] = principal
    return table


def _entry(where: str, entry: Any) -> tuple[str, Principal]:
    if not isinstance(entry, Mapping):
        raise TokenFileError(f"{where}: expected a mapping with `sha256` and `tenant`")
    unknown = set(entry) - {"sha256", "tenant", "definitions", "rates"}
    if unknown:
        raise TokenFileError(f"{where}: unknown keys {sorted(map(str, unknown))}")
    digest = entry.get("sha256")
    if not isinstance(digest, str) or _DIGEST.fullmatch(digest.lower()) is None:
        raise TokenFileError(f"{where}.sha256: must be 64 hex digits (the SHA-256 of a token)")
    tenant = entry.get("tenant")
    if not isinstance(tenant, str) or _TENANT.fullmatch(tenant) is None:
        raise TokenFileError(
            f"{where}.tenant: must be 1-128 letters, digits and . _ : - starting with a "
            "letter or digit"
        )
    definitions = entry.get("definitions")
    if definitions is not None and (
        not isinstance(definitions, list) or not all(isinstance(d, str) for d in definitions)
    ):
        raise TokenFileError(f"{where}.definitions: must be a list of definition ids")
    allowed = None if definitions is None else frozenset(definitions)
    return digest.lower(), Principal(tenant, allowed, _rates(f"{where}.rates", entry.get("rates")))


_RATE_KEYS: Final = frozenset({"turns", "turns_burst", "sessions", "sessions_burst"})


def _rates(where: str, value: Any) -> RateLimits | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value or set(value) - _RATE_KEYS:
        raise TokenFileError(f"{where}: must map some of {sorted(_RATE_KEYS)} to numbers")
    kinds = {}
    for kind in ("turns", "sessions"):
        per_second, burst = value.get(kind), value.get(f"{kind}_burst", 10)
        if per_second is None:
            if f"{kind}_burst" in value:
                raise TokenFileError(f"{where}.{kind}_burst: needs {kind}")
            continue
        if isinstance(per_second, bool) or not isinstance(per_second, int | float):
            raise TokenFileError(f"{where}.{kind}: must be a number of requests per second")
        if isinstance(burst, bool) or not isinstance(burst, int):
            raise TokenFileError(f"{where}.{kind}_burst: must be a whole number")
        try:
            kinds[kind] = Rate(float(per_second), burst)
        except ValueError:
            raise TokenFileError(
                f"{where}.{kind}: must be positive, with a burst of at least 1"
            ) from None
    return RateLimits(**kinds)


class Authenticator:
    """Checks bearer tokens against the tokens file; `reload()` reads the file again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._table = load_tokens(path)

    @property
    def tokens(self) -> int:
        """Digests currently accepted."""
        return len(self._table)

    def reload(self) -> bool:
        """Accept the file's tokens from now on; False (the old ones stay) when unusable."""
        try:
            self._table = load_tokens(self.path)
        except TokenFileError as exc:
            log.error("tokens reload refused, previous tokens stay: %s", exc)
            return False
        log.warning("tokens reloaded: %d tokens", len(self._table))
        return True

    def authenticate(self, metadata: Iterable[tuple[str, str | bytes]] | None) -> Principal | None:
        """The principal of the call's bearer token; None when missing or unknown."""
        for key, value in metadata or ():
            if key != "authorization":
                continue
            if not isinstance(value, str) or len(value) > MAX_TOKEN_LENGTH:
                return None
            found = _BEARER.fullmatch(value)
            if found is None:
                return None
            return self._table.get(token_digest(found.group(1)))
        return None
