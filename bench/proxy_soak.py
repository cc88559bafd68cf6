"""The proxy soak: continued turns through nginx while replicas and the proxy are disrupted.

Debian's nginx runs deploy/nginx/nginx.conf (only its ports and files changed, and
`worker_shutdown_timeout` 1 s so a reload cuts streams at once) in front of three
`serve` replicas on one throwaway PostgreSQL cluster (bench/_postgres.py). Clients run
agentic turns against the fake model (40 chunks 50 ms apart by default) one after the
other, each continued on disconnect and followed by the Python client's automatic
reattach. Every `--period` seconds one disruption, in turn: an nginx reload (every stream
is cut after 1 s), a replica restarted with SIGTERM (it drains), and every third replica
restart a SIGKILL (its turns end `interrupted` once their lease lapses, and run again).

At the end every client's runs are checked against the stored histories as the proxy
test checks them (tests/deploy/load.py `problems`), and the figures are printed:
the time from a reattach's WatchTurn being sent to its first event (the first one the
client missed), over every reattach whose first event was not a turn's failure, and the
time from a kill to a killed turn's `interrupted` event.

    python -m bench.proxy_soak [--quick] [--clients N] [--seconds S] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from agentskit_chat.fakemodel import FakeModelServer
from tests.deploy.load import LoadClient, Reattach, histories, percentile, problems
from tests.deploy.nginx import Call, Nginx
from tests.deploy.replicas import (
    DEFINITION,
    Replicas,
    migrate,
    slow_reply,
    write_definitions,
)

from ._postgres import cluster

REPLICAS: Final = 3
SERVE_FLAGS: Final = ("--turn-timeout", "8", "--lease-ttl", "9")
PROXY_SETTINGS: Final = {"worker_shutdown_timeout": "1s"}
STOP_TIMEOUT: Final = 120.0


@dataclass(frozen=True, slots=True)
class Config:
    """Clients, seconds of disruptions, the model's pace and the pause between disruptions."""

    clients: int = 16
    seconds: float = 120.0
    chunks: int = 40
    delay: float = 0.05
    period: float = 3.0


FULL: Final = Config()
QUICK: Final = Config(clients=8, seconds=20.0)


@dataclass(slots=True)
class Disruptions:
    """What was done to the replicas and the proxy, and when (time.time())."""

    reloads: list[float] = field(default_factory=list)
    drains: list[tuple[float, int]] = field(default_factory=list)
    kills: list[tuple[float, int]] = field(default_factory=list)


async def disrupt(
    replicas: Replicas, proxy: Nginx, config: Config, done: Disruptions, stop: asyncio.Event
) -> None:
    """One disruption every `config.period` seconds until `config.seconds` have passed."""
    deadline = time.monotonic() + config.seconds
    step = 0
    while time.monotonic() < deadline:
        await asyncio.sleep(config.period)
        if step % 2 == 0:
            done.reloads.append(time.time())
            proxy.reload()
        else:
            restart = step // 2
            replica = restart % REPLICAS
            if restart % 3 == 2:
                done.kills.append((time.time(), replica))
                await asyncio.to_thread(replicas.restart, replica, signal.SIGKILL)
            else:
                done.drains.append((time.time(), replica))
                status = await asyncio.to_thread(replicas.restart, replica, signal.SIGTERM)
                if status != 0:
                    raise RuntimeError(f"replica {replica} exited with {status} on SIGTERM")
        step += 1
    stop.set()


async def drive(target: str, replicas: Replicas, proxy: Nginx, config: Config) -> Any:
    clients = [LoadClient(n, target) for n in range(config.clients)]
    stop = asyncio.Event()
    done = Disruptions()
    loads = [asyncio.ensure_future(c.run(DEFINITION, stop)) for c in clients]
    try:
        await disrupt(replicas, proxy, config, done, stop)
        await asyncio.wait_for(asyncio.gather(*loads), STOP_TIMEOUT)
    finally:
        for load in loads:
            load.cancel()
    return clients, done


