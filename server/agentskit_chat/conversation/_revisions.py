"""Revisions of one chat served side by side.

A definition file may declare, besides its conversation:

- `rollout: W`, a weight (0-100) of the revision among the served revisions of its id:
  new sessions are split in proportion to the weights, by a stable hash of the session id
  (so every replica, before or after a restart, gives a session the same revision). The
  newest revision that declares no weight gets what the declared ones leave of 100.
- `migrations`, each naming an older revision (`from`) and how its sessions move to this
  one: `states` maps old state names to new ones and `routes` old route ids to new ones
  (`null`: the route is gone, and so are its decisions); names not listed stay as they
  are. A session moves at its next turn, and only when its retained decisions, mapped,
  replay through this revision's statechart; otherwise it stays on its revision.

Everything here is pure: the service decides when to migrate and stores the result.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Final

from ._decisions import Decision
from ._definition import ChatDefinition, ConversationSpec
from ._errors import ConversationError, Diagnostic, ErrorCode, ReplayError
from ._migration import Migration

MAX_WEIGHT: Final = 100
"""The largest `rollout` weight."""


class MigrationRefusedError(ConversationError):
    """A session cannot move to the newer revision; it stays where it is. `code` is
    stable: `unknown_route` (a decision's route has no counterpart), `unknown_state` (a
    state maps to a state the newer revision lacks) or `replay` (the mapped decisions do
    not replay through the newer statechart)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def migration_issues(
    migrations: Mapping[int, Migration], spec: ConversationSpec, revision: object
) -> Iterator[tuple[ErrorCode, str, str]]:
    """(code, path, message) for each migration that names an older revision that is not
    older, or maps to a state or route this revision does not declare. What it maps from
    is checked against the older revision when both are loaded (`revision_issues`)."""
    routes = {route.id for route in spec.routes}
    for index, (source, migration) in enumerate(migrations.items()):
        path = f"migrations[{index}]"
        if isinstance(revision, int) and source >= revision:
            yield (
                ErrorCode.INVALID_MIGRATION,
                f"{path}.from",
                "a migration is from an older revision",
            )
        for old, new in migration.states.items():
            if new not in spec.states:
                yield (
                    ErrorCode.INVALID_MIGRATION,
                    f"{path}.states.{old}",
                    f"{new!r} is not a state of this revision",
                )
        for old, new_id in migration.routes.items():
            if new_id is not None and new_id not in routes:
                yield (
                    ErrorCode.INVALID_MIGRATION,
                    f"{path}.routes.{old}",
                    f"{new_id!r} is not a route of this revision",
                )


def revision_issues(
    older: ChatDefinition, newer: ChatDefinition
) -> Iterator[tuple[ErrorCode, str, str]]:
    """(code, path, message) for what `newer`'s migration from `older` maps from that
    `older` does not declare."""
    sources = list(newer.migrations)
    if older.revision not in newer.migrations:
        return
    index = sources.index(older.revision)
    migration = newer.migrations[older.revision]
    path = f"migrations[{index}]"
    for old in migration.states:
        if old not in older.conversation.states:
            yield (
                ErrorCode.INVALID_MIGRATION,
                f"{path}.states.{old}",
                f"{old!r} is not a state of revision {older.revision}",
            )
    routes = {route.id for route in older.conversation.routes}
    for old in migration.routes:
        if old not in routes:
            yield (
                ErrorCode.INVALID_MIGRATION,
                f"{path}.routes.{old}",
                f"{old!r} is not a route of revision {older.revision}",
            )


def served_together(definitions: Iterable[ChatDefinition]) -> list[Diagnostic]:
    """What keeps `definitions` from being served side by side: two of one id with one
    revision, and migrations mapping from what the older revision they name does not
    declare (when that revision is among them)."""
    problems: list[Diagnostic] = []
    seen: dict[tuple[str, int], ChatDefinition] = {}
    for definition in definitions:
        key = (definition.id, definition.revision)
        if key in seen:
            problems.append(
                Diagnostic(
                    ErrorCode.DUPLICATE_DEFINITION,
                    definition.source,
                    "revision",
                    f"definition {definition.id!r} revision {definition.revision} is also "
                    f"defined in {seen[key].source}",
                )
            )
            continue
        seen[key] = definition
    for (definition_id, _), newer in seen.items():
        for source in newer.migrations:
            older = seen.get((definition_id, source))
            if older is not None:
                problems.extend(
                    Diagnostic(code, newer.source, path, message)
                    for code, path, message in revision_issues(older, newer)
                )
    return problems


def migrated_decisions(
    decisions: Sequence[Decision], target: ChatDefinition, migration: Migration
) -> list[Decision]:
    """`decisions` as the newer revision `target` names them; a gone route's decisions are
    left out. Raises MigrationRefusedError for a route or state `target` lacks."""
    routes = target.compiled.routes_by_id
    states = target.conversation.states
    moved: list[Decision] = []
    for decision in decisions:
        new_id = migration.route(decision.route_id)
        if new_id is None:
            continue
        route = routes.get(new_id)
        if route is None:
            raise MigrationRefusedError(
                "unknown_route", "a decision's route has no counterpart in the newer revision"
            )
        from_state, to_state = (
            migration.state(decision.from_state),
            migration.state(decision.to_state),
        )
        if from_state not in states or to_state not in states:
            raise MigrationRefusedError(
                "unknown_state", "a decision's state has no counterpart in the newer revision"
            )
        moved.append(
            replace(
                decision,
                route_id=new_id,
                event=route.event,
                kind=route.kind,
                from_state=from_state,
                to_state=to_state,
            )
        )
    return moved


def check_replay(error: ReplayError) -> MigrationRefusedError:
    """The refusal of a migration whose mapped decisions do not replay."""
    return MigrationRefusedError("replay", f"the mapped decisions do not replay: {error}")


def rollout_choice(session_id: str, weighted: Sequence[tuple[int, int]], newest: int) -> int:
    """The revision a new session `session_id` gets among `weighted` (revision, weight)
    pairs: by a stable hash of the id, in proportion to the weights; `newest` when no
    weight is above zero."""
    total = sum(weight for _, weight in weighted if weight > 0)
    if total == 0:
        return newest
    digest = hashlib.sha256(b"agentskit-chat rollout\x00" + session_id.encode()).digest()
    point = int.from_bytes(digest[:8], "big") % total
    for revision, weight in sorted(weighted):
        if weight <= 0:
            continue
        if point < weight:
            return revision
        point -= weight
    return newest  # not reached: the points cover the total
