"""Errors raised while starting server tools (a call never raises: see ToolOutcome)."""

from __future__ import annotations


class ServerToolsError(Exception):
    """The declared servers cannot be used: one cannot be reached or started, lacks a
    declared tool, or two definitions declare a server or tool differently. The message
    names the server (and tool) and never holds a credential."""


class ConnectError(Exception):
    """One server cannot be connected; the message says why, without credentials."""
