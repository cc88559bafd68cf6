"""No two modules of the server package need each other: its import graph has no cycle.

Every import statement counts, including those for type checking only and those inside
functions: a module that imports another only to name its types, or only when called,
still cannot be understood, changed or tested without it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import agentskit_chat

PACKAGE = "agentskit_chat"
ROOT = Path(agentskit_chat.__file__).resolve().parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def imported(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The package's modules that `name` (at `path`) imports, wherever the statement is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            if not base.startswith(PACKAGE):
                continue
            for alias in node.names:
                child = f"{base}.{alias.name}"
                if child in known:
                    yield child  # `from package import submodule`
                elif base in known:
                    yield base


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {
        name: {target for target in imported(name, path, known) if target != name}
        for name, path in known.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_checker_sees_relative_type_checking_and_function_imports() -> None:
    graph = import_graph()
    assert "agentskit_chat.service._observer" in graph["agentskit_chat.service._progress"]
    assert graph["agentskit_chat.telemetry"] >= {"agentskit_chat.telemetry._setup"}


def test_no_module_of_the_server_needs_one_that_needs_it() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)
