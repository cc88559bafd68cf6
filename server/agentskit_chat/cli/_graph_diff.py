"""The difference between two revisions of a chat as one Graphviz DOT diagram.

The newer revision is drawn, and the older one over it, in the newer one's names: when
the newer revision declares a migration from the older, its state and route maps say what
an old name is now. Then:

- states, transitions, routes and actions only the newer revision has are green and bold
  (`+route` in a label);
- those only the older one has are red and dashed (`-route`), drawn between the states
  they join in the newer revision where those remain, else between the old ones;
- a state or route the migration renames is blue: the route as `old→new`, the state with
  its old name beside it and a dashed blue `migrates` edge from a dashed node of the old
  name, as the migration's state map moves sessions;
- the rest is drawn as `graph` draws a single revision.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agentskit_chat.conversation import ChatDefinition, Migration

ADDED = "#1a7f37"
REMOVED = "#cf222e"
RENAMED = "#0969da"


@dataclass(frozen=True, slots=True)
class _Names:
    """The older revision's names in the newer one's terms (identity without a migration)."""

    migration: Migration | None

    def state(self, name: str) -> str:
        return name if self.migration is None else self.migration.state(name)

    def route(self, route_id: str) -> str | None:
        return route_id if self.migration is None else self.migration.route(route_id)


def dot_diff(old: ChatDefinition, new: ChatDefinition) -> str:
    """The DOT text of what changes from `old` to `new` (see the module documentation),
    ending with a newline."""
    names = _Names(new.migrations.get(old.revision))
    lines = [
        f"digraph {_quoted(f'{new.id} {old.revision} to {new.revision}')} {{",
        "  rankdir=TB;",
        '  node [shape=box, style=rounded, fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
        f'  fontname="Helvetica"; labelloc=b; label=<{_legend(old, new, names)}>;',
        '  "__start" [shape=point, width=0.15, label=""];',
    ]
    lines.extend(_states(old, new, names))
    lines.extend(_transitions(old, new, names))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _legend(old: ChatDefinition, new: ChatDefinition, names: _Names) -> str:
    how = "renamed by the migration" if names.migration else "no migration declared"
    return (
        f"{_html(new.id)}: revision {old.revision} → {new.revision}<BR/>"
        f'<FONT COLOR="{ADDED}">added</FONT>  '
        f'<FONT COLOR="{REMOVED}">removed</FONT>  '
        f'<FONT COLOR="{RENAMED}">{how}</FONT>'
    )


def _new_node(name: str) -> str:
    return _quoted(f"new:{name}")


def _old_node(name: str) -> str:
    return _quoted(f"old:{name}")


def _states(old: ChatDefinition, new: ChatDefinition, names: _Names) -> list[str]:
    old_states, new_states = old.conversation.states, new.conversation.states
    lines: list[str] = []
    for name, state in new_states.items():
        sources = [o for o in old_states if names.state(o) == name]
        renamed = [o for o in sources if o != name]
        title = f"<B>{_html(name)}</B>"
        attributes = ""
        if not sources:
            attributes = f', color="{ADDED}", fontcolor="{ADDED}", penwidth=2'
        elif name not in sources:
            was = _html(", ".join(renamed))
            title += f'<BR/><FONT POINT-SIZE="10">was {was}</FONT>'
            attributes = f', color="{RENAMED}", fontcolor="{RENAMED}"'
        before = [action for o in sources for action in old_states[o].actions]
        label = title + _actions(state.actions, before if sources else state.actions)
        lines.append(f"  {_new_node(name)} [label=<{label}>{attributes}];")
        for source in renamed:
            lines.append(
                f"  {_old_node(source)} [label=<{_html(source)}<BR/>"
                f'<FONT POINT-SIZE="10">revision {old.revision}</FONT>>, style="rounded,dashed", '
                f'color="{RENAMED}", fontcolor="{RENAMED}"];'
            )
            lines.append(
                f'  {_old_node(source)} -> {_new_node(name)} [label="migrates", '
                f'style=dashed, color="{RENAMED}", fontcolor="{RENAMED}", arrowhead=empty];'
            )
    for name, state in old_states.items():
        if names.state(name) not in new_states:
            label = f"<B>{_html(name)}</B>" + _actions((), state.actions)
            lines.append(
                f'  {_old_node(name)} [label=<{label}>, style="rounded,dashed", '
                f'color="{REMOVED}", fontcolor="{REMOVED}"];'
            )
    return lines


def _actions(now: Iterable[str], before: Iterable[str]) -> str:
    now, before = list(now), list(before)
    shown = [_html(a) for a in now if a in before]
    shown += [f'<FONT COLOR="{ADDED}">+{_html(a)}</FONT>' for a in now if a not in before]
    shown += [
        f'<FONT COLOR="{REMOVED}">-{_html(a)}</FONT>' for a in dict.fromkeys(before) if a not in now
    ]
    if not shown:
        return ""
    return f'<BR/><FONT POINT-SIZE="10">actions: {", ".join(shown)}</FONT>'


def _firing(definition: ChatDefinition) -> dict[tuple[str, str], list[str]]:
    spec = definition.conversation
    return {
        (name, event): [
            route.id
            for route in spec.routes
            if route.event == event and (route.states is None or name in route.states)
        ]
        for name, state in spec.states.items()
        for event in state.on
    }


def _transitions(old: ChatDefinition, new: ChatDefinition, names: _Names) -> list[str]:
    new_states = new.conversation.states
    old_initial = names.state(old.conversation.initial)
    lines = [f'  "__start" -> {_new_node(new.conversation.initial)};']
    if old_initial != new.conversation.initial:
        target = _new_node(old_initial) if old_initial in new_states else _old_node(old_initial)
        lines.append(f'  "__start" -> {target} [style=dashed, color="{REMOVED}"];')
    before: dict[tuple[str, str, str], list[tuple[str, str | None]]] = {}
    old_firing = _firing(old)
    for name, state in old.conversation.states.items():
        for event, target in state.on.items():
            key = (names.state(name), event, names.state(target))
            routes = [(r, names.route(r)) for r in old_firing[(name, event)]]
            before.setdefault(key, []).extend(routes)
    new_firing = _firing(new)
    for name, state in new_states.items():
        for event, target in state.on.items():
            key = (name, event, target)
            old_routes = before.pop(key, None)
            label = _label(event, new_firing[(name, event)], old_routes or [])
            style = "" if old_routes is not None else f', color="{ADDED}", penwidth=2'
            if old_routes is None:
                label = f'<FONT COLOR="{ADDED}">{label}</FONT>'
            lines.append(f"  {_new_node(name)} -> {_new_node(target)} [label=<{label}>{style}];")
    for (source, event, target), routes in before.items():
        removed = [(r, None) for r, _ in routes]  # every route of a gone transition is gone
        label = f'<FONT COLOR="{REMOVED}">{_label(event, [], removed)}</FONT>'
        ends = [_new_node(s) if s in new_states else _old_node(s) for s in (source, target)]
        lines.append(
            f'  {ends[0]} -> {ends[1]} [label=<{label}>, style=dashed, color="{REMOVED}"];'
        )
    return lines


def _label(event: str, now: Sequence[str], before: Sequence[tuple[str, str | None]]) -> str:
    """The event and its routes: kept, `+added`, `old→new` renamed, `-removed`."""
    parts: list[str] = []
    for route in now:
        sources = [old_id for old_id, mapped in before if mapped == route]
        if not sources:
            parts.append(f'<FONT COLOR="{ADDED}">+{_html(route)}</FONT>')
        elif route in sources:
            parts.append(_html(route))
        else:
            renamed = f"{_html(sources[0])}→{_html(route)}"
            parts.append(f'<FONT COLOR="{RENAMED}">{renamed}</FONT>')
    parts.extend(
        f'<FONT COLOR="{REMOVED}">-{_html(old_id)}</FONT>'
        for old_id, mapped in before
        if mapped is None or mapped not in now
    )
    if not parts:
        return _html(event)
    return f"{_html(event)} ({', '.join(parts)})"


def _html(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def _quoted(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'
