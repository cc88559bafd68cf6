"""Chooses the adapter that answers a definition's agentic turns."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ._errors import InvalidAdapterSettingsError, UnknownAdapterError
from ._port import ModelAdapter
from .offline import OfflineAdapter
from .openai import OpenAIFactory

AdapterFactory = Callable[[Mapping[str, Any]], ModelAdapter]
"""Builds an adapter from a definition's `model` mapping. A factory may also have a
`check(settings)` method raising InvalidAdapterSettingsError; the registry calls it before a
definition is served."""

__all__ = [
    "AdapterFactory",
    "AdapterRegistry",
    "InvalidAdapterSettingsError",
    "UnknownAdapterError",
]


class AdapterRegistry:
    """Adapter factories by name, and the adapters built so far, one per distinct setting."""

    def __init__(self, factories: Mapping[str, AdapterFactory] | None = None) -> None:
        self._factories: dict[str, AdapterFactory] = {
            "offline": lambda _: OfflineAdapter(),
            "openai": OpenAIFactory(),
        }
        self._factories.update(factories or {})
        self._built: dict[str, ModelAdapter] = {}

    @property
    def names(self) -> frozenset[str]:
        """Adapter names this registry can build."""
        return frozenset(self._factories)

    def check(self, settings: Mapping[str, Any]) -> str:
        """The adapter name of `settings`.

        Raises UnknownAdapterError when the adapter is unknown, and its subclass
        InvalidAdapterSettingsError when the adapter refuses the settings.
        """
        name = settings.get("adapter", "offline")
        if not isinstance(name, str) or name not in self._factories:
            known = ", ".join(sorted(self._factories))
            raise UnknownAdapterError(f"unknown model adapter; this server provides: {known}")
        validate: Callable[[Mapping[str, Any]], object] | None = getattr(
            self._factories[name], "check", None
        )
        if validate is not None:
            validate(settings)
        return name

    def adapter(self, settings: Mapping[str, Any]) -> ModelAdapter:
        """The adapter for `settings`, built (and checked) once per distinct settings."""
        key = _key(settings)
        built = self._built.get(key)
        if built is None:
            name = self.check(settings)
            built = self._built[key] = self._factories[name](settings)
        return built

    def release_unused(self, kept: Iterable[Mapping[str, Any]]) -> list[ModelAdapter]:
        """Forget the adapters built for settings other than `kept`, and return them.

        They are no longer handed out; the caller closes them once no call uses them.
        """
        keys = {_key(settings) for settings in kept}
        unused = [key for key in self._built if key not in keys]
        return [self._built.pop(key) for key in unused]

    async def close(self) -> None:
        """Close every adapter built so far."""
        built, self._built = list(self._built.values()), {}
        for adapter in built:
            await adapter.close()


def _key(settings: Mapping[str, Any]) -> str:
    return repr(sorted(settings.items(), key=lambda item: item[0]))