def run(config: Config, keep: Path | None = None) -> dict[str, Any]:
    """The soak; its figures and problems. `keep`: a directory to leave the replicas' and
    nginx's files in, rather than a temporary one."""
    answer = "".join(slow_reply(config.chunks, config.delay).chunks)
    with tempfile.TemporaryDirectory(prefix="proxy-soak-") as temp, cluster() as database:
        directory = keep or Path(temp)
        password_file = directory / "store-password"
        password_file.write_text(database.password + "\n")
        password_file.chmod(0o600)
        url = database.create_database(f"soak_{secrets.token_hex(3)}")
        store = migrate(url, password_file)
        with FakeModelServer(default=slow_reply(config.chunks, config.delay)) as model:
            definitions = write_definitions(directory / "definitions", model.url)
            replicas = Replicas(directory / "replicas", store, definitions, REPLICAS, SERVE_FLAGS)
            try:
                replicas.start_all()
                with Nginx(directory / "nginx", replicas.addresses, PROXY_SETTINGS) as proxy:
                    started = time.monotonic()
                    clients, done = asyncio.run(drive(proxy.target, replicas, proxy, config))
                    elapsed = time.monotonic() - started
                    stored = asyncio.run(histories(proxy.target, clients))
                    calls = proxy.calls()
            finally:
                replicas.close()
    return figures(clients, done, calls, elapsed, config.delay) | {
        "problems": problems(clients, stored, answer),
        "config": asdict(config),
    }


def figures(
    clients: Sequence[LoadClient],
    done: Disruptions,
    calls: Sequence[Call],
    elapsed: float,
    delay: float,
) -> dict[str, Any]:
    runs = [run for client in clients for run in client.runs]
    reattaches: list[Reattach] = [r for client in clients for r in client.clock.reattaches]
    running: dict[str, str] = {}
    for call in calls:
        if call.method == "StreamTurn" and call.grpc_status not in ("1", "10", "14"):
            running.setdefault(call.turn, call.upstreams[-1] if call.upstreams else "")
    watches = [c for c in calls if c.method == "WatchTurn" and c.upstreams]
    elsewhere = [c for c in watches if running.get(c.turn) not in (None, c.upstreams[-1])]
    received = {(run.turn_id, run.rerun): run.received for run in runs}
    missed: dict[str, list[float]] = {"all": [], "same": [], "other": []}
    live: list[float] = []
    detail = []
    for r in reattaches:
        if r.latency is None or r.first_failed:
            continue
        times = [t for key, ts in received.items() if key[0] == r.turn_id for t in ts if t < r.sent]
        # The turn streams an event every `delay` seconds: with twice that between the last
        # event received and the reattach, the reattach's first event was produced before
        # it was sent (missed), rather than while it waited (live).
        gap = r.sent - max(times) if times else 0.0
        served = _served(watches, r)
        where = "other" if served and served != running.get(r.turn_id) else "same"
        if gap >= 2 * delay:
            missed["all"].append(r.latency)
            if served:
                missed[where].append(r.latency)
        else:
            live.append(r.latency)
        detail.append(
            {
                "turn": r.turn_id,
                "sent_at": r.sent_at,
                "latency_ms": r.latency * 1000,
                "gap_ms": gap * 1000,
                "replica": where if served else "?",
                "after": _last_disruption(done, r.sent_at),
            }
        )
    to_interrupted = []
    for run in runs:
        if run.interrupted:
            before = [at for at, _ in done.kills if at <= run.ended]
            if before:
                to_interrupted.append(run.ended - max(before))
    return {
        "seconds": elapsed,
        "clients": len(clients),
        "runs": len(runs),
        "completed": sum(1 for run in runs if run.completed),
        "interrupted": sum(1 for run in runs if run.interrupted),
        "reloads": len(done.reloads),
        "drains": len(done.drains),
        "kills": len(done.kills),
        "reattaches": len(reattaches),
        "reattaches_without_event": sum(1 for r in reattaches if r.first is None),
        "watch_turn_calls_logged": len(watches),
        "watch_turn_on_another_replica": len(elsewhere),
        "reattach_to_first_missed_event_ms": _summary(missed["all"]),
        "reattach_to_first_missed_event_same_replica_ms": _summary(missed["same"]),
        "reattach_to_first_missed_event_other_replica_ms": _summary(missed["other"]),
        "reattach_to_first_live_event_ms": _summary(live),
        "kill_to_interrupted_s": _summary(to_interrupted, scale=1.0),
        "reattach_detail": detail,
    }


