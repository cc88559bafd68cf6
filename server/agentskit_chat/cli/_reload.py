"""Reloading a running server's definitions (SIGHUP) without resetting its sessions."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from agentskit_chat.conversation import ConfigError
from agentskit_chat.mcp import ServerToolsError
from agentskit_chat.models import AdapterRegistry
from agentskit_chat.service import Catalog, CatalogChanges, ChatService

from ._definitions import gather_files
from ._server_tools import ServedTools

log = logging.getLogger("agentskit_chat.reload")

CODE_SOURCE = "<code>"
"""The `source` of a definition made in Python rather than read from a file."""


class Reloader:
    """Reads the definition files again and swaps the catalog; one reload at a time.

    Chats defined in Python modules are kept as they are: modules are not imported again,
    and calling their factories again would make new, unequal callables. When the server
    tools' declarations change, the new servers are connected (and their tools checked)
    before the swap, and the old connections closed after it.
    """

    def __init__(
        self,
        service: ChatService,
        directory: Path | None,
        adapters: AdapterRegistry,
        tools: ServedTools | None = None,
    ) -> None:
        self._service = service
        self._tools = tools
        self._directory = directory
        self._adapters = adapters
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[CatalogChanges | None]] = set()

    def request(self) -> None:
        """Start a reload (a signal handler's job); it runs after any reload in progress."""
        task = asyncio.ensure_future(self.reload())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def reload(self) -> CatalogChanges | None:
        """Serve the files' definitions from now on; None when refused (the old ones stay).

        Files are read and compiled on a worker thread; the swap itself happens at once,
        on the event loop, so turns see either the old or the new catalog.
        """
        async with self._lock:
            kept = [d for d in self._service.catalog.all() if d.source == CODE_SOURCE]
            try:
                found = await asyncio.to_thread(gather_files, self._directory, kept, self._adapters)
                fresh = None if self._tools is None else await self._tools.prepare(found)
                try:
                    changes = self._service.replace_definitions(Catalog(found))
                except BaseException:
                    if fresh is not None:
                        await fresh.close()
                    raise
                if fresh is not None and self._tools is not None:
                    await self._tools.adopt(fresh)
            except ServerToolsError as exc:
                log.error("reload refused, previous definitions keep serving: %s", exc)
                return None
            except ConfigError as exc:
                log.error("reload refused, previous definitions keep serving:\n%s", exc)
                return None
            except ValueError as exc:
                log.error("reload refused, previous definitions keep serving: %s", exc)
                return None
            except Exception as exc:  # Never leave the server without definitions.
                log.error(
                    "reload refused, previous definitions keep serving: %s",
                    type(exc).__name__,
                )
                return None
        log.warning("definitions reloaded: %s", changes)
        return changes
