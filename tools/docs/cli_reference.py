"""The command-line reference, read from `agentskit-chat`'s own argument parser.

Every flag of every subcommand comes from the parser, with its help text and its default
as a clean environment gives it. Which environment variable sets a flag is found by
building the parser again with each candidate variable set: the flag whose default
changes is the one the variable feeds. Variables read only at run time (a token, a key,
a password) are not visible to the parser; RUN_TIME lists them, and the tests check that
every `AGENTSKIT_CHAT_*` name in the server's source is on one list or the other.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from agentskit_chat import cli

PREFIX = "AGENTSKIT_CHAT_"
ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "server" / "agentskit_chat"
PROBE = "3"
"""A value every flag's type accepts (a number, a path, a host name, a list of one)."""

RUN_TIME: dict[str, str] = {
    "AGENTSKIT_CHAT_TOKEN": "the bearer token `chat`, `demo` and `test --target` send (and the "
    "README's programs); never taken from the command line",
    "AGENTSKIT_CHAT_TOKEN_FILE": "a file holding that token (`--token-file`)",
    "AGENTSKIT_CHAT_TARGET": "the server `demo` (`--target`) and the client programs talk to",
    "AGENTSKIT_CHAT_DIGEST_KEY": "the digest key itself, in hex; wins over a key file. Every "
    "replica sharing a store must have the same key",
    "AGENTSKIT_CHAT_DIGEST_KEY_FILE": "a file holding the digest key (`--digest-key-file`)",
    "AGENTSKIT_CHAT_STORE_PASSWORD": "the PostgreSQL password, used when no password file is "
    "named; else libpq's `PGPASSWORD` and `~/.pgpass` apply",
}
"""Variables the commands read when they run, not when the parser is built."""

NOTES: dict[str, str] = {
    "--max-input-bytes": "size of one message's content; larger input is RESOURCE_EXHAUSTED "
    "(`limit` = `input_bytes`)",
    "--max-history-messages": "messages one history may hold (`limit` = `history_messages`)",
    "--max-request-bytes": "size of one request; gRPC itself refuses a larger one "
    "(RESOURCE_EXHAUSTED), the HTTP listener with 413",
}
"""Descriptions of flags the parser gives no help text."""


