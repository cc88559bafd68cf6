"""Agentic turns: the model's answer, and the rounds of server tools it calls.

A turn that goes to the model asks it (`_ask`), streaming its text and tool calls. While
the answer calls server tools the service runs (a definition's `server_tools`, through the
`ServerToolPort`), the service runs them, in order, and asks the model again with the
answer and the results: a round, up to `max_tool_rounds` rounds. Calls of tools the client
runs, or that wait for approval, end the turn waiting for them; the server tools' results
of the same answer are stored after it. An approved server call in a later turn is run
here too, and the model goes on with its result.

When a turn fails after server tool rounds completed, its record keeps them; a retry of the
same request resumes after them (`_resume`) instead of running their calls again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import replace
from functools import partial

from agentskit_chat.conversation import (
    DelegateOutcome,
    Message,
    PendingCall,
    Role,
    ToolCall,
    TurnKind,
    rounds_digest,
)
from agentskit_chat.models import (
    AdapterRegistry,
    FinishChunk,
    ModelError,
    ModelRequest,
    TextChunk,
    ToolCallDeltaChunk,
    ToolCallStartChunk,
    ToolOptions,
    UsageChunk,
)

from ._answer import Answer, handed_back, sum_usage
from ._limits import Limits, utf8_size
from ._resume import error_of, recorded, resumable, resume
from ._server_tools import ServerToolPort
from ._terminal import DEADLINE_EXCEEDED, OUTPUT_LIMIT, TOOL_LIMIT, TOOL_ROUNDS, finish_reason_of
from ._tool_calls import ToolCalls
from ._turn_writes import Turn, TurnWrites
from ._types import (
    Completed,
    Decided,
    Delta,
    Failed,
    ToolRan,
    TurnEvent,
    Usage,
)


class Agentic:
    """Runs the model's part of a claimed turn, with its server tool rounds."""

    def __init__(
        self,
        adapters: AdapterRegistry,
        limits: Limits,
        writes: TurnWrites,
        server_tools: ServerToolPort | None,
        digest: Callable[[str], str],
    ) -> None:
        self._digest = digest
        """The keyed digest that names a request's rounds (see `rounds_digest`)."""
        self._adapters = adapters
        self._limits = limits
        self._writes = writes
        self._server_tools = server_tools

    async def run_approved(
        self, turn: Turn, outcome: DelegateOutcome
    ) -> AsyncGenerator[TurnEvent, None]:
        """Approved calls without results: the service runs the server tools' ones; the
        others go back to the client (`_wait_again`). When none is left for the client,
        the model goes on with the results."""
        tools = turn.plan.tools
        assert tools is not None
        port = self._server_tools
        served = frozenset(turn.claimed.definition.server_tools) if port is not None else ()
        runs = tuple(c for c in tools.calls if c.name in served)
        if not runs:
            async for event in self._wait_again(turn, outcome):
                yield event
            return
        assert port is not None
        state = outcome.state.state
        decided = Decided(str(TurnKind.AGENTIC), None, state, state, False)
        yield decided
        results: list[Message] = []
        errors: list[tuple[str, str]] = []
        of = rounds_digest(self._digest, outcome.messages)
        failed = resumable(turn.claimed.record, of)
        if failed is None:
            turn.rounds = recorded(of, (), ())  # a call in flight when it stops is named
            flow = self._run_calls(turn, decided, runs, "approved", results)
        else:  # a retry: the approved calls that ran, or may have, do not run again
            run = partial(self._run_calls, turn, decided)
            flow = resume(turn, failed, of, results, errors, run, runs)
        async with aclosing(flow) as ran:
            async for event in ran:
                yield event
                if isinstance(event, Failed):
                    return
                if isinstance(event, ToolRan) and failed is None:
                    errors += error_of(event)
                    turn.rounds = recorded(of, tuple(results), tuple(errors))
        left = tuple(p for p in tools.waiting if p.name not in served)
        if left:  # the client's calls still wait: the server's results are stored after
            handed = tuple(c for c in tools.calls if c.name not in served)
            async with aclosing(
                self._wait_again(turn, outcome, decided, tuple(results), left, handed)
            ) as events:
                async for event in events:
                    yield event
            return
        delegated = self.delegate(turn, outcome, tuple(results), decided, of, tuple(errors))
        async with aclosing(delegated) as events:
            async for event in events:
                yield event

    async def _run_calls(
        self,
        turn: Turn,
        decided: Decided,
        calls: tuple[ToolCall, ...],
        label: str,
        results: list[Message],
    ) -> AsyncGenerator[TurnEvent, None]:
        """Run server tool `calls` in order: a ToolRan event each, its tool message added
        to `results` (ids from the answer's and `label`); the failed event, recorded, when
        the turn's deadline passes first."""
        port = self._server_tools
        assert port is not None
        for index, call in enumerate(calls):
            marked_calls = (PendingCall(call.id, call.name, "server"),)
            marked = await self._writes.mark_running(turn, marked_calls)
            if marked is not None:  # the call is not run: nothing of the turn is committed
                yield marked
                return
            try:
                async with asyncio.timeout_at(turn.deadline):
                    ran = await port.call(
                        call.name,
                        call.arguments,
                        turn_id=turn.request.turn_id,
                        call_id=call.id,
                        definition=turn.claimed.definition,
                    )
            except TimeoutError:  # the call was cancelled while it ran: its outcome is unknown
                yield await self._writes.fail(
                    turn, DEADLINE_EXCEEDED, None, decided=decided, unknown=marked_calls
                )
                return
            result_id = f"{turn.answer_id}.{label}.{index}"
            results.append(Message(result_id, Role.TOOL, ran.text, tool_call_id=call.id))
            yield ToolRan(call.id, ran.text, ran.error_type, result_id)

    async def _wait_again(
        self,
        turn: Turn,
        outcome: DelegateOutcome,
        decided: Decided | None = None,
        after: tuple[Message, ...] = (),
        waiting: tuple[PendingCall, ...] | None = None,
        calls: tuple[ToolCall, ...] | None = None,
    ) -> AsyncGenerator[TurnEvent, None]:
        """Approved calls without results go back to the client: the denied results (and
        the results `after` of server tools this turn ran) are stored and the turn
        completes waiting, without asking the model. `decided`: the decision, when it was
        sent already; `waiting` and `calls`: the calls going back (all, by default)."""
        tools = turn.plan.tools
        assert tools is not None
        waiting = tools.waiting if waiting is None else waiting
        state = outcome.state.state
        sent = decided is not None
        decided = decided or Decided(str(TurnKind.AGENTIC), None, state, state, False)
        saved = await self._writes.commit(turn, outcome, decided, None, None, waiting, after=after)
        if isinstance(saved, Failed):
            yield saved
            return
        if not sent:
            yield decided
        for event in handed_back(tools.calls if calls is None else calls):
            yield event
        yield Completed(
            tools.answer_id,
            "",
            outcome.snapshot,
            saved.cursor,
            None,
            finish_reason_of(waiting),
            tools.calls,
            waiting,
        )

    async def delegate(
        self,
        turn: Turn,
        outcome: DelegateOutcome,
        ran: tuple[Message, ...] = (),
        decided: Decided | None = None,
        of: str | None = None,
        ran_errors: tuple[tuple[str, str], ...] = (),
    ) -> AsyncGenerator[TurnEvent, None]:
        """Ask the model; while its answer calls server tools the service runs, run them
        and ask again with their results (a round), up to `max_tool_rounds` rounds. `ran`:
        results of approved server calls this turn ran first (`decided` already sent), `of`
        the request's digest and `ran_errors` their error types; without them, a retry of
        a failed attempt at the same request resumes after its recorded rounds."""
        if decided is None:
            state = outcome.state.state
            decided = Decided(str(TurnKind.AGENTIC), None, state, state, False)
            yield decided
        definition = turn.claimed.definition
        port = self._server_tools
        served = frozenset(definition.server_tools) if port is not None else frozenset()
        options = turn.request.tools
        if port is not None and served:
            options = replace(options, tools=(*options.tools, *port.specs(definition)))
        rounds: list[Message] = list(ran)
        errors: list[tuple[str, str]] = list(ran_errors)
        failed = None
        if of is None:  # approved calls did not run first (they resumed, when they could)
            of = rounds_digest(self._digest, outcome.messages)
            failed = resumable(turn.claimed.record, of)
        if failed is not None:  # a retry: the recorded rounds stand
            run = partial(self._run_calls, turn, decided)
            async with aclosing(resume(turn, failed, of, rounds, errors, run)) as done:
                async for event in done:
                    yield event
                    if isinstance(event, Failed):
                        return
        usage: Usage | None = None
        for number in range(self._limits.max_tool_rounds + 1):
            answer = Answer(ToolCalls(self._limits, definition.approvals, served))
            messages = (*outcome.messages, *rounds)
            async with aclosing(self._ask(turn, decided, messages, options, answer)) as events:
                async for event in events:
                    yield event
            if answer.failed is not None:
                yield answer.failed
                return
            usage = sum_usage(usage, answer.usage)
            runs = answer.calls.served()
            if not runs:
                break
            if number == self._limits.max_tool_rounds:
                yield await self._writes.fail(turn, TOOL_ROUNDS, None, decided=decided)
                return
            assert port is not None
            waiting = bool(answer.calls.pending())  # the client's calls of the same answer
            said = Message(
                turn.answer_id if waiting else f"{turn.answer_id}.{number}",
                Role.ASSISTANT,
                answer.text,
                answer.made,
            )
            results: list[Message] = []
            if not waiting:  # a process that stops from here on leaves the answer recorded
                turn.rounds = recorded(of, (*rounds, said), tuple(errors))
            label = str(number)
            async with aclosing(self._run_calls(turn, decided, runs, label, results)) as calls:
                async for event in calls:
                    yield event
                    if isinstance(event, Failed):
                        return
                    if isinstance(event, ToolRan) and not waiting:  # a round in progress
                        errors += error_of(event)
                        turn.rounds = recorded(of, (*rounds, said, *results), tuple(errors))
            if waiting:  # the answer is this one; the turn then waits for the client's calls
                async for event in self._complete(
                    turn, outcome, decided, said, usage, answer, tuple(rounds), tuple(results)
                ):
                    yield event
                return
            rounds += [said, *results]
            turn.rounds = recorded(of, tuple(rounds), tuple(errors))
        final = Message(turn.answer_id, Role.ASSISTANT, answer.text, answer.made)
        async for event in self._complete(
            turn, outcome, decided, final, usage, answer, tuple(rounds), ()
        ):
            yield event

    async def _complete(
        self,
        turn: Turn,
        outcome: DelegateOutcome,
        decided: Decided,
        final: Message,
        usage: Usage | None,
        answer: Answer,
        before: tuple[Message, ...],
        after: tuple[Message, ...],
    ) -> AsyncGenerator[TurnEvent, None]:
        """Commit the answer `final` with the rounds `before` it and the server tools'
        results `after` it; its Completed event, or the failure."""
        pending = answer.calls.pending()
        saved = await self._writes.commit(
            turn, outcome, decided, final, usage, pending, before=before, after=after
        )
        if isinstance(saved, Failed):
            yield saved
            return
        finish = finish_reason_of(pending) if pending else answer.finish
        yield Completed(
            final.id,
            final.content,
            outcome.snapshot,
            saved.cursor,
            usage,
            finish,
            answer.made,
            pending,
        )

    async def _ask(
        self,
        turn: Turn,
        decided: Decided,
        messages: tuple[Message, ...],
        options: ToolOptions,
        answer: Answer,
    ) -> AsyncGenerator[TurnEvent, None]:
        """One model call: its events as they come, and the answer gathered in `answer`
        (`answer.failed` set, after recording the failure, when it fails)."""
        definition = turn.claimed.definition
        adapter = self._adapters.adapter(definition.model)
        request = ModelRequest(
            definition.id,
            turn.request.session_id,
            messages,
            definition.model,
            turn.request.sampling,
            options,
        )
        size = 0
        model = definition.model.get("model")
        call = turn.progress.model_started(adapter, model if isinstance(model, str) else None)
        async with aclosing(adapter.stream(request)) as chunks:
            while True:
                try:
                    async with asyncio.timeout_at(turn.deadline):
                        chunk = await anext(chunks, None)
                except TimeoutError:
                    call.end(DEADLINE_EXCEEDED)
                    answer.failed = await self._writes.fail(
                        turn, DEADLINE_EXCEEDED, None, decided=decided
                    )
                    return
                except ModelError as exc:
                    call.end(exc.code)
                    answer.failed = await self._writes.fail(
                        turn, exc.code, None, exc, decided=decided
                    )
                    return
                if chunk is None:
                    call.end()
                    break
                call.saw(chunk)
                if isinstance(chunk, TextChunk):
                    size += utf8_size(chunk.text)
                    if size > self._limits.max_output_bytes:  # Leaving closes the stream.
                        call.end(OUTPUT_LIMIT)
                        answer.failed = await self._writes.fail(
                            turn, OUTPUT_LIMIT, None, decided=decided
                        )
                        return
                    answer.parts.append(chunk.text)
                    yield Delta(chunk.text)
                elif isinstance(chunk, ToolCallStartChunk | ToolCallDeltaChunk):
                    event = answer.calls.add(chunk)
                    if event is None:  # Leaving closes the stream.
                        call.end(TOOL_LIMIT)
                        answer.failed = await self._writes.fail(
                            turn, TOOL_LIMIT, None, decided=decided
                        )
                        return
                    yield event
                elif isinstance(chunk, UsageChunk):
                    answer.usage = Usage(chunk.input_tokens, chunk.output_tokens)
                elif isinstance(chunk, FinishChunk):
                    answer.finish = chunk.reason
        answer.made = answer.calls.made()
        for ended in answer.calls.ended():
            yield ended
