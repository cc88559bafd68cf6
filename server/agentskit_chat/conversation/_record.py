"""The persisted session envelope `agentskit.chat.session`, decoded strictly or not at all.

A record holds application metadata only: identifiers, the cursor, the current state, the
decision log (input digests, never inputs), the active-turn lease and recent terminal
turns. Decoding replays every decision through the definition's statechart; a record that
does not replay is rejected whole.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Final, Generic, TypeVar

from ._decisions import ConversationState, Decision
from ._definition import ChatDefinition
from ._engine import initial_state
from ._errors import (
    DefinitionMismatchError,
    ForeignRecordError,
    MalformedRecordError,
    ReplayError,
    SealedResponseError,
    UnsupportedVersionError,
)
from ._migration import Migration
from ._revisions import MigrationRefusedError, check_replay, migrated_decisions
from ._rounds import RecordedRounds, open_rounds, seal_rounds
from ._sealing import ResponseSealer
from ._statechart import Accepted, StatechartInstance, transition
from ._types import ROUTE_KINDS, TurnKind

RECORD_FORMAT: Final = "agentskit.chat.session"
RECORD_VERSION: Final = 5
BLOCKED_VERSION: Final = 6
"""The version of a record that says why it stayed on its revision (`SessionRecord.blocked`);
records without that note are still written as version 5, which every replica reads."""
RUNNING_VERSION: Final = 7
"""The version of a record whose lease names a server tool call in flight, or whose recent
turns name calls whose outcome is unknown (an interrupted turn); its `migration` note is
optional. Records without either are written as before."""
READABLE_VERSIONS: Final = frozenset({1, 2, 3, 4, 5, 6, 7})
"""Version 1 records lack the turn timing, failure and usage fields of version 2; version 2
records lack the message count of version 3; version 3 records lack whether a terminal turn
streamed a decision (read as: completed turns did, failed ones did not); version 4 records
lack the tool calls a completed turn waits on (a turn that waits on none has no such key);
version 6 records add `migration`, why the session stayed on its revision."""
MAX_RECENT_TURNS: Final = 64
OPERATIONS: Final = frozenset({"submit", "retry", "edit", "regenerate", "dispatch", "tool_results"})
TOOL_WAITS: Final = frozenset({"result", "approval"})
TERMINAL_OUTCOMES: Final = frozenset({"completed", "failed"})

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Lease:
    """The active turn's claim on the session; it lapses at `expires_at_ms`."""

    turn_id: str
    holder: str
    """Replica or process that runs the turn."""
    expires_at_ms: int
    operation: str | None = None
    """What the turn runs; None in version 1 records."""
    started_at_ms: int | None = None
    user_message_id: str | None = None
    running: tuple[PendingCall, ...] = ()
    """Server tool calls the turn runs now (written before each call starts): when the
    process dies, their outcome is unknown."""
    rounds: RecordedRounds | None = None
    """The server tool rounds the turn completed before `running` (kept sealed): when the
    process dies, the interrupted turn's record keeps them for a retry."""


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A tool call a completed turn's answer waits on: by id and tool name, never content."""

    call_id: str
    name: str
    wait: str = "result"
    """`result` (the client runs the tool) or `approval` (a person decides first)."""


@dataclass(frozen=True, slots=True)
class TerminalTurn:
    """How a finished turn ended, kept so a repeated turn id is never executed twice."""

    turn_id: str
    operation: str
    outcome: str
    finished_at_ms: int
    kind: str | None = None
    route_id: str | None = None
    user_message_id: str | None = None
    assistant_message_id: str | None = None
    error_code: str | None = None
    from_state: str | None = None
    to_state: str | None = None
    replayed: bool = False
    started_at_ms: int | None = None
    """None in version 1 records."""
    error_message: str | None = None
    """The safe message the failed turn's stream ended with; None when not recorded."""
    retryable: bool | None = None
    """Whether the failure was retryable; None when not recorded."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    decided: bool = False
    """The turn streamed a decision (kind, route, from and to state, replayed) before it
    ended, so a repeated turn id streams it again. A completed turn always did; a failed
    one did when it failed after resolving (an agentic turn whose model call failed)."""
    pending: tuple[PendingCall, ...] = ()
    """The tool calls a completed turn's answer waits on; the next turn answers them."""
    unknown: tuple[PendingCall, ...] = ()
    """Server tool calls a failed turn was running when it stopped (its process died, or
    its deadline passed): they may or may not have had their effect."""
    rounds: RecordedRounds | None = None
    """The server tool rounds a failed agentic turn completed (kept sealed, on the newest
    turn only): a retry of the same request resumes after them."""


