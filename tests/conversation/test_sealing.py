"""Responses made by application code are stored sealed: records hold no content."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from agentskit_chat.conversation import (
    ChatDefinition,
    ChatSession,
    InputDigester,
    RecordEncoder,
    ResponseSealer,
    RouteOutcome,
    SealedResponseError,
    SessionRecord,
    command_route,
    decode_session_record,
    define_chat,
)

from .conftest import KEY, History

CANARY = "CANARY-seal-92b7"
OTHER_KEY = b"another-deployment-key-32-bytes!"


def made_by_code() -> ChatDefinition:
    return define_chat(
        id="calls",
        conversation={
            "initial": "a",
            "states": {"a": {"on": {"go": "b"}}, "b": {}},
            "routes": [
                command_route(
                    id="go", command="/go", event="go", response=lambda t, c: f"made {CANARY}"
                )
            ],
        },
    )


def sealed_record(history: History) -> tuple[ChatDefinition, SessionRecord, bytes]:
    definition = made_by_code()
    session = ChatSession(definition, session_id="s1", digest_key=KEY)
    session.dispatch_sync(history.user("/go"))
    record = dataclasses.replace(SessionRecord.new(definition, "s1"), conversation=session.state)
    return definition, record, RecordEncoder(ResponseSealer(KEY)).encode(record)


def test_a_sealed_record_holds_no_response_text(history: History) -> None:
    _, _, data = sealed_record(history)
    assert CANARY.encode() not in data
    assert b"made" not in data
    response = json.loads(data)["decisions"][0]["response"]
    assert set(response) == {"sealed"}


def test_a_sealed_response_opens_and_replays_after_resume(history: History) -> None:
    definition, _, data = sealed_record(history)
    decoded = decode_session_record(
        data, definition=definition, session_id="s1", sealer=ResponseSealer(KEY)
    )
    resumed = ChatSession(definition, session_id="s1", digest_key=KEY, state=decoded.conversation)
    outcome = resumed.dispatch_sync(history.messages)
    assert isinstance(outcome, RouteOutcome)
    assert (outcome.replayed, outcome.response) == (True, f"made {CANARY}")


def test_sealing_is_deterministic_so_encodings_are_stable(history: History) -> None:
    _, record, data = sealed_record(history)
    assert RecordEncoder(ResponseSealer(KEY)).encode(record) == data


def mutate(data: bytes, change: Any) -> bytes:
    body = json.loads(data)
    change(body["decisions"][0])
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("sealer", "change"),
    [
        pytest.param(ResponseSealer(OTHER_KEY), lambda d: None, id="another key"),
        pytest.param(None, lambda d: None, id="no key"),
        pytest.param(
            ResponseSealer(KEY),
            lambda d: d["response"].update(sealed=d["response"]["sealed"][:-4] + "AAAA"),
            id="tampered",
        ),
        pytest.param(
            ResponseSealer(KEY),
            lambda d: d["response"].update(sealed="not base64 at all!"),
            id="not base64",
        ),
    ],
)
def test_a_sealed_response_that_does_not_open_rejects_the_record(
    history: History, sealer: ResponseSealer | None, change: Any
) -> None:
    definition, _, data = sealed_record(history)
    with pytest.raises(SealedResponseError) as refused:
        decode_session_record(
            mutate(data, change), definition=definition, session_id="s1", sealer=sealer
        )
    assert refused.value.code == "record_sealed"
    assert CANARY not in str(refused.value)


def test_a_sealed_response_cannot_move_to_another_session(history: History) -> None:
    definition, _, data = sealed_record(history)
    moved = json.loads(data)
    moved["session_id"] = "s2"
    with pytest.raises(SealedResponseError):
        decode_session_record(
            json.dumps(moved).encode(),
            definition=definition,
            session_id="s2",
            sealer=ResponseSealer(KEY),
        )


def test_a_short_key_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 16 bytes"):
        ResponseSealer(b"short")


def test_no_input_digest_can_reveal_the_sealing_key(history: History) -> None:
    """Digests are HMACs under the deployment key; the sealing key is not one of them."""
    _, _, data = sealed_record(history)
    decision = json.loads(data)["decisions"][0]
    sealed = base64.urlsafe_b64decode(decision["response"]["sealed"])
    context = [b"agentskit.chat.response-seal/1", b"s1", decision["message_id"].encode()]
    digester = InputDigester(KEY)
    label = "agentskit.chat.response-seal/1"
    candidates = [
        bytes.fromhex(digester.digest(f"{label}\x01") + digester.digest(f"{label}\x02")),
        bytes.fromhex(digester.digest(label) + digester.digest(f"{label}aes-siv")),
    ]
    for candidate in candidates:
        with pytest.raises(InvalidTag):
            AESSIV(candidate).decrypt(sealed, context)
