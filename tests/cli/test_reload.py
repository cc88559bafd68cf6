"""SIGHUP reloads definitions: settings reach live sessions, a changed conversation needs a
new revision, and a new revision retires the stored sessions of the old one."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import grpc
import pytest

from agentskit_chat.fakemodel import FakeModelServer
from agentskit_chat_client import ChatClient, ChatError, Submit, TurnCompleted
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import Server, collect, terminal

DEFINITION = """\
id: desk
revision: {revision}
description: {description}
model: {{adapter: offline}}
conversation:
  initial: idle
  states:
    idle: {{on: {{start: collecting}}}}
    collecting: {{on: {{finish: done}}}}
    done: {{}}
  routes:
    - {{id: start, command: /start, event: start, response: "{start_reply}"}}
    - {{id: finish, command: /finish, event: finish, response: "Done."}}
"""


def write(
    directory: Path,
    *,
    revision: int = 1,
    description: str = "first",
    start_reply: str = "Started.",
) -> None:
    text = DEFINITION.format(revision=revision, description=description, start_reply=start_reply)
    (directory / "desk.yaml").write_text(text, encoding="utf-8")


async def reload_and_wait(server: Server, text: str) -> None:
    server.send(signal.SIGHUP)
    await server.wait_output_async(text)


def test_settings_of_the_same_revision_reach_live_sessions_without_resetting_them(
    launch: Launcher, tmp_path: Path
) -> None:
    definitions = tmp_path / "definitions"
    definitions.mkdir()
    write(definitions)
    server = launch(tmp_path / "state", "--definitions", str(definitions))

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            session = await client.create_session("desk")
            await collect(client, session.session_id, Submit("/start"))
            write(definitions, description="second")
            await reload_and_wait(server, "definitions reloaded: updated desk")
            definition = await client.get_definition("desk")
            assert (definition.description, definition.revision) == ("second", 1)
            done = terminal(await collect(client, session.session_id, Submit("/finish")))
            assert isinstance(done, TurnCompleted)
            assert done.snapshot.state == "done"  # the state survived the reload

    asyncio.run(scenario())


def test_a_changed_conversation_under_the_same_revision_is_refused(
    launch: Launcher, tmp_path: Path
) -> None:
    definitions = tmp_path / "definitions"
    definitions.mkdir()
    write(definitions)
    server = launch(tmp_path / "state", "--definitions", str(definitions))

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            session = await client.create_session("desk")
            write(definitions, description="second", start_reply="Changed.")
            await reload_and_wait(server, "change their conversation under the same revision")
            definition = await client.get_definition("desk")
            assert definition.description == "first"  # the old definitions keep serving
            started = terminal(await collect(client, session.session_id, Submit("/start")))
            assert isinstance(started, TurnCompleted)
            assert started.content == "Started."

    asyncio.run(scenario())


def test_a_new_revision_serves_new_sessions_and_refuses_stored_sessions_of_the_old(
    launch: Launcher, tmp_path: Path
) -> None:
    definitions = tmp_path / "definitions"
    definitions.mkdir()
    write(definitions)
    server = launch(tmp_path / "state", "--definitions", str(definitions))

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            old = await client.create_session("desk")
            write(definitions, revision=2, start_reply="Started again.")
            await reload_and_wait(server, "definitions reloaded: revised desk")
            new = await client.create_session("desk")
            assert new.definition_revision == 2
            started = terminal(await collect(client, new.session_id, Submit("/start")))
            assert isinstance(started, TurnCompleted)
            assert started.content == "Started again."
            with pytest.raises(ChatError) as refused:
                await collect(client, old.session_id, Submit("/start"))
            assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
            assert refused.value.reason == "ERROR_REASON_REVISION_MISMATCH"
            assert "revision" in refused.value.message

    asyncio.run(scenario())


def test_a_reload_that_does_not_load_keeps_the_old_definitions(
    launch: Launcher, tmp_path: Path
) -> None:
    definitions = tmp_path / "definitions"
    definitions.mkdir()
    write(definitions)
    server = launch(tmp_path / "state", "--definitions", str(definitions))

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            (definitions / "desk.yaml").write_text("id: desk\nrevision: [", encoding="utf-8")
            await reload_and_wait(server, "reload refused")
            assert (await client.get_definition("desk")).description == "first"

    asyncio.run(scenario())


def test_new_model_settings_reach_the_next_agentic_turn_of_a_live_session(
    launch: Launcher, tmp_path: Path
) -> None:
    definitions = tmp_path / "definitions"
    definitions.mkdir()
    with FakeModelServer() as model:

        def write_model(name: str) -> None:
            text = DEFINITION.format(revision=1, description="d", start_reply="Started.")
            text = text.replace(
                "{adapter: offline}", f"{{adapter: openai, base_url: '{model.url}', model: {name}}}"
            )
            (definitions / "desk.yaml").write_text(text, encoding="utf-8")

        write_model("model-a")
        server = launch(tmp_path / "state", "--definitions", str(definitions))

        async def scenario() -> None:
            async with ChatClient(server.target, timeout=30) as client:
                session = await client.create_session("desk")
                await collect(client, session.session_id, Submit("/start"))
                await collect(client, session.session_id, Submit("hello"))
                write_model("model-b")
                await reload_and_wait(server, "definitions reloaded: updated desk")
                answered = terminal(await collect(client, session.session_id, Submit("again")))
                assert isinstance(answered, TurnCompleted)
                assert answered.snapshot.state == "collecting"  # progress kept
                done = terminal(await collect(client, session.session_id, Submit("/finish")))
                assert isinstance(done, TurnCompleted)
                assert done.snapshot.state == "done"

        asyncio.run(scenario())
        assert [r.body["model"] for r in model.requests] == ["model-a", "model-b"]


def test_chats_from_modules_are_kept_as_they_are_across_reloads(
    launch: Launcher, tmp_path: Path
) -> None:
    definitions = tmp_path / "definitions"
    definitions.mkdir()
    write(definitions)
    server = launch(
        tmp_path / "state",
        "--definitions",
        str(definitions),
        "--definitions-module",
        "tests.cli.fixtures.code_chat",
    )

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            session = await client.create_session("code")
            await reload_and_wait(server, "definitions reloaded: no changes")
            made = terminal(await collect(client, session.session_id, Submit("/echo hi")))
            assert isinstance(made, TurnCompleted)
            assert made.content == "You wrote: /echo hi"

    asyncio.run(scenario())


def test_a_revision_kept_beside_the_new_one_keeps_serving_its_sessions_until_they_migrate(
    launch: Launcher, tmp_path: Path
) -> None:
    definitions = tmp_path / "definitions"
    definitions.mkdir()
    write(definitions)
    server = launch(tmp_path / "state", "--definitions", str(definitions))

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            old = await client.create_session("desk")
            assert terminal(await collect(client, old.session_id, Submit("/start")))
            # Revision 2 beside revision 1, new sessions still on 1: nothing moves.
            text = DEFINITION.format(revision=2, description="second", start_reply="Again.")
            held = text.replace("revision: 2\n", "revision: 2\nrollout: 0\n")
            (definitions / "desk-2.yaml").write_text(held, encoding="utf-8")
            await reload_and_wait(server, "definitions reloaded: revised desk")
            assert (await client.create_session("desk")).definition_revision == 1
            pinned = await client.create_session("desk", revision=2)
            assert pinned.definition_revision == 2
            # Revision 2 takes new sessions and declares how revision 1's move.
            moving = text.replace("revision: 2\n", "revision: 2\nmigrations: [{from: 1}]\n")
            (definitions / "desk-2.yaml").write_text(moving, encoding="utf-8")
            await reload_and_wait(server, "definitions reloaded: updated desk")
            finished = terminal(await collect(client, old.session_id, Submit("/finish")))
            assert isinstance(finished, TurnCompleted)
            assert finished.snapshot.state == "done"
            moved = await client.get_session(old.session_id)
            assert moved.session.definition_revision == 2

    asyncio.run(scenario())
