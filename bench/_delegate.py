"""The fake model server and a `serve` that sends every message to it, as child processes:
what the benchmarks of model calls (model.py, tools.py, openai_front.py) run against.

`serve` keeps its sessions on the memory store, so that the figures are those of the
service and the model, not of a database.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ._servers import ROOT, Server, running

MODEL: Final = "bench-model"
"""The model the definition asks the fake model for."""
DEFINITION: Final = """\
id: delegate
revision: 1
description: Every message goes to the model; used by the benchmarks of model calls.
model: {{adapter: openai, base_url: "{base_url}", model: {model}}}
conversation:
  initial: chatting
  states: {{chatting: {{}}}}
"""


@dataclass(frozen=True, slots=True)
class Delegation:
    """The running fake model and the `serve` whose `delegate` definition calls it."""

    base_url: str
    """The fake model's OpenAI base URL (`http://HOST:PORT/v1`), for calling it directly."""
    service: Server


def serve_env() -> dict[str, str]:
    """This process's environment without any `serve` setting, so that only the options
    given here configure it."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AGENTSKIT_CHAT_")}


async def delegating(
    stack: AsyncExitStack,
    prefix: str,
    model_options: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    http: bool = False,
    definitions: Mapping[str, str] | None = None,
) -> Delegation:
    """Start the fake model (with `model_options`) and `serve` (with an HTTP listener too
    when `http`), both stopped with `stack`, in `env` (by default `serve_env()`); their
    files in a temporary folder named with `prefix`. `definitions`: more definition files
    (name -> text) beside `delegate`, with `{base_url}` and `{model}` filled in."""
    env = serve_env() if env is None else env
    work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix)))
    fake = [sys.executable, "-m", "agentskit_chat.fakemodel", "--listen", "127.0.0.1:0"]
    model = await stack.enter_async_context(
        running("fake model", [*fake, *model_options], cwd=ROOT, env=env)
    )
    base_url = f"{model.address}/v1"
    directory = work / "definitions"
    directory.mkdir()
    files = {"delegate.yaml": DEFINITION, **(definitions or {})}
    for name, text in files.items():
        (directory / name).write_text(text.format(base_url=base_url, model=MODEL), "utf-8")
    serve = [sys.executable, "-m", "agentskit_chat.cli", "serve", "--listen", "127.0.0.1:0"]
    serve += ["--definitions", str(directory), "--store", "memory://"]
    serve += ["--state-dir", str(work), "--drain-delay", "0"]
    if http:
        serve += ["--http-listen", "127.0.0.1:0"]
    service = await stack.enter_async_context(running("serve", serve, cwd=ROOT, env=env))
    return Delegation(base_url, service)
