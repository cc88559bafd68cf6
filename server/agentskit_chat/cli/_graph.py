"""`agentskit-chat graph`: a definition's state machine as Mermaid or Graphviz DOT text.

Each transition is labelled with its event and, in parentheses, the routes that fire it
from that state (a route fires its event where the state allows the event and the route's
state restriction, if any, names the state). Each state lists its actions, and the
initial state is marked with an arrow from the start point.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from agentskit_chat.conversation import ChatDefinition, ConfigError, Route, load_definition
from agentskit_chat.models import AdapterRegistry

from ._definitions import gather

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `graph`."""
    parser.add_argument("path", type=Path, help="a definition file or a directory of them")
    parser.add_argument(
        "--definition", metavar="ID", help="the chat to draw; required when PATH holds several"
    )
    parser.add_argument(
        "--format",
        choices=("mermaid", "dot"),
        default="mermaid",
        help="Mermaid stateDiagram-v2 or Graphviz DOT [%(default)s]",
    )


def run(args: argparse.Namespace) -> int:
    """Print the diagram; exit 1 on definition errors, 2 on an ambiguous or unknown id."""
    try:
        definitions = _load(args.path)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    chosen = [d for d in definitions if args.definition in (None, d.id)]
    if len(chosen) != 1:
        known = ", ".join(sorted(d.id for d in definitions)) or "none"
        problem = "no definition has this id" if args.definition else "choose one with --definition"
        print(f"graph: {problem} (definitions: {known})", file=sys.stderr)
        return 2
    render: Callable[[ChatDefinition], str] = mermaid if args.format == "mermaid" else dot
    sys.stdout.write(render(chosen[0]))
    return 0


def _load(path: Path) -> list[ChatDefinition]:
    if path.is_dir():
        return gather(path, (), AdapterRegistry())
    return [load_definition(path)]


def firing_routes(definition: ChatDefinition) -> dict[tuple[str, str], list[Route]]:
    """For each (state, event) the state allows, the routes that fire the event there."""
    spec = definition.conversation
    fired: dict[tuple[str, str], list[Route]] = {}
    for name, state in spec.states.items():
        for event in state.on:
            fired[(name, event)] = [
                route
                for route in spec.routes
                if route.event == event and (route.states is None or name in route.states)
            ]
    return fired


def _label(event: str, routes: list[Route]) -> str:
    if not routes:
        return event
    return f"{event} ({', '.join(route.id for route in routes)})"


def mermaid(definition: ChatDefinition) -> str:
    """The Mermaid `stateDiagram-v2` text of `definition`, ending with a newline."""
    spec = definition.conversation
    ids = {name: _mermaid_id(name, index) for index, name in enumerate(spec.states)}
    lines = ["stateDiagram-v2"]
    for name, node in ids.items():
        if node != name:
            lines.append(f'    state "{_mermaid_text(name)}" as {node}')
    lines.append(f"    [*] --> {ids[spec.initial]}")
    fired = firing_routes(definition)
    for name, state in spec.states.items():
        for event, target in state.on.items():
            label = _mermaid_text(_label(event, fired[(name, event)]))
            lines.append(f"    {ids[name]} --> {ids[target]}: {label}")
    for name, state in spec.states.items():
        if state.actions:
            actions = _mermaid_text(", ".join(state.actions))
            lines.append(f"    {ids[name]} : actions {actions}")
    return "\n".join(lines) + "\n"


def _mermaid_id(name: str, index: int) -> str:
    return name if _IDENTIFIER.fullmatch(name) and name != "state" else f"s{index}"


def _mermaid_text(text: str) -> str:
    """Text safe in a Mermaid label: characters the grammar reads are entity codes."""
    return "".join(f"#{ord(c)};" if c in '#;:"<>{}' else c for c in " ".join(text.split()))


def dot(definition: ChatDefinition) -> str:
    """The Graphviz DOT text of `definition`, ending with a newline."""
    spec = definition.conversation
    lines = [
        f"digraph {_dot_string(definition.id)} {{",
        "  rankdir=TB;",
        '  node [shape=box, style=rounded, fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
        '  "__start" [shape=point, width=0.15, label=""];',
        f'  "__start" -> {_dot_string(spec.initial)};',
    ]
    for name, state in spec.states.items():
        label = f"<B>{_html(name)}</B>"
        if state.actions:
            actions = _html(", ".join(state.actions))
            label += f'<BR/><FONT POINT-SIZE="10">actions: {actions}</FONT>'
        lines.append(f"  {_dot_string(name)} [label=<{label}>];")
    fired = firing_routes(definition)
    for name, state in spec.states.items():
        for event, target in state.on.items():
            label = _label(event, fired[(name, event)])
            lines.append(
                f"  {_dot_string(name)} -> {_dot_string(target)} [label={_dot_string(label)}];"
            )
    lines.append("}")
    return "\n".join(lines) + "\n"


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _dot_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'
