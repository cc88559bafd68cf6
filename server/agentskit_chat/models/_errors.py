"""Refusals of a definition's `model` settings, raised before anything runs."""

from __future__ import annotations


class UnknownAdapterError(ValueError):
    """A definition names an adapter the server does not provide."""


class InvalidAdapterSettingsError(UnknownAdapterError):
    """A definition's `model` settings that its adapter refuses.

    The message names the adapter and the key, never a value. It subclasses
    UnknownAdapterError so that every caller refusing an unusable `model` mapping refuses
    this one too.
    """

    def __init__(self, adapter: str, key: str, problem: str) -> None:
        super().__init__(f"{adapter} adapter: model setting {key!r} {problem}")
        self.adapter = adapter
        self.key = key
