"""The Python runner of the conformance corpus: each step through `agentskit_chat_client`.

The client returns its own types, not protobuf messages, so `to_json` writes them the way
the proto3 JSON mapping would (lowerCamelCase names, enum values as names, defaults
omitted): the same observation the TypeScript and Go runners build with their libraries.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import re
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from agentskit_chat_client import (
    ChatClient,
    ChatError,
    DisconnectMode,
    HistoryMode,
    Message,
    Session,
    ToolApproval,
    ToolCall,
    ToolCallDelta,
    ToolCallEnded,
    ToolCallStarted,
    ToolDeclaration,
    ToolResult,
    TurnCompleted,
    TurnEvent,
    TurnFailed,
    TurnTools,
    WatchHeartbeat,
    WatchItem,
)

from .harness import Scenario
from .matching import lookup, match

INVALID_TOKEN = "conformance-invalid-token"
EVENTUALLY_SECONDS = 5.0
WATCH_SECONDS = 60.0
"""The deadline of a watch step without `deadline_ms`, so a turn that never ends fails the
scenario instead of hanging it."""
_DISCONNECT = {"continue": DisconnectMode.CONTINUE, "cancel": DisconnectMode.CANCEL}
_ENUMS = {
    "kind": "TURN_KIND_",
    "role": "ROLE_",
    "operation": "OPERATION_",
    "outcome": "TURN_OUTCOME_",
    "historyMode": "HISTORY_MODE_",
    "wait": "TOOL_WAIT_",
}
_EVENT_KINDS = {
    "TurnStarted": "started",
    "TurnDecision": "decision",
    "TextDelta": "delta",
    "TurnCompleted": "completed",
    "TurnFailed": "failed",
    "ToolCallStarted": "tool_call_started",
    "ToolCallDelta": "tool_call_delta",
    "ToolCallEnded": "tool_call_ended",
    "ToolCallResult": "tool_call_result",
}


class ScenarioError(AssertionError):
    """A step whose observation does not match its expectation."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def to_json(value: Any, key: str = "") -> Any:
    """A client value as its proto3 JSON form; None for a default that JSON omits."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {}
        for field in dataclasses.fields(value):
            name = _camel(field.name)
            converted = to_json(getattr(value, field.name), name)
            if converted is not None:
                fields[name] = converted
        return fields
    if isinstance(value, tuple | list):
        items = [to_json(item) for item in value]
        return items or None
    if isinstance(value, datetime):
        return _timestamp(value)
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, str) and key in _ENUMS:
        return None if value in ("", "unspecified") else _ENUMS[key] + value.upper()
    if value in (None, "", 0, False) and not isinstance(value, float):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # every integer the client returns is an int64 or uint64 field
    return value


def _integer(args: Mapping[str, Any], name: str) -> int | None:
    """An integer argument: an int or a decimal string (a captured value); None when absent."""
    value = args.get(name)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value):
        return int(value)
    raise ScenarioError(f"{name} must be an integer, got {value!r}")


def _tools(args: Mapping[str, Any]) -> TurnTools | None:
    """The turn's `tools`, `tool_choice` and `parallel_tool_calls`; None when none is given."""
    if not {"tools", "tool_choice", "parallel_tool_calls"} & set(args):
        return None
    declarations = tuple(
        ToolDeclaration(t["name"], t.get("description", ""), t.get("parameters"))
        for t in args.get("tools", ())
    )
    return TurnTools(declarations, args.get("tool_choice", ""), args.get("parallel_tool_calls"))


def _message(fields: Mapping[str, Any]) -> Message:
    calls = tuple(
        ToolCall(c["id"], c["name"], c["arguments"]) for c in fields.get("tool_calls", ())
    )
    return Message(
        id=fields.get("id", ""),
        role=fields["role"],
        content=fields["content"],
        tool_calls=calls,
        tool_call_id=fields.get("tool_call_id"),
    )


def _approvals(fields: Mapping[str, Any]) -> list[ToolApproval]:
    return [
        ToolApproval(a["tool_call_id"], a["approved"], a.get("reason", ""))
        for a in fields.get("approvals", ())
    ]


def _timestamp(value: datetime) -> str:
    """RFC 3339 in UTC with 0, 3 or 6 fractional digits, as the proto JSON mapping writes."""
    text = value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    micros = value.microsecond
    if micros:
        text += f".{micros // 1000:03d}" if micros % 1000 == 0 else f".{micros:06d}"
    return text + "Z"


def _error(error: ChatError) -> dict[str, Any]:
    observed: dict[str, Any] = {"code": error.code.name}
    if error.reason:
        observed["reason"] = error.reason
    if error.metadata:
        observed["metadata"] = dict(error.metadata)
    if error.retry_delay is not None:
        observed["retryDelayMs"] = error.retry_delay // timedelta(milliseconds=1)
    return observed


