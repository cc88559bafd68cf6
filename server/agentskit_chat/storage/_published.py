"""Storage port for published definitions: the revisions each process serves, readable by
every process of the deployment.

A process publishes the documents of the definitions it serves (canonical JSON text, as
read from their files) under its own publisher name, each row with an expiry it renews
while it serves them. Another process that meets a session of a revision it does not
serve itself reads the document back and serves the session with it: during a rolling
update every replica can then serve every revision some replica still serves. A revision
no unexpired row names counts as retired.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class PublishedDefinition:
    """One revision of one definition, as a process publishes it."""

    definition_id: str
    revision: int
    document: str = field(repr=False)
    """Canonical JSON text of the definition file's content."""


@dataclass(frozen=True, slots=True)
class FoundDefinition:
    """A published document and the latest expiry among its publishers' rows."""

    document: str = field(repr=False)
    expires_at_ms: int


class DefinitionStore(Protocol):
    """Where processes publish the definitions they serve."""

    async def publish_definitions(
        self,
        publisher: str,
        definitions: Sequence[PublishedDefinition],
        *,
        expires_at_ms: int,
        now_ms: int,
    ) -> None:
        """Make `definitions` the publisher's rows, each expiring at `expires_at_ms` (an
        empty sequence withdraws them all), and drop every row expired at `now_ms`."""
        ...

    async def published_definition(
        self, definition_id: str, revision: int, *, now_ms: int
    ) -> FoundDefinition | None:
        """The document of a revision some publisher serves (the row expiring last when
        several do), or None when no row unexpired at `now_ms` names it."""
        ...


def check_published(definitions: Sequence[PublishedDefinition]) -> None:
    """ValueError for two rows of one revision or a revision below 1."""
    keys = {(d.definition_id, d.revision) for d in definitions}
    if len(keys) != len(definitions):
        raise ValueError("a publisher publishes each revision once")
    if any(d.revision < 1 for d in definitions):
        raise ValueError("revisions start at 1")
