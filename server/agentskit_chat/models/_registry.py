"""Chooses the adapter that answers a definition's agentic turns."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ._port import ModelAdapter
from .offline import OfflineAdapter

AdapterFactory = Callable[[Mapping[str, Any]], ModelAdapter]


class UnknownAdapterError(ValueError):
    """A definition names an adapter the server does not provide."""


class AdapterRegistry:
    """Adapter factories by name, and the adapters built so far, one per distinct setting."""

    def __init__(self, factories: Mapping[str, AdapterFactory] | None = None) -> None:
        self._factories: dict[str, AdapterFactory] = {"offline": lambda _: OfflineAdapter()}
        self._factories.update(factories or {})
        self._built: dict[str, ModelAdapter] = {}

    @property
    def names(self) -> frozenset[str]:
        """Adapter names this registry can build."""
        return frozenset(self._factories)

    def check(self, settings: Mapping[str, Any]) -> str:
        """The adapter name of `settings`; raises UnknownAdapterError when unknown."""
        name = settings.get("adapter", "offline")
        if not isinstance(name, str) or name not in self._factories:
            known = ", ".join(sorted(self._factories))
            raise UnknownAdapterError(f"unknown model adapter; this server provides: {known}")
        return name

    def adapter(self, settings: Mapping[str, Any]) -> ModelAdapter:
        """The adapter for `settings`, built once per distinct settings."""
        name = self.check(settings)
        key = repr(sorted(settings.items(), key=lambda item: item[0]))
        built = self._built.get(key)
        if built is None:
            built = self._built[key] = self._factories[name](settings)
        return built

    async def close(self) -> None:
        """Close every adapter built so far."""
        built, self._built = list(self._built.values()), {}
        for adapter in built:
            await adapter.close()
