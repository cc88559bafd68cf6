"""The documentation site builds in strict mode, fails on what strict mode must catch, and
its generated reference pages list everything the code they come from declares."""

from __future__ import annotations

import argparse
import functools
import re
import shutil
from pathlib import Path

import pytest
from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import Abort

import agentskit_chat_client
from agentskit_chat import cli
from tools.docs import (
    cli_reference,
    contract_reference,
    go_reference,
    hooks,
    typescript_reference,
)

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "mkdocs.yml"
DOCS = ROOT / "docs"


def build_site(site: Path, docs: Path = DOCS) -> None:
    """mkdocs build of the project's configuration (strict, as `make docs`) into `site`."""
    config = load_config(str(CONFIG), docs_dir=str(docs), site_dir=str(site), strict=True)
    build(config)


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Generated pages as stubs, for the builds that test the strict checks (quicker)."""
    for module, name in (
        (cli_reference, "cli_page"),
        (cli_reference, "environment_page"),
        (contract_reference, "contract_page"),
        (typescript_reference, "typescript_page"),
        (go_reference, "go_page"),
    ):
        monkeypatch.setattr(module, name, lambda name=name: f"# {name}\n\n## `serve`\n")


@pytest.fixture
def docs_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "docs"
    shutil.copytree(DOCS, copy)
    return copy


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    build_site(site)
    return site


def test_the_site_builds_with_every_reference(site: Path) -> None:
    for page, expected in {
        "index.html": "deterministic routes",
        "reference/cli.html": "--max-watchers-per-session",
        "reference/environment.html": "AGENTSKIT_CHAT_LISTEN",
        "reference/contract.html": "WatchSession",
        "reference/python-client.html": "ChatClient",
        "reference/typescript-client.html": "createNodeTransport",
        "reference/security.html": "Threat model",
        "reference/deploy.html": "PodDisruptionBudget",
    }.items():
        assert expected in (site / page).read_text(encoding="utf-8"), page


def test_every_public_name_of_the_python_client_is_on_its_page(site: Path) -> None:
    page = (site / "reference" / "python-client.html").read_text(encoding="utf-8")
    for name in agentskit_chat_client.__all__:
        assert f'id="agentskit_chat_client.{name}"' in page, name


def test_the_site_fetches_nothing_from_the_network(site: Path) -> None:
    """No web fonts or CDN assets: the pages work offline as they were built."""
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "fonts.googleapis.com" not in text, page
        assert "fonts.gstatic.com" not in text, page
        assert not re.search(r"<(?:script|link)[^>]+(?:src|href)=\"https?://", text), page


def test_a_page_missing_from_the_nav_fails(stubbed: None, docs_copy: Path, tmp_path: Path) -> None:
    (docs_copy / "how-to" / "orphan.md").write_text("# Orphan\n", encoding="utf-8")
    with pytest.raises(Abort, match="warnings in strict mode"):
        build_site(tmp_path / "site", docs_copy)


@pytest.mark.parametrize(
    "link", ["[gone](how-to/gone.md)", "[anchor](how-to/tests.md#no-such-anchor)"]
)
def test_a_broken_link_fails(stubbed: None, docs_copy: Path, tmp_path: Path, link: str) -> None:
    index = docs_copy / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + f"\n{link}\n", encoding="utf-8")
    with pytest.raises(Abort, match="warnings in strict mode"):
        build_site(tmp_path / "site", docs_copy)


def test_framework_pages_join_the_nav_when_they_exist(
    stubbed: None, docs_copy: Path, tmp_path: Path
) -> None:
    """Each framework page in docs/ is listed under Frameworks, in FRAMEWORK_PAGES' order,
    without an edit of mkdocs.yml: here a page added to a copy of the docs."""
    missing = [p for p in hooks.FRAMEWORK_PAGES.values() if not (docs_copy / p).exists()]
    for page in missing or ["openai.md"]:
        (docs_copy / page).write_text(f"# {page}\n", encoding="utf-8")
    assert len(hooks.framework_nav(docs_copy)) == len(hooks.FRAMEWORK_PAGES)
    build_site(tmp_path / "site", docs_copy)
    overview = (tmp_path / "site" / "frameworks.html").read_text(encoding="utf-8")
    places = [overview.index(f'href="{p[:-3]}.html"') for p in hooks.FRAMEWORK_PAGES.values()]
    assert places == sorted(places)


@functools.cache
def generated(name: str) -> str:
    return dict(hooks.GENERATED.items())[name]()


def test_every_flag_of_every_command_is_on_the_cli_page() -> None:
    page = generated("reference/cli.md")
    for name, command in cli_reference.commands(cli.parser()).items():
        assert f"## `{name}`" in page
        for action in command._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert f"`{option}" in page or f", {option}" in page, (name, option)
    for flag in cli_reference.NOTES:
        assert any(flag in f.names for f in cli_reference.flags()), f"NOTES names {flag}"


def test_every_variable_the_server_reads_is_on_the_environment_page() -> None:
    page = generated("reference/environment.md")
    variables = cli_reference.source_variables()
    assert {"AGENTSKIT_CHAT_LISTEN", "AGENTSKIT_CHAT_TOKEN"} <= variables
    for variable in variables:
        assert f"`{variable}`" in page, variable
    assert set(cli_reference.RUN_TIME) <= variables, "RUN_TIME names a variable nothing reads"


def test_a_variable_is_found_through_the_flag_it_sets() -> None:
    feeds = {(f.command, f.names[0]): f.variable for f in cli_reference.flags()}
    assert feeds[("serve", "--listen")] == "AGENTSKIT_CHAT_LISTEN"
    assert feeds[("serve", "--workers")] == "AGENTSKIT_CHAT_WORKERS"
    assert feeds[("migrate", "--store")] == "AGENTSKIT_CHAT_STORE"
    assert feeds[("serve", "--max-input-bytes")] is None


def test_every_method_message_and_enum_value_is_on_the_contract_page() -> None:
    page = generated("reference/contract.md")
    for name in contract_reference.contract_names():
        assert f"`{name}`" in page or f"### {name} " in page or f".{name} " in page, name
    assert "buf:lint" not in page
    # the comment of a field, as the contract file has it
    assert "The last message to keep; every later message is dropped." in page


def test_every_exported_typescript_name_is_on_its_page() -> None:
    page = generated("reference/typescript-client.md")
    for entry in typescript_reference.ENTRY_POINTS.values():
        names = typescript_reference.public_names(entry)
        assert len(names) > 20 or entry == "node.ts", names
        for name, _ in names:
            assert f"### {name}\n" in page or f"[`{name}`]" in page or f"`{name}`" in page, name
    assert "#follow" not in page, "a private member is listed"


def test_the_go_page_holds_the_go_doc_of_the_client() -> None:
    page = generated("reference/go-client.md")
    if shutil.which("go") is None:
        assert "Go was not available" in page
    else:
        assert "func Dial(" in page
        assert "type TurnStream struct" in page