@dataclass(frozen=True, slots=True)
class MigrationBlock:
    """Why a session stayed on its revision although a newer one declared a migration."""

    revision: int
    """The revision it did not move to."""
    code: str
    """`unknown_route`, `unknown_state` or `replay` (see `MigrationRefusedError`)."""


class _Keep:
    """Marks a field `SessionRecord.evolve` leaves as it is."""


KEEP: Final = _Keep()


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """Everything persisted about a session; never any message text."""

    session_id: str
    definition_id: str
    revision: int
    conversation: ConversationState
    cursor: int = 0
    """Increases by one on every save; stores compare-and-set on it."""
    lease: Lease | None = None
    recent_turns: tuple[TerminalTurn, ...] = ()
    messages: int | None = None
    """How many messages the server holds for the session, so a history that lost rows is
    noticed; None for client-held history and for records written before version 3."""
    blocked: MigrationBlock | None = None
    """Why the session did not move to a newer revision at its last try; None once it did,
    or when none was tried."""

    @property
    def state(self) -> str:
        """Current conversation state."""
        return self.conversation.state

    @classmethod
    def new(cls, definition: ChatDefinition, session_id: str) -> SessionRecord:
        """The record of a session that has not run a turn."""
        return cls(
            session_id=session_id,
            definition_id=definition.id,
            revision=definition.revision,
            conversation=initial_state(definition, session_id),
        )

    def with_turn(self, turn: TerminalTurn) -> SessionRecord:
        """This record with `turn` appended, keeping the newest MAX_RECENT_TURNS."""
        earlier = tuple(
            replace(t, rounds=None) if t.rounds is not None else t for t in self.recent_turns
        )  # only the newest turn keeps its rounds: a retry follows the failure it resumes
        kept = (*earlier, turn)[-MAX_RECENT_TURNS:]
        return self.evolve(recent_turns=kept)

    def evolve(
        self,
        *,
        conversation: ConversationState | None = None,
        cursor: int | None = None,
        lease: Lease | _Keep | None = KEEP,
        recent_turns: tuple[TerminalTurn, ...] | None = None,
        messages: int | _Keep | None = KEEP,
        blocked: MigrationBlock | _Keep | None = KEEP,
    ) -> SessionRecord:
        """A copy with the given fields changed (cheaper than `dataclasses.replace`)."""
        return SessionRecord(
            self.session_id,
            self.definition_id,
            self.revision,
            self.conversation if conversation is None else conversation,
            self.cursor if cursor is None else cursor,
            self.lease if isinstance(lease, _Keep) else lease,
            self.recent_turns if recent_turns is None else recent_turns,
            self.messages if isinstance(messages, _Keep) else messages,
            self.blocked if isinstance(blocked, _Keep) else blocked,
        )

    def find_turn(self, turn_id: str) -> TerminalTurn | None:
        """The recorded terminal turn with `turn_id`, if still retained."""
        return next((t for t in self.recent_turns if t.turn_id == turn_id), None)

    def migrated(self, target: ChatDefinition, migration: Migration) -> SessionRecord:
        """This session as a session of the newer revision `target`, its decisions mapped by
        `migration` and replayed through `target`'s statechart from the initial state;
        raises MigrationRefusedError (the record stays as it is). The cursor is unchanged:
        storing the result is the change."""
        decisions = migrated_decisions(
            tuple(self.conversation.decisions.values()), target, migration
        )
        state = migration.state(self.state)
        if state not in target.conversation.states:
            raise MigrationRefusedError(
                "unknown_state", "the session's state has no counterpart in the newer revision"
            )
        try:
            conversation = _replay(target, self.session_id, decisions, state)
        except ReplayError as error:
            raise check_replay(error) from None
        return SessionRecord(
            self.session_id,
            target.id,
            target.revision,
            conversation,
            self.cursor,
            self.lease,
            self.recent_turns,
            self.messages,
        )

    def last_answer(self) -> TerminalTurn | None:
        """The newest retained completed turn: the session's last answer (failed turns
        commit nothing, so they do not replace it)."""
        return next((t for t in reversed(self.recent_turns) if t.outcome == "completed"), None)


