"""The definitions a server hosts, by id."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from agentskit_chat.conversation import ChatDefinition

from ._errors import Reason, ServiceError


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
