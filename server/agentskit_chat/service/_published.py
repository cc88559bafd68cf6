"""Revisions served by other processes: each process publishes the definitions it serves
in the store, and serves a session of a revision it does not host itself from what another
process published.

During a rolling update, replicas with the old files and replicas with the new ones serve
the same sessions. A session created on a new revision and then routed to an old replica,
or a session of an old revision routed to a new replica that dropped it, is served with
the published document of its revision, as long as some process still publishes it. A
process renews its rows every third of the lease and withdraws them when it closes; a
revision no unexpired row names is retired, and its sessions are refused as before.

Only definitions read from files are published: a chat defined in Python has no document.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from agentskit_chat.conversation import ChatDefinition, ConfigError, definition_of_document
from agentskit_chat.models import AdapterRegistry, UnknownAdapterError
from agentskit_chat.storage import (
    DefinitionStore,
    PublishedDefinition,
    StoreCorruptError,
    StoreUnavailableError,
)

from ._catalog import Catalog
from ._errors import Reason, ServiceError
from ._server_tools import ServerToolPort

log = logging.getLogger("agentskit_chat.revisions")

PUBLISH_LEASE_SECONDS: Final = 60.0
"""How long published revisions count as served without a renewal."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class _Known:
    definition: ChatDefinition
    valid_until_ms: int


def published_rows(catalog: Catalog) -> list[PublishedDefinition]:
    """What a process serving `catalog` publishes: every revision read from a file."""
    return [
        PublishedDefinition(d.id, d.revision, d.document)
        for d in catalog.every()
        if d.document is not None
    ]


class PublishedRevisions:
    """This process's published rows, and the other processes' revisions it has read."""

    def __init__(
        self,
        store: DefinitionStore,
        publisher: str,
        adapters: AdapterRegistry,
        *,
        lease: float = PUBLISH_LEASE_SECONDS,
        server_tools: ServerToolPort | None = None,
    ) -> None:
        """`server_tools` connects the MCP servers of the revisions read (see `fetch`)."""
        if lease <= 0:
            raise ValueError("the publication lease must be positive")
        self._store = store
        self._publisher = publisher
        self._adapters = adapters
        self._server_tools = server_tools
        self._lease_ms = int(lease * 1000)
        self._known: dict[tuple[str, int], _Known] = {}
        self._renewer: asyncio.Task[None] | None = None
        self._renew = asyncio.Event()

    def cached(self, definition_id: str, revision: int) -> ChatDefinition | None:
        """A revision of another process read lately and still published, or None."""
        known = self._known.get((definition_id, revision))
        if known is None or known.valid_until_ms <= _now_ms():
            return None
        return known.definition

    async def fetch(self, definition_id: str, revision: int) -> ChatDefinition | None:
        """Revision `revision` of `definition_id` as another process publishes it now (read
        from the store each time), or None when none does. STORE_UNAVAILABLE when the
        store fails; REVISION_MISMATCH when the published document does not load in this
        process (another adapter, a damaged row). The servers of its server tools are
        connected through the server tools port, when it has any and they are not
        connected yet (on demand, so that its tools run here as where it is served)."""
        key = (definition_id, revision)
        now = _now_ms()
        known = self._known.get(key)
        try:
            found = await self._store.published_definition(definition_id, revision, now_ms=now)
        except StoreUnavailableError:
            raise ServiceError(
                Reason.STORE_UNAVAILABLE, "the session store is unavailable; retry later"
            ) from None
        except StoreCorruptError:
            found = None
            log.warning("a published definition cannot be read back: ignored")
        if found is None:
            self._known.pop(key, None)
            return None
        if known is not None and known.definition.document == found.document:
            definition = known.definition  # the same object: decoded records stay cached
        else:
            definition = self._load(definition_id, revision, found.document)
        self._known[key] = _Known(definition, found.expires_at_ms)
        if self._server_tools is not None and definition.server_tools:
            await self._server_tools.attach(definition)
        return definition

    def _load(self, definition_id: str, revision: int, document: str) -> ChatDefinition:
        source = f"<published {definition_id} revision {revision}>"
        try:
            definition = definition_of_document(document, source=source)
            self._adapters.check(definition.model)
        except (ConfigError, UnknownAdapterError) as exc:
            codes = (
                sorted({d.code for d in exc.diagnostics}) if isinstance(exc, ConfigError) else []
            )
            log.warning(
                "the published definition %s revision %d does not load here: %s",
                definition_id,
                revision,
                ", ".join(str(c) for c in codes) or type(exc).__name__,
            )
            definition = None
        if definition is None or (definition.id, definition.revision) != (definition_id, revision):
            raise ServiceError(
                Reason.REVISION_MISMATCH,
                "the published definition of the session's revision does not load here",
                definition_revision=revision,
            )
        return definition

    async def publish(self, catalog: Catalog) -> None:
        """Publish `catalog`'s revisions until a lease from now (replacing this process's
        earlier rows); raises the store's errors."""
        now = _now_ms()
        rows = published_rows(catalog)
        await self._store.publish_definitions(
            self._publisher, rows, expires_at_ms=now + self._lease_ms, now_ms=now
        )

    async def start(self, catalog: Callable[[], Catalog]) -> None:
        """Publish what `catalog()` serves, then renew it every third of the lease (and
        soon after `renew`). Once; a store failure is logged, and the renewals go on."""
        if self._renewer is None:
            await self._publish_logged(catalog())
            self._renewer = asyncio.get_running_loop().create_task(self._keep(catalog))

    def renew(self) -> None:
        """Publish again soon (the served definitions changed)."""
        self._renew.set()

    async def _keep(self, catalog: Callable[[], Catalog]) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._renew.wait(), self._lease_ms / 3000)
            self._renew.clear()
            await self._publish_logged(catalog())

    async def _publish_logged(self, catalog: Catalog) -> None:
        try:
            await self.publish(catalog)
        except (StoreUnavailableError, StoreCorruptError) as exc:
            log.warning("publishing the served revisions failed: %s", type(exc).__name__)

    async def close(self) -> None:
        """Stop renewing and withdraw this process's rows (when it published any)."""
        if self._renewer is None:
            return
        self._renewer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._renewer
        self._renewer = None
        now = _now_ms()
        try:
            await self._store.publish_definitions(
                self._publisher, [], expires_at_ms=now, now_ms=now
            )
        except (StoreUnavailableError, StoreCorruptError) as exc:
            log.warning("withdrawing the served revisions failed: %s", type(exc).__name__)