@dataclass(frozen=True, slots=True)
class Flag:
    """One option of one command."""

    command: str
    names: tuple[str, ...]
    metavar: str
    default: str
    help: str
    variable: str | None = None


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """The process environment without any AGENTSKIT_CHAT_* variable, plus `values`."""
    saved = dict(os.environ)
    try:
        for name in [n for n in os.environ if n.startswith(PREFIX)]:
            del os.environ[name]
        os.environ.update(values)
        os.environ["COLUMNS"] = "100"  # argparse wraps usage lines to the terminal's width
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def commands(root: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers by name, in declaration order."""
    (subparsers,) = (a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    return dict(subparsers.choices)


def _defaults(root: argparse.ArgumentParser) -> dict[tuple[str, str], object]:
    return {
        (name, action.dest): action.default
        for name, command in commands(root).items()
        for action in command._actions
    }


def source_variables() -> set[str]:
    """Every AGENTSKIT_CHAT_* name the server's source spells out, or builds with
    `_env("NAME")` / `_env_path("NAME")`."""
    found: set[str] = set()
    for path in SOURCE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        found.update(re.findall(rf"\b{PREFIX}[A-Z0-9_]*[A-Z0-9]\b", text))
        found.update(PREFIX + n for n in re.findall(r"_env(?:_path)?\(\s*\"([A-Z_]+)\"", text))
    return found


def _feeds(candidates: set[str]) -> dict[tuple[str, str], str]:
    """(command, dest) -> the variable that sets that flag's default."""
    with _environment():
        clean = _defaults(cli.parser())
    feeds: dict[tuple[str, str], str] = {}
    for variable in sorted(candidates):
        with _environment(**{variable: PROBE}):
            try:
                probed = _defaults(cli.parser())
            except ValueError:  # the parser rejects the probe: it reads it, so try a word
                continue
        for key, value in probed.items():
            if value != clean.get(key):
                feeds.setdefault(key, variable)
    return feeds


def _shown(value: object) -> str:
    if value is None or value is False or value == [] or value is argparse.SUPPRESS:
        return ""
    if value is True:
        return "on"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def flags() -> list[Flag]:
    """Every option of every subcommand (help and version left out)."""
    feeds = _feeds(source_variables())
    with _environment():
        root = cli.parser()
    found = []
    for name, command in commands(root).items():
        formatter = command._get_formatter()
        for action in command._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            text = formatter._expand_help(action) if action.help else ""
            text = text or NOTES.get(action.option_strings[0], "")
            metavar = ""
            if action.nargs != 0:
                metavar = formatter._format_args(action, action.dest.upper())
            found.append(
                Flag(
                    name,
                    tuple(action.option_strings),
                    metavar,
                    _shown(action.default),
                    text,
                    feeds.get((name, action.dest)),
                )
            )
    return found


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def cli_page() -> str:
    """docs/reference/cli.md."""
    with _environment():
        root = cli.parser()
    listed = flags()
    lines = [
        "# Command line",
        "",
        "Generated from `agentskit-chat`'s argument parser when the site is built, so it "
        "lists exactly what the installed command accepts. Defaults are those of a clean "
        "environment; a flag with a variable takes its default from that variable when it "
        "is set (the flag wins). [Environment variables](environment.md) lists them all.",
        "",
        "```text",
        root.format_usage().strip(),
        "```",
        "",
    ]
    for name, command in commands(root).items():
        lines += [f"## `{name}`", "", "```text", command.format_usage().strip(), "```", ""]
        positionals = [a for a in command._actions if not a.option_strings]
        for action in positionals:
            lines.append(f"- `{action.metavar or action.dest}`: {_cell(action.help or '')}")
        if positionals:
            lines.append("")
        lines += [
            "| flag | value | default | variable | what it does |",
            "| --- | --- | --- | --- | --- |",
        ]
        for flag in (f for f in listed if f.command == name):
            variable = f"`{flag.variable}`" if flag.variable else ""
            default = f"`{_cell(flag.default)}`" if flag.default else ""
            metavar = f"`{_cell(flag.metavar)}`" if flag.metavar else ""
            lines.append(
                f"| `{', '.join(flag.names)}` | {metavar} | {default} | {variable} "
                f"| {_cell(flag.help)} |"
            )
        lines.append("")
        if command.epilog:
            lines += ["```text", command.epilog.strip(), "```", ""]
    return "\n".join(lines)


def environment_page() -> str:
    """docs/reference/environment.md."""
    listed = [f for f in flags() if f.variable]
    by_variable: dict[str, list[Flag]] = {}
    for flag in listed:
        by_variable.setdefault(str(flag.variable), []).append(flag)
    lines = [
        "# Environment variables",
        "",
        "Generated when the site is built: a variable is listed with the flag it sets when "
        "building `agentskit-chat`'s parser with the variable set changes that flag's default "
        "(a flag given on the command line wins). Comma-separated values fill repeatable "
        "flags. The standard `OTEL_*` variables are described in "
        "[Telemetry](../explanation/telemetry.md#configuration).",
        "",
        "## Flags' variables",
        "",
        "| variable | flag | commands | what it does |",
        "| --- | --- | --- | --- |",
    ]
    for variable in sorted(by_variable):
        found = by_variable[variable]
        names = sorted({f.names[0] for f in found})
        used = ", ".join(f"`{c}`" for c in dict.fromkeys(f.command for f in found))
        lines.append(
            f"| `{variable}` | {', '.join(f'`{n}`' for n in names)} | {used} "
            f"| {_cell(found[0].help)} |"
        )
    lines += [
        "",
        "## Read at run time",
        "",
        "These are read when a command runs, so secrets stay off the command line:",
        "",
        "| variable | what it holds |",
        "| --- | --- |",
    ]
    lines += [
        f"| `{name}` | {_cell(text)} |"
        for name, text in sorted(RUN_TIME.items())
        if name not in by_variable
    ]
    lines.append("")
    return "\n".join(lines)


def documented_variables() -> set[str]:
    """The variables the environment page lists."""
    return {str(f.variable) for f in flags() if f.variable} | set(RUN_TIME)
