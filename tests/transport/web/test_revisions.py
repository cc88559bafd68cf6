"""Every HTTP front says which revision a session runs: a session pinned to revision 1
while revision 2 takes new sessions is drawn from revision 1's states and named as such."""

from __future__ import annotations

import json
from pathlib import Path

from agentskit_chat.conversation import parse_definition
from agentskit_chat.storage import HistoryMode
from tests.conversation.test_revisions import first, second
from tests.transport.conftest import run
from tests.transport.web.agui.runs import post_run, run_input, user
from tests.transport.web.conftest import web_live

ONE = parse_definition(first())
TWO = parse_definition(second())  # renames `collecting` to `asking`; no migration


def test_each_front_names_the_revision_the_session_runs(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, definitions=[ONE, TWO]) as web:
            service = web.env.service
            pinned = await service.create_session("shop", None, HistoryMode.SERVER, revision=1)
            sid = pinned.session_id
            # AG-UI: the state document is revision 1's, and says so.
            answer = await post_run(web.http, "shop", run_input(sid, "r1", [user("u1", "/start")]))
            assert answer.status == 200, answer.body
            (snapshot,) = answer.of("STATE_SNAPSHOT")
            assert (snapshot["snapshot"]["revision"], snapshot["snapshot"]["state"]) == (1, "idle")
            delta = answer.of("STATE_DELTA")
            assert {"op": "replace", "path": "/state", "value": "collecting"} in delta[0]["delta"]
            # OpenAI: a header and the `agentskit` object.
            completion = await web.http.post(
                "/v1/chat/completions",
                json={"model": "shop", "messages": [{"role": "user", "content": "/done"}]},
                headers={"X-AgentsKit-Session": sid},
            )
            assert completion.status_code == 200, completion.text
            assert completion.headers["x-agentskit-revision"] == "1"
            assert completion.json()["agentskit"]["revision"] == 1
            assert completion.json()["agentskit"]["to"] == "complete"
            # AI SDK: the start chunk's metadata.
            body = {
                "id": "chat-revision",
                "trigger": "submit-message",
                "messages": [
                    {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "/x"}]}
                ],
            }
            new = await web.http.post("/ai-sdk/shop", json=body)
            assert new.status_code == 200, new.text
            chunks = [json.loads(line[6:]) for line in new.text.splitlines() if line[6:7] == "{"]
            start = next(c for c in chunks if c["type"] == "start")
            assert start["messageMetadata"]["revision"] == 2  # a new chat gets the newest

    run(scenario())
