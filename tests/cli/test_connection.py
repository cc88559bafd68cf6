"""`chat` and `test` reach a server that requires a token, over TLS, as `serve` allows."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import run_cli
from tests.cli.test_security import TOKEN, write_tokens
from tests.transport.certs import Authority

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "definitions"


def test_chat_sends_the_token_from_the_environment_or_a_file(
    launch: Launcher, tmp_path: Path
) -> None:
    tokens = write_tokens(tmp_path / "tokens.yaml", TOKEN)
    server = launch(tmp_path / "state", "--auth-tokens", str(tokens))
    talk = ("chat", "--target", server.target, "--definition", "support")
    refused = run_cli(*talk, input="/start\n/quit\n")
    assert refused.returncode == 1
    assert refused.stdout.startswith("error: UNAUTHENTICATED")
    from_env = run_cli(*talk, input="/start\n/quit\n", env={"AGENTSKIT_CHAT_TOKEN": TOKEN})
    assert from_env.returncode == 0, from_env.stdout + from_env.stderr
    assert "What is your name?" in from_env.stdout
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    from_file = run_cli(*talk, "--token-file", str(token_file), input="/start\n/quit\n")
    assert from_file.returncode == 0, from_file.stdout + from_file.stderr
    assert "What is your name?" in from_file.stdout
    for result in (refused, from_env, from_file):
        assert TOKEN not in result.stdout + result.stderr
    missing = run_cli(*talk, "--token-file", str(tmp_path / "nope"), input="")
    assert missing.returncode == 2
    assert "token file" in missing.stderr


def test_conversation_tests_run_against_a_tls_server_with_a_token(
    launch: Launcher, tmp_path: Path
) -> None:
    authority = Authority(tmp_path)
    issued = authority.issue("server", server=True)
    tokens = write_tokens(tmp_path / "tokens.yaml", TOKEN)
    server = launch(
        tmp_path / "state",
        "--auth-tokens", str(tokens),
        "--tls-cert", str(issued.cert),
        "--tls-key", str(issued.key),
    )  # fmt: skip
    suite = str(EXAMPLES / "support.test.yaml")
    env = {"AGENTSKIT_CHAT_TOKEN": TOKEN}
    passed = run_cli(
        "test", suite, "--target", server.target, "--tls-ca", str(authority.cert), env=env
    )
    assert passed.returncode == 0, passed.stdout + passed.stderr
    plaintext = run_cli("test", suite, "--target", server.target, env=env)
    assert plaintext.returncode == 1
    untrusted = run_cli("test", suite, "--target", server.target, "--tls", env=env)
    assert untrusted.returncode == 1
