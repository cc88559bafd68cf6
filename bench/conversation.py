"""Micro-benchmarks of the conversation core: resolve, replay, rebuild and their growth."""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentskit_chat.conversation import (
    ChatDefinition,
    ConversationState,
    DelegateOutcome,
    InputDigester,
    Message,
    Outcome,
    Role,
    Route,
    RouteOutcome,
    command_route,
    create_chat_session,
    define_chat,
    exact_route,
    initial_state,
    pattern_route,
    resolve,
    run_sync,
)

KEY = b"bench-deployment-key-0123456789"
SESSION = "bench"
STATES = 5
ROUTES = 10
HISTORY_LENGTHS = (10, 100, 1_000)
ROUTE_COUNTS = (1, 10, 100)
MISS_TEXT = "could you tell me a joke?"
RESOLVE_GOAL_US = 50.0
REPLAY_GOAL_US = 50.0
REBUILD_GOAL_US = 10_000.0


@dataclass(frozen=True, slots=True)
class Config:
    """How many timed calls one measurement makes: about `budget_ns` worth, within bounds."""

    budget_ns: int
    min_samples: int
    max_samples: int
    warmup: int


FULL = Config(budget_ns=700_000_000, min_samples=200, max_samples=20_000, warmup=50)
QUICK = Config(budget_ns=0, min_samples=5, max_samples=5, warmup=1)


@dataclass(frozen=True, slots=True)
class Result:
    """One measurement: its label and sample statistics in microseconds."""

    name: str
    samples: int
    median_us: float
    p99_us: float


