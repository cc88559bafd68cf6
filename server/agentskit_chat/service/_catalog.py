"""The definitions a server hosts, by id and revision."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from agentskit_chat.conversation import MAX_WEIGHT, ChatDefinition, Migration, rollout_choice

from ._errors import Reason, ServiceError


class CatalogRefusedError(ValueError):
    """A replacement catalog changes a conversation without raising its revision."""

    def __init__(self, definition_ids: list[str]) -> None:
        listed = ", ".join(definition_ids)
        super().__init__(
            f"definitions {listed} change their conversation under the same revision; "
            "raise the revision to change a conversation"
        )
        self.definition_ids = definition_ids


@dataclass(frozen=True, slots=True)
class CatalogChanges:
    """How a replacement catalog differs from the one it replaces, by definition id."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    revised: tuple[str, ...] = ()
    """Other revisions served: sessions of a revision no longer served are refused from
    now on."""
    updated: tuple[str, ...] = ()
    """Same revision and conversation, other settings (such as the model): sessions go on."""

    def __str__(self) -> str:
        parts = [
            f"{name} {', '.join(ids)}"
            for name, ids in (
                ("added", self.added),
                ("removed", self.removed),
                ("revised", self.revised),
                ("updated", self.updated),
            )
            if ids
        ]
        return "; ".join(parts) or "no changes"


class Catalog:
    """Immutable set of hosted definitions, several revisions of an id side by side; each
    revision is shared by all of its sessions.

    New sessions of an id get the revision `for_new_session` picks (the `rollout` weights
    of its revisions, or the newest); a session keeps its revision until it migrates.
    """

    def __init__(self, definitions: Iterable[ChatDefinition]) -> None:
        by_id: dict[str, dict[int, ChatDefinition]] = {}
        for definition in definitions:
            revisions = by_id.setdefault(definition.id, {})
            if definition.revision in revisions:
                raise ValueError(
                    f"two definitions have the id {definition.id!r} and revision "
                    f"{definition.revision}"
                )
            revisions[definition.revision] = definition
        self._by_id: Mapping[str, tuple[ChatDefinition, ...]] = MappingProxyType(
            {
                key: tuple(revisions[r] for r in sorted(revisions))
                for key, revisions in by_id.items()
            }
        )

    def __len__(self) -> int:
        return len(self._by_id)

    def all(self) -> list[ChatDefinition]:
        """The newest revision of every definition, ordered by id."""
        return [self._by_id[key][-1] for key in sorted(self._by_id)]

    def every(self) -> list[ChatDefinition]:
        """Every served revision of every definition, ordered by id, then revision."""
        return [d for key in sorted(self._by_id) for d in self._by_id[key]]

    def revisions(self, definition_id: str) -> tuple[ChatDefinition, ...]:
        """The served revisions of `definition_id`, oldest first (empty when unknown)."""
        return self._by_id.get(definition_id, ())

    def find(self, definition_id: str, revision: int | None = None) -> ChatDefinition | None:
        """Revision `revision` of `definition_id` (the newest when None), or None."""
        revisions = self._by_id.get(definition_id, ())
        if revision is None:
            return revisions[-1] if revisions else None
        return next((d for d in revisions if d.revision == revision), None)

    def get(self, definition_id: str, revision: int | None = None) -> ChatDefinition:
        """Like `find`; NOT_FOUND when the id is unknown, REVISION_MISMATCH when the
        revision is not served."""
        if definition_id not in self._by_id:
            raise ServiceError(Reason.DEFINITION_NOT_FOUND, "no definition has this id")
        definition = self.find(definition_id, revision)
        if definition is None:
            raise ServiceError(
                Reason.REVISION_MISMATCH,
                "this revision of the definition is not served",
                definition_revision=revision or 0,
            )
        return definition

    def weights(self, definition_id: str) -> list[tuple[int, int]]:
        """(revision, weight for new sessions) of each served revision, oldest first: the
        declared `rollout` weights, and what they leave of MAX_WEIGHT for the newest
        revision that declares none (so `rollout: 20` on a new revision sends it a fifth of
        new sessions and the rest to the one before); other undeclared revisions get 0."""
        revisions = self._by_id.get(definition_id, ())
        declared = sum(d.rollout for d in revisions if d.rollout is not None)
        rest = next((d for d in reversed(revisions) if d.rollout is None), None)
        return [
            (
                d.revision,
                d.rollout
                if d.rollout is not None
                else (max(MAX_WEIGHT - declared, 0) if d is rest else 0),
            )
            for d in revisions
        ]

    def for_new_session(self, definition_id: str, session_id: str) -> ChatDefinition:
        """The revision a new session `session_id` of `definition_id` gets (NOT_FOUND when
        the id is unknown): the same for the same id on every replica."""
        newest = self.get(definition_id)
        chosen = rollout_choice(session_id, self.weights(definition_id), newest.revision)
        return self.get(definition_id, chosen)

    def migration_for(
        self, definition: ChatDefinition, session_id: str
    ) -> tuple[ChatDefinition, Migration] | None:
        """Where a session of `definition` moves at its next turn: the revision a new
        session with its id would get, when that is another revision and it declares a
        migration from `definition`'s; None when the session stays (always when this
        catalog does not host the id: its sessions run on revisions other processes
        publish)."""
        if definition.id not in self._by_id:
            return None
        target = self.for_new_session(definition.id, session_id)
        if target.revision == definition.revision:
            return None
        migration = target.migrations.get(definition.revision)
        return None if migration is None else (target, migration)

    def changes_to(self, new: Catalog) -> CatalogChanges:
        """What replacing this catalog by `new` changes; raises CatalogRefusedError.

        A conversation may only change together with its revision: sessions of a revision
        replay their decisions through that revision's statechart.
        """
        old_ids, new_ids = set(self._by_id), set(new._by_id)
        revised, updated, refused = [], [], []
        for definition_id in sorted(old_ids & new_ids):
            before = {d.revision: d for d in self._by_id[definition_id]}
            after = {d.revision: d for d in new._by_id[definition_id]}
            if any(before[r].conversation != after[r].conversation for r in before.keys() & after):
                refused.append(definition_id)
            elif before.keys() != after.keys():
                revised.append(definition_id)
            elif before != after:
                updated.append(definition_id)
        if refused:
            raise CatalogRefusedError(refused)
        return CatalogChanges(
            added=tuple(sorted(new_ids - old_ids)),
            removed=tuple(sorted(old_ids - new_ids)),
            revised=tuple(revised),
            updated=tuple(updated),
        )
