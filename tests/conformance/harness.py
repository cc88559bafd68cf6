"""The live server every conformance runner talks to.

The fake model answers as the scenarios' `model` sections say, and `agentskit-chat serve`
serves the example definitions plus `definitions/` on SQLite, with one bearer token per
run (a language, or a language over one of the HTTP listener's protocols) so the runs never
see each other's sessions.

`python -m tests.conformance.harness` starts it alone and prints the environment a runner
needs, until Ctrl-C.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from agentskit_chat.fakemodel import (
    Call,
    Ending,
    FakeModelServer,
    HttpResponse,
    Reply,
    Script,
    ToolCalls,
)
from tests.cli.fixtures.serving import EXAMPLES, LISTENING, REPO

CORPUS = Path(__file__).resolve().parent
SCENARIOS = CORPUS / "scenarios"
DEFINITIONS = CORPUS / "definitions"
LANGUAGES = ("python", "typescript", "go")
PROTOCOLS: Final = {"typescript": ("connect", "grpcweb")}
"""The runs of a language over the HTTP listener, beside its run over gRPC."""
RUNS: Final = (
    *LANGUAGES,
    *(f"{language}-{protocol}" for language, names in PROTOCOLS.items() for protocol in names),
)
"""Every run of the corpus, each with a tenant of its own (and a rate-limited one)."""
OTHER_TENANTS: Final = ("curl",)
"""Tenants of the corpus's other tests (test_curl.py)."""
STARTUP_TIMEOUT = 60.0
_ENDINGS = {"hold": Ending.HOLD, "stall": Ending.STALL, "drop": Ending.DROP}
HTTP_LISTENING: Final = re.compile(r"agentskit-chat http listening on 127\.0\.0\.1:(\d+) \(")


class CorpusError(Exception):
    """A scenario file the runners cannot use."""


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    body: Mapping[str, Any]


def load_scenarios(directory: Path = SCENARIOS) -> list[Scenario]:
    """Every scenario, sorted by name."""
    scenarios = []
    for path in sorted(directory.glob("*.yaml")):
        body = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(body, dict) or not isinstance(body.get("steps"), list):
            raise CorpusError(f"{path.name}: a scenario is a mapping with a list of steps")
        scenarios.append(Scenario(path.stem, body))
    return scenarios


def model_answers(scenarios: list[Scenario]) -> dict[str, Script]:
    """The fake model's scripts, keyed by the user text that asks for them."""
    answers: dict[str, Script] = {}
    owners: dict[str, str] = {}
    for scenario in scenarios:
        for text, spec in (scenario.body.get("model") or {}).items():
            if text in answers:
                raise CorpusError(
                    f"{scenario.name}: model input {text!r} is already used by {owners[text]}"
                )
            answers[text] = _script(scenario.name, spec)
            owners[text] = scenario.name
    return answers


def _script(name: str, spec: Mapping[str, Any]) -> Script:
    if "status" in spec:
        return HttpResponse(int(spec["status"]), '{"error": {"message": "scripted failure"}}')
    if "tool_calls" in spec:
        return _tool_calls(name, spec)
    chunks = tuple(str(chunk) for chunk in spec.get("chunks", ()))
    if not chunks:
        raise CorpusError(f"{name}: a model reply needs chunks or a status")
    ending = spec.get("ending", "done")
    if ending != "done" and ending not in _ENDINGS:
        raise CorpusError(f"{name}: unknown model ending {ending!r}")
    return Reply(
        chunks=chunks,
        delay=float(spec.get("delay_ms", 0)) / 1000,
        ending=_ENDINGS.get(ending, Ending.DONE),
    )


def _tool_calls(name: str, spec: Mapping[str, Any]) -> ToolCalls:
    calls = spec["tool_calls"]
    if not isinstance(calls, list) or not calls:
        raise CorpusError(f"{name}: tool_calls is a list of calls")
    scripted = []
    for call in calls:
        fields = (call or {}) if isinstance(call, dict) else {}
        if not all(isinstance(fields.get(key), str) for key in ("id", "name", "arguments")):
            raise CorpusError(f"{name}: every scripted tool call has an id, a name and arguments")
        scripted.append(Call(name=fields["name"], arguments=fields["arguments"], id=fields["id"]))
    return ToolCalls(
        calls=tuple(scripted),
        pieces=int(spec.get("pieces", 2)),
        delay=float(spec.get("delay_ms", 0)) / 1000,
    )


