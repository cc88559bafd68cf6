"""What the terminal renderer prints: badges, state lines, history; plain or coloured.

Plain text whenever the output is not a terminal (or NO_COLOR is set), so a transcript
piped to a file reads the same as the screen minus the colours.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from agentskit_chat_client import AnswerOrigin, Definition, Message, Snapshot, TurnDecision

LOCAL_COMMANDS = ("/retry", "/edit", "/regenerate", "/truncate", "/state", "/quit")
HELP = (
    "local commands: /retry  /edit TEXT  /regenerate  /truncate [N]  /state  /quit; "
    "any other line goes to the chat (start it with // to send one of these names)"
)

_STYLES = {"badge": "36", "state": "2", "error": "31", "you": "1"}


@dataclass(frozen=True, slots=True)
class View:
    """Writes lines to `out`, coloured when `color`."""

    out: TextIO
    color: bool

    @classmethod
    def for_stream(cls, out: TextIO) -> View:
        """Colour only on a terminal, and never when NO_COLOR is set."""
        return cls(out, out.isatty() and not os.environ.get("NO_COLOR"))

    def line(self, text: str = "", style: str = "") -> None:
        """One line, in `style` when colouring."""
        if self.color and style and text:
            text = f"\x1b[{_STYLES[style]}m{text}\x1b[0m"
        self.out.write(text + "\n")
        self.out.flush()

    def piece(self, text: str) -> None:
        """Streamed text, as it arrives."""
        self.out.write(text)
        self.out.flush()


def badge(decision: TurnDecision | AnswerOrigin | None, *, failed: str = "") -> str:
    """`[kind | route R | from -> to | replayed]` for the turn just answered, or for the
    turn that produced a stored answer."""
    if decision is None:
        return f"[failed: {failed}]" if failed else "[no decision]"
    parts = [decision.kind, f"route {decision.route_id}" if decision.route_id else "no route"]
    parts.append(f"{decision.from_state} -> {decision.to_state}")
    if decision.replayed:
        parts.append("replayed")
    if failed:
        parts.append(f"failed: {failed}")
    return "[" + " | ".join(parts) + "]"


def state_line(snapshot: Snapshot, buttons: Sequence[str]) -> str:
    """The current state, its actions and the commands the chat offers in it."""
    actions = ", ".join(snapshot.actions) or "none"
    offered = "  ".join(buttons) or "none"
    return f"state {snapshot.state} | actions: {actions} | buttons: {offered}"


def history_lines(messages: Sequence[Message], last: int = 6) -> list[str]:
    """The last messages of a resumed session, one line each."""
    shown = messages[-last:]
    hidden = len(messages) - len(shown)
    lines = [f"... {hidden} earlier messages"] if hidden else []
    for message in shown:
        author = "you" if message.role == "user" else message.role
        origin = "" if message.origin is None else f" {badge(message.origin)}"
        lines.append(f"{author}: {' '.join(message.content.split())}{origin}")
    return lines


def definition_lines(definitions: Sequence[Definition]) -> list[str]:
    """One numbered line per definition: `  1. ID rREVISION  DESCRIPTION`."""
    width = max((len(f"{d.id} r{d.revision}") for d in definitions), default=0)
    lines = []
    for number, definition in enumerate(definitions, start=1):
        name = f"{definition.id} r{definition.revision}"
        description = " ".join(definition.description.split())
        lines.append(f"{number:3}. {name:<{width}}  {description}".rstrip())
    return lines
