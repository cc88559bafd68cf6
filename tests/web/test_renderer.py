"""The reference web renderer (examples/web) in headless Chromium against a live `serve`.

The renderer is built with its pinned bundler, served by `serve --web-root` on the HTTP
listener, and also from a plain static server whose origin `--cors-origin` allows. Its
browser tests (examples/web/test, node:test driving Debian's chromium through
playwright-core) then run every turn operation against the fake model, reload a page in
the middle of an answer (the turn continues and the page reattaches to it), and open a
session in two pages (each shows the other's turns as they stream). Node.js and
chromium are required (`make chromium` installs chromium) unless CONTRACT_SKIP_TOOLCHAINS
names `node`.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agentskit_chat.fakemodel import Ending, HttpResponse, Reply, Script
from tests.conformance.harness import live_server
from tests.contract.tooling import ROOT, SKIP_ENV, require_toolchain, run

WEB = ROOT / "examples" / "web"
TESTS = WEB / "test"
ARTIFACTS = ROOT / "build" / "artifacts"
CHROMIUM = "chromium"
SUMMARY = re.compile(r"^# (tests|pass|fail|cancelled|skipped|todo) (\d+)$", re.M)
TOP_LEVEL_TEST = re.compile(r"^test\(", re.M)

STREAM_TEXT = "Describe the weather slowly"
STALL_TEXT = "Think about it for a long while"
STORY_TEXT = "Tell me a short story"
FAIL_TEXT = "Ask a model that is down"
SLOW_TEXT = "Explain it at length and slowly"
SLOW_ANSWER = Reply(
    chunks=(*(f"Part {n} of a long answer. " for n in range(1, 13)), "The end."),
    delay=0.25,
)
ANSWERS: dict[str, Script] = {
    # Several deltas, far enough apart for the page to show each one.
    STREAM_TEXT: Reply(chunks=("Sunny ", "with a ", "light ", "breeze."), delay=0.3),
    # One delta, then nothing until the browser stops the turn.
    STALL_TEXT: Reply(chunks=("Let me think",), ending=Ending.STALL),
    STORY_TEXT: Reply(chunks=("Once upon a time, ", "a session ", "kept its state.")),
    FAIL_TEXT: HttpResponse(500, '{"error": {"message": "the model is down"}}'),
    # Long enough to reload the page, or to watch it from another page, while it streams.
    SLOW_TEXT: SLOW_ANSWER,
}


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def static_site(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A plain static HTTP server on loopback for the built renderer: (directory, port)."""
    site = tmp_path / "site"
    site.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _require_browser() -> None:
    """Skip when CONTRACT_SKIP_TOOLCHAINS names node; else fail unless everything is there."""
    if "node" in os.environ.get(SKIP_ENV, "").replace(",", " ").split():
        pytest.skip(f"the browser tests need Node.js and chromium; skipped by {SKIP_ENV}")
    require_toolchain("node", "node", "npm", ROOT / "node_modules" / ".bin" / "esbuild")
    if shutil.which(CHROMIUM) is None:
        pytest.fail(
            f"chromium missing (run `make chromium`); set {SKIP_ENV}=node to skip", pytrace=False
        )


def test_renderer_in_a_real_browser(tmp_path: Path, static_site: tuple[Path, int]) -> None:
    _require_browser()
    site, static_port = static_site
    (ARTIFACTS / "web-renderer.png").unlink(missing_ok=True)
    run(["npm", "run", "build", "--workspace", "examples/web", "--", "--outdir", str(site)])
    allowed = f"http://127.0.0.1:{static_port}"
    serve_args = ["--web-root", str(site), "--cors-origin", allowed]
    live = tmp_path / "live"
    live.mkdir()
    with live_server(live, serve_args=serve_args, answers=ANSWERS) as server:
        api = server.http_url
        done = run(
            [
                "node",
                "--test",
                "--test-force-exit",
                "--test-concurrency=1",
                "--test-reporter=tap",
                str(TESTS),
            ],
            env={
                "AGENTSKIT_WEB_URL": f"{api}/",
                "AGENTSKIT_WEB_CROSS_URL": f"{allowed}/?server={api}",
                "AGENTSKIT_WEB_DISALLOWED_URL": f"http://localhost:{static_port}/?server={api}",
                "AGENTSKIT_WEB_TOKEN": server.tokens["typescript"],
                "AGENTSKIT_WEB_DEFINITION": "conformance",
                "AGENTSKIT_WEB_ARTIFACTS": str(ARTIFACTS),
                "AGENTSKIT_WEB_CHROMIUM": shutil.which(CHROMIUM) or CHROMIUM,
                "AGENTSKIT_WEB_STREAM_TEXT": STREAM_TEXT,
                "AGENTSKIT_WEB_STALL_TEXT": STALL_TEXT,
                "AGENTSKIT_WEB_STORY_TEXT": STORY_TEXT,
                "AGENTSKIT_WEB_FAIL_TEXT": FAIL_TEXT,
                "AGENTSKIT_WEB_SLOW_TEXT": SLOW_TEXT,
                "AGENTSKIT_WEB_SLOW_ANSWER": SLOW_ANSWER.text,
            },
            check=False,
        )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    counts = {name: int(value) for name, value in SUMMARY.findall(done.stdout)}
    print(f"web renderer in chromium: {counts}")
    expected = sum(
        len(TOP_LEVEL_TEST.findall(path.read_text(encoding="utf-8")))
        for path in TESTS.glob("*.test.mjs")
    )
    assert counts.get("tests") == expected, output
    assert counts.get("pass") == expected, output
    assert not counts.get("skipped"), output
    assert not counts.get("todo"), output
    assert (ARTIFACTS / "web-renderer.png").stat().st_size > 0
