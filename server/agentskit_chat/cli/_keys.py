"""The deployment's digest key: decision inputs are stored as keyed digests under it."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

KEY_BYTES = 32


def load_or_create_key(path: Path) -> bytes:
    """The key in `path`, created (mode 0600) with random bytes when the file is missing.

    Every replica that shares a store must share this key, or replays stop matching.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read(path)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(secrets.token_hex(KEY_BYTES) + "\n")
    return _read(path)


def _read(path: Path) -> bytes:
    text = path.read_text(encoding="ascii").strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{path} does not hold a hex-encoded key") from None
    if len(key) < 16:
        raise ValueError(f"{path} holds a key shorter than 16 bytes")
    return key
