"""MkDocs hooks of the documentation site (mkdocs.yml `hooks:`).

- The reference pages that must not drift are generated at build time, from the code they
  describe: the command line and its environment variables (the argument parser), the
  contract (the proto comments), the TypeScript and Go clients (their source and doc
  comments). The Python client's page uses mkdocstrings on its docstrings.
- The "Frameworks" section of the navigation lists each framework front's page that
  exists (FRAMEWORK_PAGES, in order), so a branch that adds one needs no nav edit and the
  site builds without them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mkdocs.config.defaults import MkDocsConfig  # noqa: E402
from mkdocs.structure.files import File, Files  # noqa: E402

from tools.docs import (  # noqa: E402
    cli_reference,
    contract_reference,
    go_reference,
    typescript_reference,
)

GENERATED: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_reference.cli_page,
    "reference/environment.md": cli_reference.environment_page,
    "reference/contract.md": contract_reference.contract_page,
    "reference/typescript-client.md": typescript_reference.typescript_page,
    "reference/go-client.md": go_reference.go_page,
}
"""Pages written at build time: where, and what writes them."""

FRAMEWORKS_SECTION = "Frameworks"
FRAMEWORK_PAGES: dict[str, str] = {
    "AG-UI": "ag-ui.md",
    "AI SDK": "ai-sdk.md",
    "OpenAI": "openai.md",
    "React renderer": "react.md",
}
"""The framework fronts' pages, listed under Frameworks when they exist in docs/."""


def framework_nav(docs_dir: Path) -> list[dict[str, str]]:
    """The entries the Frameworks section gains: each framework page that exists."""
    return [{title: page} for title, page in FRAMEWORK_PAGES.items() if (docs_dir / page).is_file()]


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Append the framework pages that exist to the Frameworks section of the nav."""
    for entry in config.nav or []:
        if isinstance(entry, dict) and FRAMEWORKS_SECTION in entry:
            section: list[Any] = entry[FRAMEWORKS_SECTION]
            listed = {next(iter(item.values())) for item in section if isinstance(item, dict)}
            section += [
                item
                for item in framework_nav(Path(config.docs_dir))
                if next(iter(item.values())) not in listed
            ]
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated reference pages."""
    for uri, write in GENERATED.items():
        if files.get_file_from_path(uri) is not None:
            raise ValueError(f"docs/{uri} is generated at build time: remove the file")
        files.append(File.generated(config, uri, content=write()))
    return files
