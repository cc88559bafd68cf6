"""Giving a turn's lease back, retried in the background while the store fails.

A turn that ends without committing (its client went away, or its closing write failed)
gives its lease back so the session is free at once. When the store refuses that write (it
is locked or unreachable for a moment), waiting for the lease to lapse would leave the
session busy for the whole lease after the store is back; so the release is tried again,
with a growing pause, until it lands, another writer has changed the session, or the lease
has lapsed and there is nothing left to give back.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from ._errors import Reason, ServiceError
from ._records import Loaded, Records, now_ms

log = logging.getLogger(__name__)

FIRST_PAUSE: Final = 0.05
"""Seconds before the first retry; each further pause doubles, up to LONGEST_PAUSE."""
LONGEST_PAUSE: Final = 1.0


class Releases:
    """Writes lease releases, retrying the ones the store refused in background tasks."""

    def __init__(
        self,
        records: Records,
        *,
        first_pause: float = FIRST_PAUSE,
        longest_pause: float = LONGEST_PAUSE,
    ) -> None:
        self._records = records
        self._first_pause = first_pause
        self._longest_pause = longest_pause
        self._retrying: set[asyncio.Task[None]] = set()

    @property
    def retrying(self) -> int:
        """Releases the store refused that are still being retried."""
        return len(self._retrying)

    async def release(self, claimed: Loaded) -> None:
        """Give back the lease `claimed` holds; once, then in the background if the store
        refused it."""
        if await self._attempt(claimed):
            return
        task = asyncio.ensure_future(self._retry(claimed))
        self._retrying.add(task)
        task.add_done_callback(self._retrying.discard)

    async def wait(self) -> None:
        """Return once no release is being retried (cancel it to stop waiting)."""
        while self._retrying:
            await asyncio.wait(set(self._retrying))

    async def close(self) -> None:
        """Stop retrying; the leases still held lapse on their own."""
        retrying = set(self._retrying)
        if retrying:
            log.warning("%d leases were not released; they lapse on their own", len(retrying))
        for task in retrying:
            task.cancel()
        await asyncio.gather(*retrying, return_exceptions=True)

    async def _attempt(self, claimed: Loaded) -> bool:
        """Write the release; True when nothing is left to do (released, or the session
        changed or went away meanwhile), False when the store was unavailable."""
        try:
            await self._records.save(claimed, claimed.record.evolve(lease=None))
        except ServiceError as error:
            return error.reason is not Reason.STORE_UNAVAILABLE
        return True

    async def _retry(self, claimed: Loaded) -> None:
        lease = claimed.record.lease
        lapses_at_ms = 0 if lease is None else lease.expires_at_ms
        pause = self._first_pause
        while now_ms() + pause * 1000 < lapses_at_ms:
            await asyncio.sleep(pause)
            if await self._attempt(claimed):
                log.info("a lease the store refused to release was released on a retry")
                return
            pause = min(pause * 2, self._longest_pause)
        log.warning("a lease could not be released before it lapsed")