def encode_session_record(record: SessionRecord, sealer: ResponseSealer | None = None) -> bytes:
    """Serialize `record` as compact UTF-8 JSON; `sealer` seals responses made by code."""
    return RecordEncoder(sealer).encode(record)


class RecordEncoder:
    """Encodes successive records of one session, reusing the JSON of unchanged entries.

    Records of a session share their decisions and terminal turns (they are immutable), so
    a save after a turn only encodes what the turn added. The output is byte-identical to
    `encode_session_record` with the same sealer.
    """

    def __init__(self, sealer: ResponseSealer | None = None) -> None:
        self._sealer = sealer
        self._session_id = ""
        self._decisions = _EncodedRun(self._encode_decision)
        self._turns = _EncodedRun(self._encode_turn)
        self._head: tuple[tuple[str, str, int, int], str] | None = None

    def encode(self, record: SessionRecord) -> bytes:
        """Serialize `record` as compact UTF-8 JSON."""
        if record.conversation.instance.id != record.session_id:
            raise ValueError("the conversation state belongs to another session")
        self._session_id = record.session_id
        lease = "null" if record.lease is None else _dumps(self._encode_lease(record.lease))
        text = "".join(
            (
                self._prefix(record),
                str(record.cursor),
                ',"state":',
                _dumps(record.state),
                ',"decisions":[',
                self._decisions.text(tuple(record.conversation.decisions.values())),
                '],"lease":',
                lease,
                ',"recent_turns":[',
                self._turns.text(record.recent_turns),
                '],"messages":',
                "null" if record.messages is None else str(record.messages),
                "" if record.blocked is None else ',"migration":' + _dumps(_block(record.blocked)),
                "}",
            )
        )
        return text.encode("utf-8")

    def _prefix(self, record: SessionRecord) -> str:
        """The record's opening up to the cursor value, which never changes in a session."""
        version = _version_of(record, sealed=self._sealer is not None)
        key = (record.session_id, record.definition_id, record.revision, version)
        if self._head is None or self._head[0] != key:
            head = {
                "format": RECORD_FORMAT,
                "version": version,
                "session_id": record.session_id,
                "definition": {"id": record.definition_id, "revision": record.revision},
                "cursor": 0,
            }
            self._head = key, _dumps(head)[: -len("0}")]
        return self._head[1]

    def _encode_lease(self, lease: Lease) -> dict[str, Any]:
        encoded = _encode_lease(lease)
        if lease.rounds is not None and lease.running and self._sealer is not None:
            encoded["rounds"] = seal_rounds(
                lease.rounds, self._sealer, session_id=self._session_id, turn_id=lease.turn_id
            )
        return encoded

    def _encode_turn(self, t: TerminalTurn) -> dict[str, Any]:
        encoded = _encode_turn(t)
        if t.rounds is not None and self._sealer is not None:  # else not kept (see _rounds)
            encoded["rounds"] = seal_rounds(
                t.rounds, self._sealer, session_id=self._session_id, turn_id=t.turn_id
            )
        return encoded

    def _encode_decision(self, d: Decision) -> dict[str, Any]:
        response: str | dict[str, str] | None = None
        if not d.derived:
            response = d.response
            if self._sealer is not None:
                sealed = self._sealer.seal(
                    d.response, session_id=self._session_id, message_id=d.message_id
                )
                response = {"sealed": sealed}
        return {
            "message_id": d.message_id,
            "input_digest": d.input_digest,
            "route_id": d.route_id,
            "kind": str(d.kind),
            "event": d.event,
            "from_state": d.from_state,
            "to_state": d.to_state,
            "response": response,
        }


