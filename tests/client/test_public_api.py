"""The client README lists the whole public API, and nothing that is not in it."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import agentskit_chat_client
from agentskit_chat_client import ChatClient

README = Path(__file__).resolve().parents[2] / "client" / "python" / "README.md"


def _listed() -> set[str]:
    section = README.read_text(encoding="utf-8").split("## Public API", 1)[1]
    return set(re.findall(r"`([A-Za-z_]+)`", section))


def test_every_exported_name_and_client_method_is_listed() -> None:
    listed = _listed()
    exported = set(agentskit_chat_client.__all__)
    methods = {name for name, _ in inspect.getmembers(ChatClient) if not name.startswith("_")}
    assert exported - listed == set()
    assert methods - listed == set()
    error = set(inspect.signature(agentskit_chat_client.ChatError).parameters)
    attributes = error | {"code", "message", "retry_after_ms", "tls"}
    assert {"reason", "metadata", "retry_delay"} <= attributes
    other_languages = {"createSession", "CreateSession"}
    unknown = listed - exported - methods - attributes - other_languages - {"agentskit_chat_client"}
    assert unknown == set(), "the README lists names the client does not have"