def _served(watches: Sequence[Call], reattach: Reattach) -> str | None:
    """The replica that served `reattach`: its WatchTurn in the access log, by start time."""
    found = [
        (abs(c.time - c.request_time - reattach.sent_at), c.upstreams[-1])
        for c in watches
        if c.turn == reattach.turn_id
    ]
    best = min(found, default=None)
    return best[1] if best is not None and best[0] < 0.25 else None


def _last_disruption(done: Disruptions, at: float) -> str:
    """The last disruption before `at` and how long before, e.g. "reload 1.0 s"."""
    events = [(t, "reload") for t in done.reloads]
    events += [(t, "drain") for t, _ in done.drains] + [(t, "kill") for t, _ in done.kills]
    before = [(t, kind) for t, kind in events if t <= at]
    if not before:
        return "-"
    t, kind = max(before)
    return f"{kind} {at - t:.1f} s"


def _summary(values: Sequence[float], scale: float = 1000.0) -> dict[str, float | int]:
    if not values:
        return {"count": 0}
    return {
        "count": len(values),
        "median": statistics.median(values) * scale,
        "p95": percentile(values, 0.95) * scale,
        "max": max(values) * scale,
    }


def report(data: dict[str, Any]) -> None:
    config = data["config"]
    print(
        f"\nProxy soak: nginx in front of {REPLICAS} replicas on PostgreSQL,"
        f" {data['clients']} clients, {data['seconds']:.0f} s; turns of {config['chunks']}"
        f" chunks {config['delay'] * 1000:.0f} ms apart"
    )
    print(
        f"  disruptions: {data['reloads']} nginx reloads, {data['drains']} SIGTERM restarts,"
        f" {data['kills']} SIGKILL restarts"
    )
    print(
        f"  turns: {data['runs']} runs, {data['completed']} completed,"
        f" {data['interrupted']} interrupted (each ran again)"
    )
    print(
        f"  reattaches: {data['reattaches']} WatchTurn calls,"
        f" {data['reattaches_without_event']} ended before an event (and were retried);"
        f" {data['watch_turn_on_another_replica']} of {data['watch_turn_calls_logged']}"
        " served by another replica than the turn's"
    )
    for key, label in (
        ("reattach_to_first_missed_event_ms", "all"),
        ("reattach_to_first_missed_event_other_replica_ms", "on another replica"),
        ("reattach_to_first_missed_event_same_replica_ms", "on the turn's replica"),
    ):
        missed = data[key]
        if missed["count"]:
            print(
                f"  WatchTurn sent -> first missed event, {label}:"
                f" median {missed['median']:.1f} ms, p95 {missed['p95']:.1f} ms,"
                f" max {missed['max']:.1f} ms over {missed['count']} reattaches"
            )
    live = data["reattach_to_first_live_event_ms"]
    if live["count"]:
        print(
            "  (reattaches sent within two chunks of the last event, to their first:"
            f" median {live['median']:.1f} ms over {live['count']})"
        )
    killed = data["kill_to_interrupted_s"]
    if killed["count"]:
        print(
            f"  SIGKILL -> `interrupted` event: median {killed['median']:.1f} s,"
            f" max {killed['max']:.1f} s over {killed['count']} turns"
            f" (lease TTL {SERVE_FLAGS[-1]} s)"
        )
    for line in data["problems"][:20]:
        print(f"  PROBLEM: {line}")
    verdict = (
        "every event once, every completed turn stored once"
        if not data["problems"]
        else (f"INVALID: {len(data['problems'])} problems")
    )
    print(f"Result: {verdict}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the soak and print its figures; 1 when any run or history was wrong."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a short run (smoke)")
    parser.add_argument("--clients", type=int, help=f"concurrent clients [{FULL.clients}]")
    parser.add_argument("--seconds", type=float, help=f"seconds of disruptions [{FULL.seconds:g}]")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON")
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="leave nginx's and the replicas' files here"
    )
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    config = Config(
        clients=args.clients or base.clients,
        seconds=args.seconds or base.seconds,
        chunks=base.chunks,
        delay=base.delay,
        period=base.period,
    )
    data = run(config, args.keep)
    report(data)
    if args.json is not None:
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 1 if data["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
