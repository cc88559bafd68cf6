"""A session moves to a newer revision at its next turn, when the revision new sessions
with its id get declares a migration from its own and its decisions replay there.

The move is a stored change of its own (the cursor goes up by one) made before the turn
claims the session, so the turn runs on the new revision from its start; a write lost to
another writer is the CONFLICT a lost claim is. A session that cannot move stays, and
says why in its record (written once per reason, not at every turn).
"""

from __future__ import annotations

from agentskit_chat.conversation import (
    ChatDefinition,
    MigrationBlock,
    MigrationRefusedError,
    SessionRecord,
)

from ._errors import Reason, ServiceError
from ._loaded import Loaded
from ._observer import MigrationReport
from ._records import Records


async def migrate_at_turn(
    records: Records, loaded: Loaded
) -> tuple[Loaded, MigrationReport | None]:
    """`loaded` on the revision it should be on for this turn, and what was tried (None
    when nothing was). Call only for a turn about to claim an unleased session."""
    record = loaded.record
    step = records.catalog.migration_for(loaded.definition, record.session_id)
    if step is None:
        return loaded, None
    target, migration = step
    source = loaded.definition.revision
    try:
        moved = record.migrated(target, migration)
    except MigrationRefusedError as refused:
        report = MigrationReport(source, target.revision, "stayed", refused.code)
        block = MigrationBlock(target.revision, refused.code)
        if record.blocked == block:
            return loaded, report
        return await _saved(records, loaded, record.evolve(blocked=block), None), report
    saved = await _saved(records, loaded, moved, target)
    return saved, MigrationReport(source, target.revision, "migrated")


async def _saved(
    records: Records, loaded: Loaded, record: SessionRecord, target: ChatDefinition | None
) -> Loaded:
    saved = await records.save(loaded, record, definition=target)
    if saved is None:
        raise ServiceError(Reason.CONFLICT, "another writer changed the session; retry")
    return saved
