"""`agentskit-chat graph`: a definition's state machine as Mermaid or Graphviz DOT text.

Each transition is labelled with its event and, in parentheses, the routes that fire it
from that state (a route fires its event where the state allows the event and the route's
state restriction, if any, names the state). Each state lists its actions, and the
initial state is marked with an arrow from the start point.

With `--revisions OLD,NEW` (both in PATH) or `--compare OLD NEW` (two files or
directories), it draws what changes from one revision to the other, in DOT (see
`_graph_diff`). A directory holding several revisions of a chat draws the newest, or the
one `--revision` names.
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
from ._graph_diff import dot_diff
from ._revision_pair import revision_pair

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `graph`."""
    parser.add_argument(
        "path", type=Path, nargs="?", help="a definition file or a directory of them"
    )
    parser.add_argument(
        "--definition", metavar="ID", help="the chat to draw; required when PATH holds several"
    )
    parser.add_argument(
        "--revision", type=int, metavar="N", help="the revision to draw [the newest in PATH]"
    )
    sides = parser.add_mutually_exclusive_group()
    sides.add_argument(
        "--revisions",
        type=revision_pair,
        metavar="OLD,NEW",
        help="draw what changes between two revisions of the chat in PATH (DOT)",
    )
    sides.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("OLD", "NEW"),
        help="draw what changes from one definition file or directory to another (DOT)",
    )
    parser.add_argument(
        "--format",
        choices=("mermaid", "dot"),
        help="Mermaid stateDiagram-v2 or Graphviz DOT [mermaid; dot for a difference]",
    )


def run(args: argparse.Namespace) -> int:
    """Print the diagram; exit 1 on definition errors, 2 on an ambiguous or unknown id or
    revision, or on a usage mistake."""
    difference = args.revisions is not None or args.compare is not None
    problem = _usage(args, difference)
    if problem:
        print(f"graph: {problem}", file=sys.stderr)
        return 2
    try:
        if args.compare is not None:
            old_side, new_side = (_load(path) for path in args.compare)
            drawn = [_choose(old_side, args.definition), _choose(new_side, args.definition)]
        else:
            definitions = _load(args.path)
            wanted = args.revisions or (args.revision,)
            drawn = [_choose(definitions, args.definition, r) for r in wanted]
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    except _UnchosenError as exc:
        print(f"graph: {exc}", file=sys.stderr)
        return 2
    if difference:
        sys.stdout.write(dot_diff(drawn[0], drawn[1]))
        return 0
    render: Callable[[ChatDefinition], str] = mermaid if args.format != "dot" else dot
    sys.stdout.write(render(drawn[0]))
    return 0


def _usage(args: argparse.Namespace, difference: bool) -> str:
    if difference and args.format == "mermaid":
        return "the difference between revisions is drawn in DOT only (--format dot)"
    if difference and args.revision is not None:
        return "--revision draws one revision; leave it out with --revisions or --compare"
    if (args.path is None) != (args.compare is not None):
        return "give PATH, or --compare OLD NEW instead"
    return ""


class _UnchosenError(Exception):
    """No single chat (or revision) matches what was asked."""


def _choose(
    definitions: list[ChatDefinition], definition_id: str | None, revision: int | None = None
) -> ChatDefinition:
    """The chat `definition_id` (the only one when None): revision `revision`, else the
    newest."""
    ids = sorted({d.id for d in definitions})
    chosen = [d for d in definitions if definition_id in (None, d.id)]
    if len({d.id for d in chosen}) != 1:
        known = ", ".join(ids) or "none"
        problem = "no definition has this id" if definition_id else "choose one with --definition"
        raise _UnchosenError(f"{problem} (definitions: {known})")
    if revision is None:
        return max(chosen, key=lambda d: d.revision)
    for definition in chosen:
        if definition.revision == revision:
            return definition
    served = ", ".join(str(d.revision) for d in sorted(chosen, key=lambda d: d.revision))
    raise _UnchosenError(f"{chosen[0].id} has no revision {revision} (revisions: {served})")


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