def measure(name: str, call: Callable[[], object], config: Config) -> Result:
    """Time `call` one invocation per sample with perf_counter_ns; median and nearest-rank p99."""
    clock = time.perf_counter_ns
    started = clock()
    for _ in range(config.warmup):
        call()
    each = (clock() - started) // max(config.warmup, 1) or 1
    count = max(config.min_samples, min(config.max_samples, config.budget_ns // each))
    gc.collect()
    samples: list[int] = []
    for _ in range(count):
        start = clock()
        call()
        samples.append(clock() - start)
    samples.sort()
    p99 = samples[max(math.ceil(0.99 * count) - 1, 0)]
    return Result(name, count, statistics.median(samples) / 1e3, p99 / 1e3)


def _kind(index: int, count: int) -> str:
    """Routes cycle command, exact, pattern; the last one is always a pattern."""
    return "pattern" if index == count - 1 else ("command", "exact", "pattern")[index % 3]


def route_text(index: int, count: int) -> str:
    """A user input that matches route `index` (and no earlier route)."""
    kind = _kind(index, count)
    if kind == "command":
        return f"/cmd{index}"
    if kind == "exact":
        return f"  Show   ITEM {index} "
    return f"order{index} 4217"


def make_route(index: int, count: int) -> Route:
    """Route `index` of `count`, firing event `e{index}`."""
    kind, event = _kind(index, count), f"e{index}"
    if kind == "command":
        return command_route(id=f"r{index}", command=f"/cmd{index}", event=event, response="Done.")
    if kind == "exact":
        text = f"show item {index}"
        return exact_route(id=f"r{index}", text=text, event=event, response="Item ({message_id}).")
    pattern = f"order{index} (?P<number>\\d+)"
    return pattern_route(id=f"r{index}", pattern=pattern, event=event, response="Order {number}.")


def make_definition(routes: int) -> ChatDefinition:
    """A ring of STATES states; every route is eligible everywhere and moves to the next state."""
    events = [f"e{i}" for i in range(routes)]
    states = {f"s{k}": {"on": dict.fromkeys(events, f"s{(k + 1) % STATES}")} for k in range(STATES)}
    conversation = {
        "initial": "s0",
        "states": states,
        "routes": [make_route(i, routes) for i in range(routes)],
    }
    return define_chat(id=f"bench-{routes}", conversation=conversation)


def resolver(
    definition: ChatDefinition, state: ConversationState, messages: Sequence[Message]
) -> Callable[[], Outcome]:
    """A zero-argument, side-effect-free call of `resolve` (run without an event loop)."""
    digester = InputDigester(KEY)

    def call() -> Outcome:
        return run_sync(resolve(definition, state, messages, digester=digester))

    return call


def checked(
    call: Callable[[], Outcome], want: str, version: int | None = None
) -> Callable[[], Outcome]:
    """`call`, after verifying once that it yields `want` (routed, replayed or delegated)."""
    outcome = call()
    if isinstance(outcome, DelegateOutcome):
        got = "delegated"
    elif isinstance(outcome, RouteOutcome):
        got = "replayed" if outcome.replayed else "routed"
    else:
        got = "failed"
    if got != want or (version is not None and outcome.state.instance.version != version):
        raise RuntimeError(f"benchmark setup: expected {want} at version {version}, got {got}")
    return call


def user(index: int, routes: int) -> Message:
    """User message `u{index}` matching route `index % routes`."""
    return Message(f"u{index}", Role.USER, route_text(index % routes, routes))


def grow_history(
    definition: ChatDefinition, lengths: Sequence[int]
) -> dict[int, tuple[ConversationState, tuple[Message, ...]]]:
    """Committed state and user/assistant history after each of `lengths` routed turns."""
    routes = len(definition.conversation.routes)
    session = create_chat_session(definition, session_id=SESSION, digest_key=KEY)
    history: list[Message] = []
    saved: dict[int, tuple[ConversationState, tuple[Message, ...]]] = {}
    for index in range(max(lengths)):
        history.append(user(index, routes))
        outcome = session.dispatch_sync(history)
        if not isinstance(outcome, RouteOutcome) or outcome.replayed:
            raise RuntimeError("benchmark setup: every history message must route")
        history.append(Message(f"a{index}", Role.ASSISTANT, outcome.response))
        if index + 1 in lengths:
            saved[index + 1] = (session.state, tuple(history))
    return saved


def bench_single(config: Config) -> list[Result]:
    """Resolve of a new message (first route, last route, miss) and replay of a retry."""
    definition = make_definition(ROUTES)
    fresh = initial_state(definition, SESSION)
    first = (user(0, ROUTES),)
    last = (Message("u0", Role.USER, route_text(ROUTES - 1, ROUTES)),)
    miss = (Message("u0", Role.USER, MISS_TEXT),)
    decided = resolver(definition, fresh, last)().state
    calls = {
        f"resolve, {ROUTES} routes, first matches": checked(
            resolver(definition, fresh, first), "routed"
        ),
        f"resolve, {ROUTES} routes, last matches": checked(
            resolver(definition, fresh, last), "routed"
        ),
        f"resolve, {ROUTES} routes, miss (delegate)": checked(
            resolver(definition, fresh, miss), "delegated"
        ),
        "replay of a retried message": checked(resolver(definition, decided, last), "replayed"),
    }
    return [measure(name, call, config) for name, call in calls.items()]


def bench_history(config: Config) -> list[Result]:
    """Appending one message to n decisions: with checkpoints, and as a full rebuild."""
    definition = make_definition(ROUTES)
    results: list[Result] = []
    for length, (state, history) in grow_history(definition, HISTORY_LENGTHS).items():
        messages = (*history, user(length, ROUTES))
        bare = ConversationState(instance=state.instance, decisions=state.decisions)
        fast = checked(resolver(definition, state, messages), "routed", length + 1)
        full = checked(resolver(definition, bare, messages), "routed", length + 1)
        results.append(measure(f"append after {length:,} decisions (checkpoint)", fast, config))
        results.append(measure(f"full rebuild of {length:,} decisions + route", full, config))
    return results


def bench_routes(config: Config) -> list[Result]:
    """Resolve of a new message that matches the last of n routes."""
    results: list[Result] = []
    for count in ROUTE_COUNTS:
        definition = make_definition(count)
        messages = (Message("u0", Role.USER, route_text(count - 1, count)),)
        call = checked(resolver(definition, initial_state(definition, SESSION), messages), "routed")
        results.append(measure(f"resolve, last of {count} routes matches", call, config))
    return results


def print_table(title: str, results: Sequence[Result]) -> None:
    """One section of the report."""
    print(f"\n{title}")
    print(f"  {'benchmark':<46} {'samples':>8} {'median µs':>11} {'p99 µs':>11}")
    for r in results:
        print(f"  {r.name:<46} {r.samples:>8} {r.median_us:>11.1f} {r.p99_us:>11.1f}")


def verdict(label: str, median_us: float, goal_us: float) -> str:
    """`label median X µs (goal < Y µs): met|MISSED`."""
    state = "met" if median_us < goal_us else "MISSED"
    return f"{label} median {median_us:,.1f} µs (goal < {goal_us:,.0f} µs): {state}"


def print_verdicts(single: Sequence[Result], history: Sequence[Result]) -> None:
    """One line per goal; the append line checks that checkpoints beat a full rebuild."""
    worst = max(single[:3], key=lambda r: r.median_us)
    replay, fast, full = single[3], history[-2], history[-1]
    print(" ", verdict(f"resolve ({worst.name.split(', ')[-1]})", worst.median_us, RESOLVE_GOAL_US))
    print(" ", verdict("replay", replay.median_us, REPLAY_GOAL_US))
    print(" ", verdict("rebuild of 1,000 decisions", full.median_us, REBUILD_GOAL_US))
    print(" ", verdict("append after 1,000 decisions", fast.median_us, full.median_us), end="")
    print(f" [goal = full rebuild; {full.median_us / fast.median_us:.1f}x faster]")


def main(argv: Sequence[str] | None = None) -> int:
    """Run every benchmark, print the tables and one verdict per goal; always returns 0."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="few iterations (smoke run)")
    config = QUICK if parser.parse_args(argv).quick else FULL
    started = time.perf_counter()
    single, history, routes = bench_single(config), bench_history(config), bench_routes(config)
    print_table("Single dispatch", single)
    print_table("Growth with history length (one new user message)", history)
    print_table("Growth with route count", routes)
    print(f"\nVerdicts{' (--quick: too few samples to trust)' if config is QUICK else ''}:")
    print_verdicts(single, history)
    print(f"\nTotal {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
