"""The deployment's digest key: decision inputs are stored as keyed digests under it.

The key comes from, in this order: `AGENTSKIT_CHAT_DIGEST_KEY` (hex), a key file given
with `--digest-key-file` (a mounted secret, read and never written), or `digest.key` in the
state directory, created on first start. Every replica that shares a store must use the
same key, so a store shared by replicas (PostgreSQL) refuses a key generated on one host.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from agentskit_chat.storage import create_private_file, private_dir, warn_if_exposed

KEY_BYTES = 32
MIN_KEY_BYTES: Final = 16
DIGEST_KEY_ENV: Final = "AGENTSKIT_CHAT_DIGEST_KEY"
DIGEST_KEY_FILE_ENV: Final = "AGENTSKIT_CHAT_DIGEST_KEY_FILE"
SHARED_STORE_SCHEMES: Final = frozenset({"postgresql", "postgres"})
"""Stores that replicas on several hosts share."""
_SCHEME: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def load_or_create_key(path: Path) -> bytes:
    """The key in `path`, created (mode 0600, in a 0700 directory) with random bytes when
    the file is missing; a WARNING when an existing file or directory is open to others.

    Every replica that shares a store must share this key, or replays stop matching.
    """
    try:
        created = private_dir(path.parent)
    except OSError as exc:
        raise ValueError(f"cannot create the directory of {path}: {exc.strerror}") from None
    if not created:
        warn_if_exposed(path.parent, "the state directory")
    try:
        fresh = create_private_file(path, (secrets.token_hex(KEY_BYTES) + "\n").encode())
    except OSError as exc:
        raise ValueError(f"cannot create the digest key file {path}: {exc.strerror}") from None
    if not fresh:
        warn_if_exposed(path, "the digest key file")
    return _read(path)


def configured_key(key_file: Path | None, environ: Mapping[str, str] = os.environ) -> bytes | None:
    """The key given by `AGENTSKIT_CHAT_DIGEST_KEY` or `key_file`; None when neither is.

    Raises ValueError when both are given, or when the key is not hex or is too short (the
    message never holds the key).
    """
    value = environ.get(DIGEST_KEY_ENV, "").strip()
    if value and key_file is not None:
        raise ValueError(
            f"the digest key is given twice: set {DIGEST_KEY_ENV} or --digest-key-file, not both"
        )
    if value:
        return _parse(value, DIGEST_KEY_ENV)
    if key_file is not None:
        return _read(key_file)
    return None


def warn_if_key_file_exposed(key_file: Path | None) -> None:
    """Log one WARNING when the given digest key file is open to others (see
    `warn_if_exposed`); a mounted secret is left as it is."""
    if key_file is not None:
        warn_if_exposed(key_file, "the digest key file")


def refuse_generated_key(store_url: str, key: bytes | None) -> None:
    """Raise ValueError when `store_url` names a store replicas share and no key was given."""
    scheme = _SCHEME.match(store_url)
    if key is not None or scheme is None or scheme.group(1).lower() not in SHARED_STORE_SCHEMES:
        return
    raise ValueError(
        "a PostgreSQL store is shared by replicas, and every replica must digest inputs "
        "under the same key; a key generated on this host would make sessions written by "
        f"other replicas stop replaying. Set {DIGEST_KEY_ENV} (hex, at least "
        f"{MIN_KEY_BYTES} bytes; e.g. `openssl rand -hex 32`) or --digest-key-file FILE "
        f"(or {DIGEST_KEY_FILE_ENV}), the same on every replica"
    )


def _read(path: Path) -> bytes:
    try:
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not ASCII"
        raise ValueError(f"cannot read the digest key file {path}: {reason}") from None
    return _parse(text.strip(), str(path))


def _parse(text: str, origin: str) -> bytes:
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{origin} does not hold a hex-encoded key") from None
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"{origin} holds a key shorter than {MIN_KEY_BYTES} bytes")
    return key