@dataclass(frozen=True, slots=True)
class LiveServer:
    target: str
    tokens: Mapping[str, str]
    """Each run's bearer token (RUNS, OTHER_TENANTS), its rate-limited tenant's under
    `RUN-limited`."""
    http_url: str
    """The HTTP listener (Connect and gRPC-Web), `http://127.0.0.1:PORT`."""

    def env(self, language: str) -> dict[str, str]:
        """The environment a runner of `language` reads.

        Its runs over the HTTP listener (PROTOCOLS) read their tokens from
        `AGENTSKIT_CHAT_CONFORMANCE_<PROTOCOL>_TOKEN` and `..._<PROTOCOL>_LIMITED_TOKEN`.
        """
        env = {
            "AGENTSKIT_CHAT_CONFORMANCE_TARGET": self.target,
            "AGENTSKIT_CHAT_CONFORMANCE_HTTP_URL": self.http_url,
            "AGENTSKIT_CHAT_CONFORMANCE_TOKEN": self.tokens[language],
            "AGENTSKIT_CHAT_CONFORMANCE_LIMITED_TOKEN": self.tokens[f"{language}-limited"],
            "AGENTSKIT_CHAT_CONFORMANCE_DIR": str(CORPUS),
        }
        for protocol in PROTOCOLS.get(language, ()):
            prefix = f"AGENTSKIT_CHAT_CONFORMANCE_{protocol.upper()}"
            env[f"{prefix}_TOKEN"] = self.tokens[f"{language}-{protocol}"]
            env[f"{prefix}_LIMITED_TOKEN"] = self.tokens[f"{language}-{protocol}-limited"]
        return env


def _definitions(directory: Path, model_url: str) -> None:
    directory.mkdir()
    for path in sorted(EXAMPLES.glob("*.yaml")):
        if not path.name.endswith(".test.yaml"):
            shutil.copy(path, directory / path.name)
    for path in sorted(DEFINITIONS.glob("*.yaml")):
        text = path.read_text(encoding="utf-8").replace("${FAKE_MODEL_URL}", model_url)
        (directory / path.name).write_text(text, encoding="utf-8")


LIMITED_RATES: Final = {"turns": 0.2, "turns_burst": 1, "sessions": 0.2, "sessions_burst": 1}
"""The rate-limited tenants' own rates: one turn and one session creation per 5 s."""


def _tokens(path: Path) -> dict[str, str]:
    """Each run's token, and its rate-limited tenant's under `RUN-limited`."""
    tokens: dict[str, str] = {}
    entries: list[dict[str, object]] = []
    for run in (*RUNS, *OTHER_TENANTS):
        for name, rates in ((run, None), (f"{run}-limited", LIMITED_RATES)):
            token = tokens[name] = f"conformance-{name}-{secrets.token_hex(8)}"
            entry: dict[str, object] = {
                "sha256": hashlib.sha256(token.encode()).hexdigest(),
                "tenant": f"conformance-{name}",
            }
            if rates is not None:
                entry["rates"] = rates
            entries.append(entry)
    path.write_text(yaml.safe_dump({"tokens": entries}), encoding="utf-8")
    return tokens


def _wait_listening(process: subprocess.Popen[bytes], stdout: Path) -> tuple[int, int]:
    """The gRPC and HTTP ports, once `serve` says it listens (the HTTP line comes first)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        text = stdout.read_text(encoding="utf-8", errors="replace")
        found, http = LISTENING.search(text), HTTP_LISTENING.search(text)
        if found and http:
            return int(found.group(1)), int(http.group(1))
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"the conformance server did not start:\n{stdout.read_text()}")


@contextlib.contextmanager
def live_server(
    workdir: Path,
    *,
    serve_args: Sequence[str] = (),
    answers: Mapping[str, Script] | None = None,
) -> Iterator[LiveServer]:
    """The fake model and `serve` (gRPC and HTTP listeners), both stopped on exit.

    `serve_args` are added to the serve command line; `answers` (user text -> script) to
    the fake model's, beside the scenarios' own.
    """
    scripted = model_answers(load_scenarios())
    with FakeModelServer() as model:
        model.model.answers.update(scripted)
        model.model.answers.update(answers or {})
        _definitions(workdir / "definitions", model.url)
        tokens = _tokens(workdir / "tokens.yaml")
        stdout = workdir / "serve.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSKIT_CHAT_")}
        env["AGENTSKIT_CHAT_DRAIN_DELAY"] = "0"
        with stdout.open("wb") as out:
            process = subprocess.Popen(
                [
                    *(sys.executable, "-m", "agentskit_chat.cli", "--log-level", "WARNING"),
                    *("serve", "--listen", "127.0.0.1:0", "--state-dir", str(workdir / "state")),
                    *("--definitions", str(workdir / "definitions"), "--max-input-bytes", "2048"),
                    *("--auth-tokens", str(workdir / "tokens.yaml"), "--log-format", "json"),
                    *("--http-listen", "127.0.0.1:0", *serve_args),
                ],
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            port, http_port = _wait_listening(process, stdout)
            yield LiveServer(f"127.0.0.1:{port}", tokens, f"http://127.0.0.1:{http_port}")
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    """Serve until Ctrl-C or SIGTERM, printing each language's environment."""
    import tempfile

    signal.signal(signal.SIGTERM, _interrupt)
    with (
        contextlib.suppress(KeyboardInterrupt),
        tempfile.TemporaryDirectory() as tmp,
        live_server(Path(tmp)) as server,
    ):
        for language in LANGUAGES:
            settings = " ".join(f"{k}={v}" for k, v in server.env(language).items())
            print(f"{language}: {settings}", flush=True)
        signal.pause()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
