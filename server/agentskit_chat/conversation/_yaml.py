"""A safe YAML loader with YAML 1.2 booleans and duplicate-key detection."""

from __future__ import annotations

import re
from typing import Any

import yaml


class DuplicateKeyError(ValueError):
    """A mapping repeats a key."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader where only true/false are booleans (so `on:` stays a key) and keys are unique."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str | int | float | bool) and key in seen:
                line = key_node.start_mark.line + 1
                raise DuplicateKeyError(f"duplicate key {key!r} at line {line}")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def load_yaml(text: str) -> Any:
    """Parse one YAML document; raises yaml.YAMLError or DuplicateKeyError."""
    return yaml.load(text, Loader=_StrictLoader)
