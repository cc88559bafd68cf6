"""Static files for a renderer served from the listener itself (`serve --web-root`).

GET and HEAD only; `/` and directories serve their `index.html`. A path that leaves the
root (`..`, a symbolic link pointing out), names a hidden file or folder (a name starting
with `.`) or a link to one, has a name too long for the file system, or does not exist is
404, the same answer for each, so nothing outside the root or hidden in it can be probed.
"""

from __future__ import annotations

import asyncio
import mimetypes
from pathlib import Path
from urllib.parse import unquote

from .asgi import Receive, Scope, Send, respond

INDEX = "index.html"


class StaticFiles:
    """Serves the files under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def find(self, path: str) -> Path | None:
        """The file that URL path `path` names, or None."""
        parts = [part for part in unquote(path).split("/") if part]
        if any(_hidden(part) or "\\" in part or "\0" in part for part in parts):
            return None
        try:
            target = self.root.joinpath(*parts)
            if target.is_dir():
                target = target / INDEX
            resolved = target.resolve(strict=True)
            if not resolved.is_file() or not resolved.is_relative_to(self.root):
                return None
        except (OSError, RuntimeError, ValueError):  # a name too long, a loop of links
            return None
        if any(_hidden(part) for part in resolved.relative_to(self.root).parts):
            return None  # a link to a hidden file or into a hidden folder
        return resolved

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one GET or HEAD."""
        head = scope["method"] == "HEAD"
        found = self.find(scope["path"])
        if found is None:
            await respond(send, 404, b"not found\n", head=head)
            return
        try:
            body = await asyncio.to_thread(found.read_bytes)
        except OSError:  # removed or made unreadable since it was found
            await respond(send, 404, b"not found\n", head=head)
            return
        content_type = mimetypes.guess_type(found.name)[0] or "application/octet-stream"
        if content_type.startswith("text/") or content_type.endswith(("javascript", "json")):
            content_type += "; charset=utf-8"
        await respond(
            send,
            200,
            body,
            content_type=content_type,
            headers=[(b"cache-control", b"no-cache"), (b"x-content-type-options", b"nosniff")],
            head=head,
        )


def _hidden(name: str) -> bool:
    return name.startswith(".")