class _EncodedRun(Generic[T]):
    """The JSON of a run of immutable entries that grows at the end and may drop its head."""

    def __init__(self, encode: Callable[[T], dict[str, Any]]) -> None:
        self._encode = encode
        self._items: tuple[T, ...] = ()
        self._fragments: list[str] = []

    def text(self, items: tuple[T, ...]) -> str:
        """Entries of `items` as comma-separated JSON objects."""
        known = self._items
        for dropped in (0, 1):  # appended to, or slid by one entry
            kept = known[dropped:]
            if kept and len(items) >= len(kept) and all(map(operator.is_, items, kept)):
                fragments = self._fragments[dropped:]
                fragments += [_dumps(self._encode(item)) for item in items[len(kept) :]]
                break
        else:
            fragments = [_dumps(self._encode(item)) for item in items]
        self._items, self._fragments = items, fragments
        return ",".join(fragments)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _version_of(record: SessionRecord, *, sealed: bool) -> int:
    """The oldest version that holds everything `record` says (rounds only when `sealed`:
    they are not kept otherwise)."""
    running = record.lease is not None and bool(record.lease.running)
    rounds = sealed and any(t.rounds is not None for t in record.recent_turns)
    if running or rounds or any(t.unknown for t in record.recent_turns):
        return RUNNING_VERSION
    return RECORD_VERSION if record.blocked is None else BLOCKED_VERSION


def _calls(calls: tuple[PendingCall, ...]) -> list[list[str]]:
    return [[call.call_id, call.name] for call in calls]


def _block(block: MigrationBlock) -> dict[str, Any]:
    return {"revision": block.revision, "code": block.code}


def _encode_lease(lease: Lease) -> dict[str, Any]:
    encoded: dict[str, Any] = {
        "turn_id": lease.turn_id,
        "holder": lease.holder,
        "expires_at_ms": lease.expires_at_ms,
        "operation": lease.operation,
        "started_at_ms": lease.started_at_ms,
        "user_message_id": lease.user_message_id,
    }
    if lease.running:
        encoded["running"] = _calls(lease.running)
    return encoded


def _encode_turn(t: TerminalTurn) -> dict[str, Any]:
    encoded = {
        "turn_id": t.turn_id,
        "operation": t.operation,
        "outcome": t.outcome,
        "finished_at_ms": t.finished_at_ms,
        "kind": t.kind,
        "route_id": t.route_id,
        "user_message_id": t.user_message_id,
        "assistant_message_id": t.assistant_message_id,
        "error_code": t.error_code,
        "from_state": t.from_state,
        "to_state": t.to_state,
        "replayed": t.replayed,
        "started_at_ms": t.started_at_ms,
        "error_message": t.error_message,
        "retryable": t.retryable,
        "input_tokens": t.input_tokens,
        "output_tokens": t.output_tokens,
        "decided": t.decided,
    }
    if t.pending:
        encoded["tool_calls"] = [[p.call_id, p.name, p.wait] for p in t.pending]
    if t.unknown:
        encoded["unknown_calls"] = _calls(t.unknown)
    return encoded


