"""Response templates: `{field}` placeholders, `{{` and `}}` for literal braces, nothing else."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

CONTEXT_FIELDS = frozenset({"message_id", "session_id"})


class TemplateSyntaxError(ValueError):
    """The template text is not well formed."""


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed template: alternating literal text and field names."""

    source: str
    parts: tuple[tuple[bool, str], ...]
    """(is_field, text) pairs in order."""
    fields: frozenset[str] = field(init=False, repr=False, compare=False)
    """Names of all placeholders."""
    literal: str | None = field(init=False, repr=False, compare=False)
    """The rendered text when there are no placeholders, else None."""

    def __post_init__(self) -> None:
        names = frozenset(text for is_field, text in self.parts if is_field)
        object.__setattr__(self, "fields", names)
        object.__setattr__(self, "literal", None if names else "".join(t for _, t in self.parts))

    def render(self, values: Mapping[str, str]) -> str:
        """Substitute every placeholder; a missing value renders as an empty string."""
        if self.literal is not None:
            return self.literal
        return "".join(values.get(text, "") if is_field else text for is_field, text in self.parts)


def parse_template(source: str) -> Template:
    """Parse `source`; raises TemplateSyntaxError on an unbalanced or malformed placeholder."""
    parts: list[tuple[bool, str]] = []
    literal: list[str] = []
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if ch == "{" and source.startswith("{{", i):
            literal.append("{")
            i += 2
        elif ch == "}" and source.startswith("}}", i):
            literal.append("}")
            i += 2
        elif ch == "{":
            end = source.find("}", i + 1)
            name = source[i + 1 : end] if end != -1 else ""
            if end == -1 or not name.isidentifier():
                raise TemplateSyntaxError(f"malformed placeholder at character {i}")
            if literal:
                parts.append((False, "".join(literal)))
                literal = []
            parts.append((True, name))
            i = end + 1
        elif ch == "}":
            raise TemplateSyntaxError(f"single '}}' at character {i}; write '}}}}'")
        else:
            literal.append(ch)
            i += 1
    if literal:
        parts.append((False, "".join(literal)))
    return Template(source=source, parts=tuple(parts))
