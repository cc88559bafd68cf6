"""`--web-root`: a renderer's files on the listener, nothing outside its root."""

from __future__ import annotations

from pathlib import Path

from tests.transport.conftest import run
from tests.transport.web.conftest import web_live
from tests.transport.web.raw import captured


def _site(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text("<!doctype html><title>renderer</title>", encoding="utf-8")
    (root / "assets" / "app.js").write_text("console.log(1)", encoding="utf-8")
    (root / ".env").write_text("SECRET=1", encoding="utf-8")
    (tmp_path / "outside.txt").write_text("outside", encoding="utf-8")
    (root / "link.txt").symlink_to(tmp_path / "outside.txt")
    return root


def test_files_under_the_root_are_served(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, web_root=_site(tmp_path)) as web:
            index = await web.http.get("/")
            assert index.status_code == 200
            assert index.headers["content-type"] == "text/html; charset=utf-8"
            assert "<title>renderer</title>" in index.text
            script = await web.http.get("/assets/app.js")
            assert script.status_code == 200
            assert "javascript" in script.headers["content-type"]
            head = await web.http.head("/assets/app.js")
            assert (head.status_code, head.content) == (200, b"")
            assert head.headers["content-length"] == str(len("console.log(1)"))

    run(scenario())


def test_nothing_outside_the_root_or_hidden_is_served(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path, web_root=_site(tmp_path)) as web:
            for path in (
                "/../outside.txt",
                "/%2e%2e/outside.txt",
                "/assets/..%2f..%2foutside.txt",
                "/.env",
                "/link.txt",
                "/missing.js",
            ):
                response = await web.http.get(path)
                assert response.status_code == 404, path
                assert "outside" not in response.text
                assert "SECRET" not in response.text
            post = await web.http.post("/index.html", content=b"x")
            assert post.status_code == 405

    run(scenario())


def test_links_to_hidden_files_or_folders_and_overlong_names_are_404(tmp_path: Path) -> None:
    root = _site(tmp_path)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("SECRET=git", encoding="utf-8")
    (root / "env.txt").symlink_to(root / ".env")
    (root / "repo").symlink_to(root / ".git")
    (root / "config.txt").symlink_to(root / ".git" / "config")
    (root / "ok.js").symlink_to(root / "assets" / "app.js")

    async def scenario() -> None:
        with captured() as log:
            async with web_live(tmp_path, web_root=root) as web:
                log.mark()
                for path in ("/env.txt", "/repo/config", "/config.txt", "/repo/"):
                    response = await web.http.get(path)
                    assert response.status_code == 404, path
                    assert "SECRET" not in response.text
                long = "a" * 300
                for path in (f"/{long}", f"/assets/{long}.js", "/" + "b" * 14_000):
                    response = await web.http.get(path)
                    assert response.status_code == 404, path
                    head = await web.http.head(path)
                    assert head.status_code == 404, path
                assert (await web.http.get("/ok.js")).text == "console.log(1)"
                assert log.warnings() == []
                log.assert_bounded("aaaa", "bbbb")

    run(scenario())


def test_without_a_root_only_rpcs_and_health_answer(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            assert (await web.http.get("/")).status_code == 404
            assert (await web.http.get("/healthz")).status_code == 200

    run(scenario())