def decode_session_record(
    data: bytes | str,
    *,
    definition: ChatDefinition,
    session_id: str,
    sealer: ResponseSealer | None = None,
) -> SessionRecord:
    """Decode and verify a record for `session_id` of `definition`; raises SessionRecordError.

    Sealed responses open with `sealer`; a record holding one cannot be read without it.
    """
    body = _Fields(_parse(data), "")
    if body.raw.get("format") != RECORD_FORMAT:
        raise UnsupportedVersionError("not an agentskit.chat.session record")
    version = body.raw.get("version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise UnsupportedVersionError("unsupported session record version")
    body.expect_keys(
        "format",
        "version",
        "session_id",
        "definition",
        "cursor",
        "state",
        "decisions",
        "lease",
        "recent_turns",
        *(("messages",) if version >= 3 else ()),
        *(("migration",) if version == 6 or (version >= 7 and "migration" in body.raw) else ()),
    )
    if body.text("session_id") != session_id:
        raise ForeignRecordError("the record belongs to another session")
    ident = body.object("definition")
    ident.expect_keys("id", "revision")
    if ident.text("id") != definition.id or ident.integer("revision", 1) != definition.revision:
        raise DefinitionMismatchError(
            "the record was written for another definition id or revision"
        )
    cursor = body.integer("cursor", 0)
    state = body.text("state")
    decisions = body.items("decisions", lambda f: _decode_decision(f, sealer, session_id))
    lease_raw = body.raw["lease"]
    lease = (
        None
        if lease_raw is None
        else _decode_lease(body.object("lease"), version, sealer, session_id)
    )
    turns = body.items("recent_turns", lambda f: _decode_turn(f, version, sealer, session_id))
    if len(turns) > MAX_RECENT_TURNS:
        raise MalformedRecordError(f"recent_turns holds more than {MAX_RECENT_TURNS} turns")
    messages = body.optional_integer("messages") if version >= 3 else None
    blocked = None
    if version == 6 or (version >= 7 and "migration" in body.raw):
        note = body.object("migration")
        note.expect_keys("revision", "code")
        blocked = MigrationBlock(note.integer("revision", 1), note.text("code"))
    conversation = _replay(definition, session_id, decisions, state)
    return SessionRecord(
        session_id=session_id,
        definition_id=definition.id,
        revision=definition.revision,
        conversation=conversation,
        cursor=cursor,
        lease=lease,
        recent_turns=tuple(turns),
        messages=messages,
        blocked=blocked,
    )


def _parse(data: bytes | str) -> Any:
    try:
        return json.loads(data, object_pairs_hook=_unique_keys)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedRecordError("the record is not valid JSON") from exc


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise MalformedRecordError("the record repeats a key")
    return result


def _replay(
    definition: ChatDefinition, session_id: str, decisions: list[Decision], state: str
) -> ConversationState:
    chart = definition.compiled.chart
    routes = definition.compiled.routes_by_id
    instance: StatechartInstance = initial_state(definition, session_id).instance
    log: dict[str, Decision] = {}
    for index, decision in enumerate(decisions):
        where = f"decisions[{index}]"
        route = routes.get(decision.route_id)
        if route is None or route.event != decision.event:
            raise ReplayError(f"{where} names a route or event the definition does not declare")
        if decision.kind != route.kind:
            raise ReplayError(f"{where} has another kind than its route declares")
        if decision.derived != route.derives_response:
            raise ReplayError(f"{where} stores a response its route does not produce that way")
        if decision.message_id in log:
            raise ReplayError(f"{where} repeats a message id")
        if decision.from_state != instance.state:
            raise ReplayError(f"{where} starts from a state the replay did not reach")
        moved = transition(chart, instance, decision.event)
        if not isinstance(moved, Accepted) or moved.to_state != decision.to_state:
            raise ReplayError(f"{where} is not a transition the statechart accepts")
        instance = moved.instance
        log[decision.message_id] = decision
    if instance.state != state:
        raise ReplayError("the stored state is not the state the decisions replay to")
    return ConversationState(instance=instance, decisions=MappingProxyType(log))


class _Fields:
    """Typed, path-aware access to one JSON object of the record."""

    def __init__(self, raw: Any, path: str) -> None:
        if not isinstance(raw, dict):
            raise MalformedRecordError(f"{path or 'the record'} must be an object")
        self.raw: dict[str, Any] = raw
        self.path = path

    def _where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def expect_keys(self, *keys: str) -> None:
        if set(self.raw) != set(keys):
            unknown = len(set(self.raw) - set(keys))
            missing = sorted(set(keys) - set(self.raw))  # our own names, safe to show
            raise MalformedRecordError(
                f"{self.path or 'record'}: {unknown} unknown keys, missing keys {missing}"
            )

    def text(self, key: str, *, empty: bool = False) -> str:
        value = self.raw.get(key)
        if not isinstance(value, str) or (not empty and not value):
            raise MalformedRecordError(f"{self._where(key)} must be a non-empty string")
        return value

    def optional_text(self, key: str) -> str | None:
        return None if self.raw.get(key) is None else self.text(key)

    def optional_integer(self, key: str) -> int | None:
        return None if self.raw.get(key) is None else self.integer(key, 0)

    def optional_boolean(self, key: str) -> bool | None:
        value = self.raw.get(key)
        if value is not None and not isinstance(value, bool):
            raise MalformedRecordError(f"{self._where(key)} must be a boolean or null")
        return value

    def integer(self, key: str, minimum: int) -> int:
        value = self.raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise MalformedRecordError(f"{self._where(key)} must be an integer >= {minimum}")
        return value

    def object(self, key: str) -> _Fields:
        return _Fields(self.raw.get(key), self._where(key))

    def items(self, key: str, decode: Callable[[_Fields], T]) -> list[T]:
        value = self.raw.get(key)
        if not isinstance(value, list):
            raise MalformedRecordError(f"{self._where(key)} must be a list")
        return [decode(_Fields(item, f"{self._where(key)}[{i}]")) for i, item in enumerate(value)]

    def choice(self, key: str, allowed: frozenset[str]) -> str:
        value = self.text(key)
        if value not in allowed:
            raise MalformedRecordError(f"{self._where(key)} has an unknown value")
        return value


def _decode_decision(f: _Fields, sealer: ResponseSealer | None, session_id: str) -> Decision:
    f.expect_keys(
        "message_id",
        "input_digest",
        "route_id",
        "kind",
        "event",
        "from_state",
        "to_state",
        "response",
    )
    return Decision(
        message_id=f.text("message_id"),
        input_digest=f.text("input_digest"),
        route_id=f.text("route_id"),
        kind=TurnKind(f.choice("kind", frozenset(map(str, ROUTE_KINDS)))),
        event=f.text("event"),
        from_state=f.text("from_state"),
        to_state=f.text("to_state"),
        response=_decode_response(f, sealer, session_id),
        derived=f.raw.get("response") is None,
    )


def _decode_response(f: _Fields, sealer: ResponseSealer | None, session_id: str) -> str:
    raw = f.raw.get("response")
    if raw is None:
        return ""
    if not isinstance(raw, dict):
        return f.text("response", empty=True)
    sealed = f.object("response")
    sealed.expect_keys("sealed")
    if sealer is None:
        raise SealedResponseError("the record holds sealed responses and no key was given")
    return sealer.open(
        sealed.text("sealed"), session_id=session_id, message_id=f.text("message_id")
    )


_LEASE_KEYS: Final = ("turn_id", "holder", "expires_at_ms")
_LEASE_KEYS_V2: Final = ("operation", "started_at_ms", "user_message_id")
_TURN_KEYS_V2: Final = (
    "started_at_ms",
    "error_message",
    "retryable",
    "input_tokens",
    "output_tokens",
)
_TURN_KEYS_V4: Final = ("decided",)


def _decode_lease(
    f: _Fields, version: int, sealer: ResponseSealer | None, session_id: str
) -> Lease:
    running = version >= 7 and "running" in f.raw
    rounds = running and "rounds" in f.raw  # rounds come with the calls they precede
    f.expect_keys(
        *_LEASE_KEYS,
        *(_LEASE_KEYS_V2 if version >= 2 else ()),
        *(("running",) if running else ()),
        *(("rounds",) if rounds else ()),
    )
    operation = f.raw.get("operation")
    if operation is not None:
        f.choice("operation", OPERATIONS)
    return Lease(
        f.text("turn_id"),
        f.text("holder"),
        f.integer("expires_at_ms", 0),
        operation=operation,
        started_at_ms=f.optional_integer("started_at_ms"),
        user_message_id=f.optional_text("user_message_id"),
        running=_decode_calls(f, "running") if running else (),
        rounds=open_rounds(
            f.raw["rounds"],
            sealer,
            session_id=session_id,
            turn_id=f.text("turn_id"),
            where=f"{f.path}.rounds",
        )
        if rounds
        else None,
    )


def _decode_turn(
    f: _Fields, version: int, sealer: ResponseSealer | None, session_id: str
) -> TerminalTurn:
    tools = version >= 5 and "tool_calls" in f.raw
    unknown = version >= 7 and "unknown_calls" in f.raw
    rounds = version >= 7 and "rounds" in f.raw
    f.expect_keys(
        *(("unknown_calls",) if unknown else ()),
        *(("rounds",) if rounds else ()),
        *(_TURN_KEYS_V2 if version >= 2 else ()),
        *(_TURN_KEYS_V4 if version >= 4 else ()),
        *(("tool_calls",) if tools else ()),
        "turn_id",
        "operation",
        "outcome",
        "finished_at_ms",
        "kind",
        "route_id",
        "user_message_id",
        "assistant_message_id",
        "error_code",
        "from_state",
        "to_state",
        "replayed",
    )
    kind = f.optional_text("kind")
    replayed = f.raw.get("replayed")
    if not isinstance(replayed, bool):
        raise MalformedRecordError(f"{f.path}.replayed must be a boolean")
    if kind is not None and kind not in set(map(str, TurnKind)):
        raise MalformedRecordError(f"{f.path}.kind has an unknown value")
    outcome = f.choice("outcome", TERMINAL_OUTCOMES)
    decided = outcome == "completed"
    if version >= 4:
        stored = f.raw.get("decided")
        if not isinstance(stored, bool):
            raise MalformedRecordError(f"{f.path}.decided must be a boolean")
        decided = stored
    return TerminalTurn(
        turn_id=f.text("turn_id"),
        operation=f.choice("operation", OPERATIONS),
        outcome=outcome,
        finished_at_ms=f.integer("finished_at_ms", 0),
        kind=kind,
        route_id=f.optional_text("route_id"),
        user_message_id=f.optional_text("user_message_id"),
        assistant_message_id=f.optional_text("assistant_message_id"),
        error_code=f.optional_text("error_code"),
        from_state=f.optional_text("from_state"),
        to_state=f.optional_text("to_state"),
        replayed=replayed,
        started_at_ms=f.optional_integer("started_at_ms"),
        error_message=f.optional_text("error_message"),
        retryable=f.optional_boolean("retryable"),
        input_tokens=f.optional_integer("input_tokens"),
        output_tokens=f.optional_integer("output_tokens"),
        decided=decided,
        pending=_decode_pending(f) if tools else (),
        unknown=_decode_calls(f, "unknown_calls") if unknown else (),
        rounds=open_rounds(
            f.raw["rounds"],
            sealer,
            session_id=session_id,
            turn_id=f.text("turn_id"),
            where=f"{f.path}.rounds",
        )
        if rounds
        else None,
    )


def _decode_calls(f: _Fields, key: str) -> tuple[PendingCall, ...]:
    """Server tool calls as `[call id, tool name]` pairs (a non-empty list, ids unique)."""
    raw = f.raw[key]
    where = f"{f.path}.{key}"
    if not isinstance(raw, list) or not raw:
        raise MalformedRecordError(f"{where} must be a non-empty list")
    calls: list[PendingCall] = []
    for index, item in enumerate(raw):
        if not (
            isinstance(item, list)
            and len(item) == 2
            and all(isinstance(part, str) and part for part in item)
        ):
            raise MalformedRecordError(f"{where}[{index}] must be [call id, tool name]")
        calls.append(PendingCall(item[0], item[1], "server"))
    if len({call.call_id for call in calls}) != len(calls):
        raise MalformedRecordError(f"{where} repeats a call id")
    return tuple(calls)


def _decode_pending(f: _Fields) -> tuple[PendingCall, ...]:
    raw = f.raw["tool_calls"]
    where = f"{f.path}.tool_calls"
    if not isinstance(raw, list) or not raw:
        raise MalformedRecordError(f"{where} must be a non-empty list")
    calls: list[PendingCall] = []
    for index, item in enumerate(raw):
        valid = (
            isinstance(item, list)
            and len(item) == 3
            and all(isinstance(part, str) and part for part in item)
            and item[2] in TOOL_WAITS
        )
        if not valid:
            raise MalformedRecordError(f"{where}[{index}] must be [call id, tool name, wait]")
        calls.append(PendingCall(item[0], item[1], item[2]))
    if len({call.call_id for call in calls}) != len(calls):
        raise MalformedRecordError(f"{where} repeats a call id")
    return tuple(calls)
