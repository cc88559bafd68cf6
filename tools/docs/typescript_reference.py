"""The TypeScript client's reference, read from its source (client/typescript/src).

The package's entry points (`index.ts`, `node.ts`) say which names are public; each is
looked up in the module it comes from and shown with its declaration and its TSDoc
comment, and for an interface or a class, each documented member. Names re-exported from
the generated contract code link to the contract's reference instead. (TypeDoc does not
support the TypeScript version the client builds with, and the declarations are plain
enough to read directly.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "client" / "typescript" / "src"
ENTRY_POINTS = {"@agentskit/chat-client": "index.ts", "@agentskit/chat-client/node": "node.ts"}

_REEXPORT = re.compile(r"export\s+(?:type\s+)?\{(?P<names>[^}]*)\}\s+from\s+\"(?P<module>[^\"]+)\"")
_DECLARATION = re.compile(
    r"export\s+(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?"
    r"(?P<kind>interface|class|function|type|const|enum)\s+(?P<name>\w+)"
)


@dataclass
class Member:
    signature: str
    doc: str


@dataclass
class Declaration:
    """One exported name of a module."""

    name: str
    kind: str
    signature: str
    doc: str
    members: list[Member] = field(default_factory=list)


def _mask(text: str) -> str:
    """`text` with comments, strings and template literals blanked (same length), so that
    braces and semicolons inside them do not count."""
    out = list(text)
    i = 0
    while i < len(text):
        two = text[i : i + 2]
        if two in ("//", "/*"):
            end = text.find("\n" if two == "//" else "*/", i + 2)
            end = len(text) if end < 0 else end + (0 if two == "//" else 2)
        elif text[i] in "\"'`":
            quote, end = text[i], i + 1
            while end < len(text) and text[end] != quote:
                end += 2 if text[end] == "\\" else 1
            end += 1
        else:
            i += 1
            continue
        for j in range(i, min(end, len(text))):
            if out[j] != "\n":
                out[j] = " "
        i = end
    return "".join(out)


def _doc_before(text: str, start: int) -> str:
    """The TSDoc comment ending right before `start` (whitespace between), cleaned."""
    before = text[:start].rstrip()
    if not before.endswith("*/"):
        return ""
    opening = before.rfind("/**")
    if opening < 0:
        return ""
    body = before[opening + 3 : -2]
    lines = [re.sub(r"^\s*\* ?", "", line) for line in body.splitlines()]
    doc = "\n".join(lines).strip()
    return re.sub(r"\{@link\s+([^}|\s]+)\s*(?:\|\s*([^}]+))?\}", lambda m: f"`{m[2] or m[1]}`", doc)


def _body_end(masked: str, opening: int) -> int:
    depth = 0
    for i in range(opening, len(masked)):
        if masked[i] == "{":
            depth += 1
        elif masked[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(masked)


def _head(text: str, masked: str, start: int, kind: str) -> tuple[str, int | None]:
    """The declaration's signature and, for a braced body, where the body opens."""
    if kind in ("type", "const"):
        end = masked.find(";", start)
        return " ".join(text[start:end].split()), None
    paren = 0
    for i in range(start, len(masked)):
        char = masked[i]
        if char in "(<[":
            paren += 1
        elif char in ")>]" and not (char == ">" and masked[i - 1] == "="):
            paren -= 1
        elif char == "{" and paren == 0 and not masked[start:i].rstrip().endswith(":"):
            return " ".join(text[start:i].split()), i
        elif char == ";" and paren == 0:
            return " ".join(text[start:i].split()), None
    return " ".join(text[start:].split()), None


def _members(text: str, masked: str, opening: int, kind: str) -> list[Member]:
    """The public members at depth one of a class or interface body."""
    end = _body_end(masked, opening)
    members, depth, i = [], 0, opening + 1
    line_start = i
    while i < end:
        char = masked[i]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "\n" and depth == 0:
            line_start = i + 1
        if depth == 0 and i == line_start and masked[i:end].strip():
            skip = len(masked[i:end]) - len(masked[i:end].lstrip())
            member_start = i + skip
            doc = _doc_before(text, member_start)
            head, _ = _head(text, masked, member_start, "member")
            name = re.split(r"[(:<=]", head, maxsplit=1)[0]
            public = "#" not in name and not re.match(r"(?:private|protected)\b", head)
            if public and head:
                members.append(Member(_tidy(head.rstrip(";")), doc))
            i = member_start + max(1, len(head)) if head else i + 1
            continue
        i += 1
    return members


def _tidy(signature: str) -> str:
    return re.sub(r",\s*\)", ")", re.sub(r"\(\s+", "(", signature))


def declarations(module: Path) -> dict[str, Declaration]:
    """The exported declarations of one module by name."""
    text = module.read_text(encoding="utf-8")
    masked = _mask(text)
    found: dict[str, Declaration] = {}
    for match in _DECLARATION.finditer(masked):
        kind, name = match["kind"], match["name"]
        signature, opening = _head(text, masked, match.start(), kind)
        signature = signature.removeprefix("export ")
        members = _members(text, masked, opening, kind) if opening is not None else []
        if kind == "function" and opening is not None:
            members = []
        found[name] = Declaration(name, kind, signature, _doc_before(text, match.start()), members)
    return found


def public_names(entry: str) -> list[tuple[str, str]]:
    """(name, module) for every name the entry point exports, in its order; the module is
    a path relative to src, or a package name."""
    text = (SOURCE / entry).read_text(encoding="utf-8")
    names = []
    for match in _REEXPORT.finditer(_strip_comments(text)):
        for name in match["names"].split(","):
            name = name.strip().removeprefix("type ").strip()
            if name:
                names.append((name, match["module"]))
    names += [(d.name, entry) for d in declarations(SOURCE / entry).values()]
    return names


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", "", text)


def _source(module: str) -> Path | None:
    if not module.startswith("./"):
        return None
    return SOURCE / module.removeprefix("./").replace(".js", ".ts")


def typescript_page() -> str:
    """docs/reference/typescript-client.md."""
    lines = [
        "# TypeScript client",
        "",
        "Generated from the TSDoc comments and declarations in `client/typescript/src` when the "
        "site is built: every name the package's entry points export. Types re-exported from "
        "the generated contract code (`Session`, `TurnCompleted`, the enums...) are the "
        "contract's messages: see [the contract](contract.md). The "
        "[TypeScript tutorial](../tutorials/typescript.md) shows the client at work.",
        "",
    ]
    for package, entry in ENTRY_POINTS.items():
        lines += [f"## `{package}`", ""]
        contract, external = [], []
        for name, module in public_names(entry):
            path = SOURCE / entry if module == entry else _source(module)
            if path is None:
                external.append(f"`{name}` (from `{module}`)")
                continue
            if "/gen/" in module:
                contract.append(f"[`{name}`](contract.md#{name.lower()})")
                continue
            declaration = declarations(path).get(name)
            if declaration is None:
                raise LookupError(f"{entry} exports {name} from {module}, which has no such export")
            lines += _render(declaration)
        if contract:
            lines += ["### From the contract", "", ", ".join(contract), ""]
        if external:
            lines += ["### Re-exported", "", ", ".join(external), ""]
    return "\n".join(lines)


def _render(declaration: Declaration) -> list[str]:
    lines = [f"### {declaration.name}", "", "```ts", declaration.signature, "```", ""]
    if declaration.doc:
        lines += [declaration.doc, ""]
    for member in declaration.members:
        lines += [f"- `{member.signature.replace('`', '')}`", ""]
        if member.doc:
            lines += ["    " + line if line else "" for line in member.doc.splitlines()]
            lines.append("")
    return lines