class _Stream:
    """A turn stream's observation, built as its events arrive.

    `after`: the watch_turn's after_sequence, for `gapless`; None for other streams.
    """

    def __init__(self, after: int | None = None) -> None:
        self.observation: dict[str, Any] = {"events": [], "sequences": [], "text": ""}
        self.after = after
        self.ended = False

    def add(self, event: TurnEvent) -> None:
        kind = _EVENT_KINDS[type(event).__name__]
        self.observation["events"].append(kind)
        self.observation["sequences"].append(event.sequence)
        self.observation["lastSequence"] = event.sequence
        self.ended = isinstance(event, TurnCompleted | TurnFailed)
        if isinstance(event, ToolCallStarted | ToolCallDelta | ToolCallEnded):
            self._tool_event(event)
            return
        if kind == "delta":
            self.observation["text"] += event.text  # type: ignore[union-attr]
            return
        payload = to_json(event) or {}
        for common in ("sessionId", "turnId", "sequence", "time"):
            payload.pop(common, None)
        self.observation[kind] = payload

    def _tool_event(self, event: ToolCallStarted | ToolCallDelta | ToolCallEnded) -> None:
        """`toolCalls`: one item per started call, its deltas joined, its ended event."""
        if isinstance(event, ToolCallStarted):
            started = {"toolCallId": event.tool_call_id, "name": event.name, "arguments": ""}
            self.observation.setdefault("toolCalls", []).append(started)
            return
        calls: list[dict[str, Any]] = self.observation.get("toolCalls", [])
        call = next((c for c in calls if c["toolCallId"] == event.tool_call_id), None)
        if call is None:  # the stream starts after the call did (a watch after a sequence)
            return
        if isinstance(event, ToolCallDelta):
            call["arguments"] += event.arguments_delta
            return
        ended = to_json(event) or {}
        for common in ("sessionId", "turnId", "sequence", "time"):
            ended.pop(common, None)
        call["ended"] = ended

    def done(self) -> None:
        """The stream ended: a watch's `gapless` is decided."""
        if self.after is None:
            return
        sequences = self.observation["sequences"]
        expected = list(range(self.after + 1, self.after + 1 + len(sequences)))
        self.observation["gapless"] = bool(sequences) and sequences == expected and self.ended


class _SessionStream(_Stream):
    """A watch_session's observation: every session, the turns seen, and turn `until`."""

    def __init__(self, until: str) -> None:
        super().__init__()
        self.until = until
        self.observation.update(sessions=[], turns=[])

    def add_item(self, item: WatchItem) -> bool:
        """Record one item; True once turn `until` has ended."""
        if isinstance(item, Session):
            self.observation["sessions"].append(to_json(item) or {})
            return False
        if isinstance(item, WatchHeartbeat):
            return False
        if item.turn_id not in self.observation["turns"]:
            self.observation["turns"].append(item.turn_id)
        if item.turn_id != self.until:
            return False
        self.add(item)
        return self.ended


