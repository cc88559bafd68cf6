"""`openai` settings are checked when a definition is loaded; refusals name the key only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentskit_chat.cli._definitions import gather
from agentskit_chat.conversation import ConfigError
from agentskit_chat.models import (
    AdapterRegistry,
    InvalidAdapterSettingsError,
    OpenAIAdapter,
    UnknownAdapterError,
)

SECRET = "sk-canary-in-settings-9931"
GOOD: dict[str, Any] = {
    "adapter": "openai",
    "base_url": "https://api.openai.com/v1/",
    "model": "gpt-4o-mini",
    "api_key_env": "OPENAI_API_KEY",
    "headers": {"OpenAI-Organization": "org-1"},
    "timeout": 30,
    "temperature": 0.7,
    "max_tokens": 512,
    "system_prompt": "",
    "provider": "openai",
}


def test_good_settings_pass_and_are_normalised() -> None:
    assert AdapterRegistry().check(GOOD) == "openai"
    adapter = OpenAIAdapter(GOOD)
    assert adapter.settings.base_url == "https://api.openai.com/v1"
    assert adapter.settings.timeout == 30.0
    assert adapter.settings.headers == (("OpenAI-Organization", "org-1"),)
    minimal = {"adapter": "openai", "base_url": "http://localhost:11434/v1", "model": "llama3"}
    assert AdapterRegistry().check(minimal) == "openai"


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"base_url": None}, "base_url"),
        ({"base_url": 3}, "base_url"),
        ({"base_url": "ftp://example.com/v1"}, "base_url"),
        ({"base_url": "https:///v1"}, "base_url"),
        ({"base_url": "https://example.com:99999/v1"}, "base_url"),
        ({"base_url": "https://example.com/v1?key=" + SECRET}, "base_url"),
        ({"base_url": f"https://user:{SECRET}@example.com/v1"}, "base_url"),
        ({"model": None}, "model"),
        ({"model": " "}, "model"),
        ({"model": ["gpt"]}, "model"),
        ({"api_key": SECRET}, "api_key"),
        ({"api_key_env": "NOT-A-NAME"}, "api_key_env"),
        ({"api_key_env": 7}, "api_key_env"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": "soon"}, "timeout"),
        ({"timeout": True}, "timeout"),
        ({"timeout": float("inf")}, "timeout"),
        ({"temperature": -1}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 1.5}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"system_prompt": 1}, "system_prompt"),
        ({"provider": ""}, "provider"),
        ({"headers": ["X-A: 1"]}, "headers"),
        ({"headers": {"bad name": "1"}}, "headers"),
        ({"headers": {"X-Key": SECRET + "\n"}}, "headers.X-Key"),
        ({"headers": {"X-Key": 5}}, "headers.X-Key"),
        ({"headers": {"Content-Type": "text/plain"}}, "headers.Content-Type"),
        ({"headers": {"Authorization": "Bearer " + SECRET}}, "headers"),
    ],
)
def test_bad_settings_are_refused_naming_the_key_never_the_value(
    change: dict[str, Any], key: str
) -> None:
    settings = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(InvalidAdapterSettingsError) as caught:
        AdapterRegistry().check(settings)
    error = caught.value
    assert isinstance(error, UnknownAdapterError)
    assert isinstance(error, ValueError)
    assert error.key == key
    assert f"model setting {key!r}" in str(error)
    assert str(error).startswith("openai adapter: ")
    assert SECRET not in str(error)


def test_header_values_and_the_system_prompt_stay_out_of_the_repr() -> None:
    adapter = OpenAIAdapter(
        {**GOOD, "headers": {"api-key": SECRET}, "system_prompt": f"Never say {SECRET}."}
    )
    assert adapter.settings.headers == (("api-key", SECRET),)
    shown = repr(adapter.settings)
    assert SECRET not in shown
    assert "api-key" not in shown
    assert "model='gpt-4o-mini'" in shown


def test_an_authorization_header_without_api_key_env_is_allowed() -> None:
    settings = {k: v for k, v in GOOD.items() if k != "api_key_env"}
    settings["headers"] = {"Authorization": "Bearer from-a-secret-store"}
    assert AdapterRegistry().check(settings) == "openai"


def test_a_long_unknown_key_is_shortened() -> None:
    with pytest.raises(InvalidAdapterSettingsError) as caught:
        AdapterRegistry().check({**GOOD, "k" * 500: 1})
    assert len(str(caught.value)) < 300


def test_the_registry_builds_adapters_only_for_good_settings() -> None:
    registry = AdapterRegistry()
    with pytest.raises(InvalidAdapterSettingsError):
        registry.adapter({"adapter": "openai", "model": "m"})
    assert isinstance(registry.adapter(GOOD), OpenAIAdapter)
    assert "openai" in registry.names


def test_unknown_adapters_list_openai_among_the_known_ones() -> None:
    with pytest.raises(UnknownAdapterError, match="this server provides: offline, openai"):
        AdapterRegistry().check({"adapter": "anthropic"})


def test_loading_a_definition_with_bad_openai_settings_reports_the_key(tmp_path: Path) -> None:
    (tmp_path / "assistant.yaml").write_text(
        "id: assistant\n"
        "revision: 1\n"
        "model: {adapter: openai, model: gpt-4o-mini, api_key: " + SECRET + "}\n"
        "conversation:\n"
        "  initial: chatting\n"
        "  states: {chatting: {}}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        gather(tmp_path, (), AdapterRegistry())
    (problem,) = caught.value.diagnostics
    assert problem.code == "invalid_model"
    assert "'api_key'" in problem.message
    assert SECRET not in str(caught.value)


def test_the_documented_model_configurations_are_valid() -> None:
    guide = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "models.md"
    section = guide.read_text(encoding="utf-8").split("\n## ", 1)[0]
    blocks = [yaml.safe_load(b)["model"] for b in re.findall(r"```yaml\n(.*?)```", section, re.S)]
    assert {b["base_url"] for b in blocks} == {
        "https://api.openai.com/v1",
        "http://localhost:11434/v1",
        "http://localhost:8000/v1",
    }
    for block in blocks:
        assert AdapterRegistry().check(block) == "openai"
