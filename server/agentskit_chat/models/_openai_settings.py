"""The `model` settings of the `openai` adapter, checked before a definition is served."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from ._errors import InvalidAdapterSettingsError

ADAPTER: Final = "openai"
DEFAULT_TIMEOUT: Final = 60.0
DEFAULT_PROVIDER: Final = "openai"
KEYS: Final = frozenset(
    {
        "adapter",
        "base_url",
        "model",
        "api_key_env",
        "headers",
        "timeout",
        "temperature",
        "max_tokens",
        "system_prompt",
        "provider",
    }
)
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_RESERVED_HEADERS: Final = frozenset(
    {"content-type", "content-length", "host", "transfer-encoding"}
)


@dataclass(frozen=True, slots=True)
class OpenAISettings:
    """Where and how to call a Chat Completions endpoint."""

    base_url: str
    """The API root, such as `https://api.openai.com/v1`, without a trailing slash."""
    model: str
    api_key_env: str | None = None
    """The environment variable holding the API key, read at every call."""
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """Sent with every call; left out of the repr, since a value may be a credential."""
    timeout: float = DEFAULT_TIMEOUT
    """Seconds to connect, and to wait for each piece of the answer."""
    temperature: float | None = None
    max_tokens: int | None = None
    system_prompt: str | None = field(default=None, repr=False)
    """Left out of the repr, like any other content."""
    provider: str = DEFAULT_PROVIDER
    """`gen_ai.provider.name`."""


def parse_settings(settings: Mapping[str, Any]) -> OpenAISettings:
    """The settings of `settings`; InvalidAdapterSettingsError names the first bad key."""
    for key in settings:
        if key not in KEYS:
            raise _bad(_shown(key), f"is not known; known keys: {', '.join(sorted(KEYS))}")
    headers = _headers(settings.get("headers"))
    api_key_env = _optional_str(settings, "api_key_env")
    if api_key_env is not None and not _ENV_NAME.fullmatch(api_key_env):
        raise _bad("api_key_env", "must name an environment variable")
    if api_key_env is not None and any(name.lower() == "authorization" for name, _ in headers):
        raise _bad("headers", "must not hold Authorization when api_key_env is set")
    return OpenAISettings(
        base_url=_base_url(settings.get("base_url")),
        model=_required_str(settings, "model"),
        api_key_env=api_key_env,
        headers=headers,
        timeout=_number(settings, "timeout", DEFAULT_TIMEOUT, positive=True),
        temperature=_optional_number(settings, "temperature"),
        max_tokens=_optional_count(settings, "max_tokens"),
        system_prompt=_optional_str(settings, "system_prompt", empty=True),
        provider=_optional_str(settings, "provider") or DEFAULT_PROVIDER,
    )


def _bad(key: str, problem: str) -> InvalidAdapterSettingsError:
    return InvalidAdapterSettingsError(ADAPTER, key, problem)


def _shown(key: object) -> str:
    text = str(key)
    return text if len(text) <= 40 else text[:37] + "..."


def _base_url(value: object) -> str:
    if value is None:
        raise _bad("base_url", "is required, such as https://api.openai.com/v1")
    if not isinstance(value, str):
        raise _bad("base_url", "must be a string")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise _bad("base_url", "is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _bad("base_url", "must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise _bad("base_url", "must not hold credentials; name them with api_key_env")
    if parts.query or parts.fragment:
        raise _bad("base_url", "must not have a query or a fragment")
    return value.rstrip("/")


def _required_str(settings: Mapping[str, Any], key: str) -> str:
    value = _optional_str(settings, key)
    if value is None:
        raise _bad(key, "is required")
    return value


def _optional_str(settings: Mapping[str, Any], key: str, *, empty: bool = False) -> str | None:
    value = settings.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _bad(key, "must be a string")
    if not empty and not value.strip():
        raise _bad(key, "must not be empty")
    return value


def _number(settings: Mapping[str, Any], key: str, default: float, *, positive: bool) -> float:
    value = _optional_number(settings, key)
    if value is None:
        return default
    if positive and value <= 0:
        raise _bad(key, "must be a positive number of seconds")
    return value


def _optional_number(settings: Mapping[str, Any], key: str) -> float | None:
    value = settings.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(key, "must be a number")
    if value < 0:
        raise _bad(key, "must not be negative")
    return float(value)


def _optional_count(settings: Mapping[str, Any], key: str) -> int | None:
    value = settings.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _bad(key, "must be a positive integer")
    return value


def _headers(value: object) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise _bad("headers", "must be a mapping of header names to strings")
    headers: list[tuple[str, str]] = []
    for name, text in value.items():
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            raise _bad("headers", "holds a name that is not a valid header name")
        if name.lower() in _RESERVED_HEADERS:
            raise _bad(f"headers.{name}", "is set by the adapter itself")
        if not isinstance(text, str) or not text.isprintable() or not text.isascii():
            raise _bad(f"headers.{name}", "must be a string of printable ASCII")
        headers.append((name, text))
    return tuple(headers)