class Runner:
    """Runs one scenario's steps in order with one tenant's token."""

    def __init__(self, target: str, tokens: Mapping[str, str], scenario: Scenario) -> None:
        """`tokens`: the tenant's token under "", the rate-limited tenant's under "limited"."""
        self.scenario = scenario
        self.values: dict[str, str] = {}
        self._target, self._tokens = target, tokens
        self._clients: dict[str, ChatClient] = {}
        self._background: dict[str, tuple[asyncio.Task[None], _Stream, dict[str, Any]]] = {}
        self._watch_timeout = WATCH_SECONDS

    async def close(self) -> None:
        tasks = [task for task, _, _ in self._background.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in self._clients.values():
            await client.close()

    async def run(self) -> None:
        """Every step in order; ScenarioError at the first that does not match."""
        self._clients = {  # made on the running loop, which gRPC channels belong to
            "": ChatClient(self._target, token=self._tokens[""]),
            "limited": ChatClient(self._target, token=self._tokens["limited"]),
            "none": ChatClient(self._target),
            "invalid": ChatClient(self._target, token=INVALID_TOKEN),
        }
        try:
            for index, step in enumerate(self.scenario.body["steps"]):
                await self._step(index, step)
        finally:
            await self.close()

    async def _step(self, index: int, step: Mapping[str, Any]) -> None:
        (operation,) = [key for key in step if key not in _STEP_OPTIONS]
        arguments = self._substitute(step[operation])
        deadline = time.monotonic() + EVENTUALLY_SECONDS
        while True:
            observation = await self._observe(operation, arguments, step)
            problems = self._check(step, observation)
            if not problems or not step.get("eventually") or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        if problems:
            raise ScenarioError(
                f"step {index + 1} ({operation}): "
                + "; ".join(problems)
                + f"\nobserved: {observation}"
            )
        observed = observation or {}  # a background stream is captured from when it ends
        if operation == "create_session" and "as" in arguments:
            self.values[arguments["as"]] = lookup(observed, "session.sessionId")
        for name, path in (step.get("capture") or {}).items():
            try:
                self.values[name] = lookup(observed, path)
            except KeyError:
                raise ScenarioError(f"step {index + 1}: nothing at {path} to capture") from None

    def _check(self, step: Mapping[str, Any], observation: Mapping[str, Any] | None) -> list[str]:
        if observation is None:  # a background stream: checked when it ends
            return []
        expected = self._substitute(dict(step.get("expect") or {}))
        if "error" in observation and "error" not in expected:
            return [f"unexpected error {observation['error']}"]
        if "error" in expected and "error" not in observation:
            return [f"expected error {expected['error']}, but the call succeeded"]
        return match(expected, observation)

    def _substitute(self, value: Any) -> Any:
        if isinstance(value, str) and _NAME.fullmatch(value):
            if value[1:] not in self.values:
                raise ScenarioError(f"{value} was never captured")
            return self.values[value[1:]]
        if isinstance(value, Mapping):
            return {k: self._substitute(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._substitute(v) for v in value]
        return value

    async def _observe(
        self, operation: str, args: Any, step: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        client = self._clients[str(step.get("token", "") or "")]
        timeout = step["deadline_ms"] / 1000 if "deadline_ms" in step else None
        if operation == "ended":
            return await self._ended(args)
        if operation in ("await", "cancel"):
            return await self._finish(args, cancel=operation == "cancel")
        if operation == "stream_turn":
            return await self._turn(client, args, timeout, step)
        if operation == "watch_turn":
            return await self._watch_turn(client, args, timeout, step)
        if operation == "watch_session":
            return await self._watch_session(client, args, timeout, step)
        try:
            return await self._unary(client, operation, args or {}, timeout)
        except ChatError as error:
            return {"error": _error(error)}

    async def _unary(
        self, client: ChatClient, operation: str, args: Mapping[str, Any], timeout: float | None
    ) -> dict[str, Any]:
        if operation == "list_definitions":
            return {"definitions": to_json(list(await client.list_definitions(timeout=timeout)))}
        if operation == "get_definition":
            found = await client.get_definition(
                args["definition_id"], revision=_integer(args, "revision"), timeout=timeout
            )
            return {"definition": to_json(found)}
        if operation == "create_session":
            mode = (
                HistoryMode.CLIENT if args.get("history_mode") == "client" else HistoryMode.SERVER
            )
            session = await client.create_session(
                args.get("definition_id", self.scenario.body.get("definition", "")),
                session_id=args.get("session_id"),
                history_mode=mode,
                revision=_integer(args, "definition_revision"),
                timeout=timeout,
            )
            return {"session": to_json(session)}
        if operation == "get_session":
            return to_json(await client.get_session(args["session"], timeout=timeout)) or {}
        if operation == "delete_session":
            await client.delete_session(
                args["session"], expected_cursor=_integer(args, "expected_cursor"), timeout=timeout
            )
            return {}
        if operation == "truncate_history":
            history = await client.truncate_history(
                args["session"],
                args.get("last_kept_message_id"),
                expected_cursor=_integer(args, "expected_cursor"),
                timeout=timeout,
            )
            return to_json(history) or {}
        if operation == "get_turn":
            record = await client.get_turn(args["session"], args["turn_id"], timeout=timeout)
            return {"turn": to_json(record)}
        if operation == "list_turns":
            page = await client.list_turns(
                args["session"],
                page_size=_integer(args, "page_size") or 0,
                page_token=args.get("page_token"),
                timeout=timeout,
            )
            return to_json(page) or {}
        if operation == "cancel_turn":
            outcome = await client.cancel_turn(args["session"], args["turn_id"], timeout=timeout)
            return to_json(outcome) or {}
        raise ScenarioError(f"unknown operation {operation!r}")

    def _events(
        self, client: ChatClient, args: Mapping[str, Any], timeout: float | None
    ) -> AsyncIterator[TurnEvent]:
        session = args["session"]
        options: dict[str, Any] = {
            "turn_id": args.get("turn_id"),
            "expected_cursor": _integer(args, "expected_cursor"),
            "timeout": timeout,
        }
        if "on_disconnect" in args:
            if args["on_disconnect"] not in _DISCONNECT:
                raise ScenarioError(f"on_disconnect must be continue or cancel: {args!r}")
            options["on_disconnect"] = _DISCONNECT[args["on_disconnect"]]
        options["tools"] = _tools(args)
        if "submit" in args:
            submit = args["submit"]
            return client.submit(
                session, submit["content"], message_id=submit.get("message_id"), **options
            )
        if "retry" in args:
            return client.retry(session, (args["retry"] or {}).get("message_id"), **options)
        if "edit" in args:
            edit = args["edit"]
            return client.edit(session, edit["message_id"], edit["content"], **options)
        if "regenerate" in args:
            message = (args["regenerate"] or {}).get("message_id")
            return client.regenerate(session, message, **options)
        if "dispatch" in args:
            dispatch = args["dispatch"]
            messages = [_message(m) for m in dispatch["messages"]]
            approvals = _approvals(dispatch)
            return client.dispatch(session, messages, approvals, **options)
        if "tool_results" in args:
            answers = args["tool_results"] or {}
            results = [
                ToolResult(r["tool_call_id"], r["content"], r.get("message_id"))
                for r in answers.get("results", ())
            ]
            return client.tool_results(session, results, _approvals(answers), **options)
        raise ScenarioError(
            "stream_turn needs submit, retry, edit, regenerate, dispatch or tool_results"
        )

    async def _turn(
        self,
        client: ChatClient,
        args: Mapping[str, Any],
        timeout: float | None,
        step: Mapping[str, Any],
    ) -> dict[str, Any] | None:
        stream = _Stream()
        events = self._events(client, args, timeout)
        return await self._start(
            args, step, stream, lambda first: self._drain(events, stream, first)
        )

    async def _watch_turn(
        self,
        client: ChatClient,
        args: Mapping[str, Any],
        timeout: float | None,
        step: Mapping[str, Any],
    ) -> dict[str, Any] | None:
        after = _integer(args, "after_sequence") or 0
        stream = _Stream(after)
        events = client.watch_turn(
            args["session"],
            args["turn_id"],
            after,
            reattach=False,  # the corpus observes the server's stream as it is
            timeout=self._watch_timeout if timeout is None else timeout,
        )
        return await self._start(
            args, step, stream, lambda first: self._drain(events, stream, first)
        )

    async def _watch_session(
        self,
        client: ChatClient,
        args: Mapping[str, Any],
        timeout: float | None,
        step: Mapping[str, Any],
    ) -> dict[str, Any] | None:
        if not isinstance(args.get("until_turn"), str):
            raise ScenarioError("watch_session needs until_turn, a turn id")
        stream = _SessionStream(args["until_turn"])
        items = client.watch_session(
            args["session"],
            _integer(args, "after_cursor"),
            timeout=self._watch_timeout if timeout is None else timeout,
        )

        async def drain(first: asyncio.Event | None) -> None:
            try:
                async with contextlib.aclosing(items):
                    async for item in items:
                        if stream.add_item(item):
                            break
                        if first is not None and stream.observation["sessions"]:
                            first.set()
            except ChatError as error:
                stream.observation["error"] = _error(error)

        return await self._start(args, step, stream, drain)

    async def _start(
        self,
        args: Mapping[str, Any],
        step: Mapping[str, Any],
        stream: _Stream,
        drain: Callable[[asyncio.Event | None], Coroutine[Any, Any, None]],
    ) -> dict[str, Any] | None:
        """Drain a stream; a `background` one only until `drain` sets its first event."""
        if "background" not in args:
            await drain(None)
            stream.done()
            return stream.observation
        first = asyncio.Event()
        task = asyncio.create_task(drain(first))
        waiter = asyncio.create_task(first.wait())
        await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        self._background[args["background"]] = (task, stream, dict(step.get("expect") or {}))
        return None

    @staticmethod
    async def _drain(
        events: AsyncIterator[TurnEvent], stream: _Stream, first: asyncio.Event | None = None
    ) -> None:
        try:
            async with contextlib.aclosing(events):  # type: ignore[type-var]
                async for event in events:
                    stream.add(event)
                    if first is not None:
                        first.set()
        except ChatError as error:
            stream.observation["error"] = _error(error)

    async def _ended(self, name: str) -> dict[str, Any]:
        if name not in self._background:
            raise ScenarioError(f"no background stream named {name}")
        task, _, _ = self._background[name]
        await asyncio.wait({task})
        return {}

    async def _finish(self, name: str, *, cancel: bool) -> dict[str, Any]:
        task, stream, expected = self._background.pop(name)
        if cancel:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        stream.done()
        problems = self._check({"expect": expected}, stream.observation)
        if problems:
            raise ScenarioError(
                f"background {name}: " + "; ".join(problems) + f"\nobserved: {stream.observation}"
            )
        return stream.observation


_NAME = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]*")
_STEP_OPTIONS = frozenset({"expect", "capture", "token", "deadline_ms", "eventually"})
