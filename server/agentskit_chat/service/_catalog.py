"""The definitions a server hosts, by id."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from agentskit_chat.conversation import ChatDefinition

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
    """A new revision: stored sessions of the old one are refused from now on."""
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
    """Immutable set of hosted definitions; each is shared by all of its sessions."""

    def __init__(self, definitions: Iterable[ChatDefinition]) -> None:
        by_id: dict[str, ChatDefinition] = {}
        for definition in definitions:
            if definition.id in by_id:
                raise ValueError(f"two definitions have the id {definition.id!r}")
            by_id[definition.id] = definition
        self._by_id: Mapping[str, ChatDefinition] = MappingProxyType(by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def all(self) -> list[ChatDefinition]:
        """Every definition, ordered by id."""
        return [self._by_id[key] for key in sorted(self._by_id)]

    def find(self, definition_id: str) -> ChatDefinition | None:
        """The definition with `definition_id`, or None."""
        return self._by_id.get(definition_id)

    def get(self, definition_id: str) -> ChatDefinition:
        """The definition with `definition_id`; NOT_FOUND when none."""
        definition = self._by_id.get(definition_id)
        if definition is None:
            raise ServiceError(Reason.DEFINITION_NOT_FOUND, "no definition has this id")
        return definition

    def changes_to(self, new: Catalog) -> CatalogChanges:
        """What replacing this catalog by `new` changes; raises CatalogRefusedError.

        A conversation may only change together with its revision: sessions of a revision
        replay their decisions through that revision's statechart.
        """
        old_ids, new_ids = set(self._by_id), set(new._by_id)
        revised, updated, refused = [], [], []
        for definition_id in sorted(old_ids & new_ids):
            before, after = self._by_id[definition_id], new._by_id[definition_id]
            if before.revision != after.revision:
                revised.append(definition_id)
            elif before.conversation != after.conversation:
                refused.append(definition_id)
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
