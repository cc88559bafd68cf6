"""Files the server keeps on disk (the SQLite store, the digest key): created for their
owner only, whatever the umask, and a warning for what it finds more open than that.

What the server creates gets exact modes: directories 0700 (every missing parent too) and
files 0600, set with chmod after creation, since a umask can only take bits away (under
umask 000 `mkdir -p` makes 0777 parents; under 0277 a file would be unwritable).

What it finds it leaves as it is, and logs one WARNING per path when others can reach it:
any access for others (the world bits), or group access for a group the process is not in.
Group access for one of the process's own groups is how the container image (its state
directory is 0750, group 10001 = the server's) and a Kubernetes `fsGroup` volume or secret
(group-owned by the pod's supplementary group, group-readable or -writable) share files,
so that alone is not flagged. An existing directory is never chmod-ed: it may be a mounted
volume whose modes belong to its owner (an `emptyDir` is 0777 so that any container of the
pod may use it).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from pathlib import Path
from typing import Final

log = logging.getLogger("agentskit_chat.storage")

DIR_MODE: Final = 0o700
FILE_MODE: Final = 0o600
_WARNED: set[Path] = set()
_LOCK: Final = threading.Lock()


def private_dir(path: Path) -> list[Path]:
    """Create `path` and its missing parents, each mode 0700; the directories created.

    Existing ones are left unchanged. OSError when a directory cannot be created.
    """
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    created = []
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            continue  # another process made it first: not ours to change
        os.chmod(directory, DIR_MODE)
        created.append(directory)
    return created


def create_private_file(path: Path, content: bytes = b"") -> bool:
    """Create `path` with mode 0600 holding `content`; False, touching nothing, when it
    exists. OSError when it cannot be created or written."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(descriptor, FILE_MODE)
        view = memoryview(content)
        while view:
            view = view[os.write(descriptor, view) :]
    finally:
        os.close(descriptor)
    return True


def exposure(path: Path) -> str | None:
    """Who besides the owner can reach `path` ("others", "group 123"), with its mode;
    None when nobody can, or when it cannot be examined."""
    try:
        found = path.stat()
    except OSError:
        return None
    mode = stat.S_IMODE(found.st_mode)
    who = []
    if mode & 0o070 and found.st_gid not in _own_groups():
        who.append(f"group {found.st_gid}")
    if mode & 0o007:
        who.append("others")
    if not who:
        return None
    return f"{' and '.join(who)} (mode {mode:04o})"


def _own_groups() -> set[int]:
    """The process's group and its supplementary groups (where Kubernetes puts `fsGroup`)."""
    return {os.getegid(), *os.getgroups()}


def warn_if_exposed(path: Path, what: str) -> None:
    """Log one WARNING, once per path and process, when `exposure(path)` finds others."""
    found = exposure(path)
    if found is None:
        return
    resolved = path.resolve()
    with _LOCK:
        if resolved in _WARNED:
            return
        _WARNED.add(resolved)
    wanted = "0700" if path.is_dir() else "0600"
    log.warning(
        "%s %s is open to %s: make it %s, or group-only for a group of the server's",
        what,
        path,
        found,
        wanted,
    )
