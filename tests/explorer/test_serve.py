"""`tracegraph serve`: the explorer in headless Chromium through textual-serve, and the refusals
that come before serving (one line, exit 2)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tracegraph.explorer.cli import main
from tracegraph.explorer.serve import EXTRA_HINT, explore_command
from tracegraph.ingest.store import GraphStore

from . import dbs
from .chromium import CHROMIUM, CHROMIUM_ARGS

# textual.js keeps its xterm.js Terminal in `this.terminal` of an object it never exposes: catch
# the assignment, then read the terminal's buffer (it draws on a canvas, so the DOM holds no text)
CATCH_TERMINAL = """
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "terminal", {value, writable: true, configurable: true});
    if (value && value.buffer) window.__xterm = value;
  },
});
"""
SCREEN_TEXT = """() => {
  const term = window.__xterm;
  if (!term) return "";
  const buffer = term.buffer.active, lines = [];
  for (let y = 0; y < term.rows; y++) {
    const line = buffer.getLine(buffer.viewportY + y);
    lines.push(line ? line.translateToString(true) : "");
  }
  return lines.join("\\n");
}"""
# shown only by the Overview, and only once its data loaded (the run line, the steps' columns)
OVERVIEW_LOADED = ("run syn", "2 step(s)", "Steps across ranks", "median ms", "ProfilerStep#1")
START_S, RENDER_S = 60.0, 60.0


@pytest.fixture(scope="module")
def db(tui_dbs: Path) -> Path:
    return dbs.synthetic_db(tui_dbs)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cli(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tracegraph.explorer.cli", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def served(db: Path, tmp_path: Path) -> Iterator[str]:
    """`tracegraph serve DB` on a free port, answering HTTP; the URL it printed (with its
    token). The server and the explorers it started are gone afterwards, whatever happened."""
    with _server(db, tmp_path) as (_, url):
        yield url


@contextmanager
def _server(
    db: Path, folder: Path, *extra: str, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A `tracegraph serve` started in `folder` (one process group, stopped on exit) once it
    answers its URL; the process and the URL it printed."""
    port = _free_port()
    log = folder / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "tracegraph.explorer.cli", "serve", str(db)]
            + ["--port", str(port), *extra],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=folder,
            env=env,
        )
    try:
        deadline = time.monotonic() + START_S
        while True:
            if server.poll() is not None:
                pytest.fail(f"serve exited with {server.returncode}:\n{log.read_text()}")
            printed = re.search(r"open (http://\S+/\?token=\S+)", log.read_text())
            if printed is not None:
                try:
                    with urllib.request.urlopen(printed.group(1), timeout=1):
                        break
                except OSError:
                    pass
            if time.monotonic() > deadline:
                pytest.fail(f"serve did not answer in {START_S:.0f} s:\n{log.read_text()}")
            time.sleep(0.1)
        yield server, printed.group(1)
    finally:
        _stop_group(server)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group (the server shuts down cleanly), then SIGKILL what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            continue
    process.wait()


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}")
def test_the_overview_renders_in_a_browser(served: str, tmp_path: Path) -> None:
    from playwright.sync_api import Route, sync_playwright

    def local_only(route: Route) -> None:
        # the page also asks fonts.googleapis.com for a font: refuse it at once, offline
        if route.request.url.startswith(served.split("?")[0]):
            route.continue_()
        else:
            route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.route("**/*", local_only)
            page.add_init_script(CATCH_TERMINAL)
            page.goto(served, wait_until="commit")
            deadline = time.monotonic() + RENDER_S
            text = page.evaluate(SCREEN_TEXT)
            while not all(s in text for s in OVERVIEW_LOADED) and time.monotonic() < deadline:
                page.wait_for_timeout(100)  # not time.sleep: Playwright routes requests meanwhile
                text = page.evaluate(SCREEN_TEXT)
            if not all(s in text for s in OVERVIEW_LOADED):
                page.screenshot(path=tmp_path / "serve.png")
            assert all(s in text for s in OVERVIEW_LOADED), (
                f"the overview did not render in {RENDER_S:.0f} s (screenshot: "
                f"{tmp_path / 'serve.png'}); the terminal showed:\n{text}"
            )
        finally:
            browser.close()


def test_the_served_command_is_explore_with_the_same_keymap(db: Path, tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    argv = shlex.split(explore_command(db, keys))
    assert argv[:3] == [sys.executable, "-m", "tracegraph.explorer.cli"]
    assert argv[3:] == ["explore", str(db.resolve()), "--served", "--keymap", str(keys.resolve())]


def _refusals(tmp_path: Path) -> dict[str, Path]:
    junk = tmp_path / "junk.kuzu"
    junk.write_bytes(b"not a database")
    empty = tmp_path / "empty.kuzu"
    empty.touch()
    return {"missing": tmp_path / "missing.kuzu", "folder": tmp_path, "junk": junk, "empty": empty}


@pytest.mark.parametrize("case", ["missing", "folder", "junk", "empty"])
def test_a_database_explore_refuses_is_refused_the_same_before_serving(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(_refusals(tmp_path)[case])
    assert main(["explore", db]) == 2
    _, explore_err = capsys.readouterr()
    assert main(["serve", db, "--port", str(_free_port())]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == explore_err and err.count("\n") == 1


def test_a_kuzu_database_without_runs_is_refused_before_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`explore` explains it in the app; in a browser that would come after the page loaded."""
    db = tmp_path / "bare.kuzu"
    GraphStore(db, read_only=False).close()
    assert main(["serve", str(db), "--port", str(_free_port())]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and "holds no tracegraph tables" in err


def test_a_port_in_use_is_one_line(db: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _cli("serve", str(db), "--port", str(port))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"cannot serve on 127.0.0.1:{port}: the port is in use" in done.stderr


def test_without_the_extra_serve_names_it(
    db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "textual_serve", None)  # an import of it fails
    monkeypatch.setitem(sys.modules, "textual_serve.server", None)
    monkeypatch.setitem(sys.modules, "tracegraph.explorer.serve_server", None)  # imports it
    assert main(["serve", str(db)]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and EXTRA_HINT in err


# ---- who may connect, and what a client may do (issue #22) -----------------------------------
ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]")
KEYS = {"f5": "\x1b[15~", "f7": "\x1b[18~", "ctrl+r": "\x12", "ctrl+s": "\x13", "enter": "\r"}


def _status(url: str, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _parts(url: str) -> tuple[str, str]:
    """The server's origin and token from the URL it printed."""
    origin, token = url.split("/?token=")
    return origin, token


def test_only_the_token_this_host_and_this_origin_are_admitted(db: Path, tmp_path: Path) -> None:
    with _server(db, tmp_path) as (_, url):
        origin, token = _parts(url)
        port = origin.rsplit(":", 1)[1]
        assert _status(url) == 200
        assert _status(f"http://localhost:{port}/?token={token}") == 200  # another loopback name
        refused = {
            "no token": (f"{origin}/", {}),
            "a wrong token": (f"{origin}/?token={token[:-1]}x", {}),
            "the page's script without it": (f"{origin}/static/js/textual.js", {}),
            "a download without it": (f"{origin}/download/anything", {}),
            "another host name (DNS rebinding)": (url, {"Host": f"evil.example:{port}"}),
            "another port's name": (url, {"Host": "127.0.0.1:1"}),
            "another site's page": (url, {"Origin": "http://evil.example"}),
            "a sandboxed page": (url, {"Origin": "null"}),
        }
        for case, (where, headers) in refused.items():
            assert _status(where, headers) == 403, case
        cookie = {"Cookie": f"tracegraph-serve-{port}={token}"}
        assert _status(f"{origin}/static/js/textual.js", cookie) == 200
        upgrade = {
            "Connection": "Upgrade",
            "Upgrade": "websocket",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        }
        assert _status(f"{origin}/ws", upgrade) == 403
        assert (
            _status(f"{origin}/ws", {**upgrade, **cookie, "Origin": "http://evil.example"}) == 403
        )


async def _drive_console(origin: str, token: str, query: str, typed_path: str) -> tuple[str, bytes]:
    """As a hostile client would: open the Console, run `query`, export it (Ctrl+S), then type
    `typed_path` and Enter (where an export once asked for a path); the delivery key the server
    sent and the file downloaded by it."""
    import asyncio

    import aiohttp

    cookies = {f"tracegraph-serve-{origin.rsplit(':', 1)[1]}": token}
    async with aiohttp.ClientSession(cookies=cookies) as session:
        ws = await session.ws_connect(f"{origin}/ws?width=120&height=40", origin=origin)
        screen = b""

        async def until(words: bytes, seconds: float, resend: str | None = None) -> str | None:
            nonlocal screen
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                if resend is not None:
                    await ws.send_json(["stdin", KEYS[resend]])
                try:
                    message = await ws.receive(timeout=1.0)
                except TimeoutError:
                    continue
                if message.type == aiohttp.WSMsgType.BINARY:
                    screen += message.data
                    if words and words in ANSI.sub(b"", screen).replace(b" ", b""):
                        return None
                elif message.type == aiohttp.WSMsgType.TEXT:
                    envelope = json.loads(message.data)
                    if envelope[0] == "deliver_file_start":
                        return str(envelope[1])
                elif message.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                    break
            raise AssertionError(f"no {words!r} in {seconds} s: {ANSI.sub(b'', screen)[-2000:]!r}")

        await until(b"Stepsacrossranks", START_S)  # the overview loaded
        await ws.send_json(["stdin", KEYS["f5"]])
        await until(b"Ctrl+Rrun", RENDER_S)
        await ws.send_json(["stdin", KEYS["f7"]])  # select all, then type over it
        await asyncio.sleep(1.0)  # Textual's key parser ate what came right after an escape
        await ws.send_json(["stdin", query])
        await until(query.replace(" ", "").encode()[-6:], RENDER_S)  # drawn as typed
        await ws.send_json(["stdin", KEYS["ctrl+r"]])
        await until(b"1rows", RENDER_S)
        key = await until(b"\0never", RENDER_S, resend="ctrl+s")
        assert key is not None
        await ws.send_json(["stdin", typed_path + KEYS["enter"]])
        async with session.get(f"{origin}/download/{key}") as response:
            assert response.status == 200
            body = await response.read()
        await ws.close()
    return key, body


def test_a_client_reads_and_never_writes_an_export_downloads_to_the_browser(
    db: Path, tmp_path: Path
) -> None:
    """Issue #22: a client's export (Ctrl+S) to the database's path made it an 18-byte CSV."""
    import asyncio
    import shutil

    served = tmp_path / "served"
    served.mkdir()
    target = served / "job.kuzu"
    shutil.copyfile(db, target)
    shutil.copytree(db.with_name(db.name + ".archive"), served / "job.kuzu.archive")
    home = tmp_path / "home"
    home.mkdir()
    history = tmp_path / "history.json"
    env = {**os.environ, "HOME": str(home), "TRACEGRAPH_HISTORY": str(history)}
    before = target.read_bytes()
    listing = sorted(p.name for p in served.iterdir())
    with _server(target, tmp_path, env=env) as (_, url):
        origin, token = _parts(url)
        query = "RETURN 'overwritten' AS x"
        key, body = asyncio.run(_drive_console(origin, token, query, str(target)))
    assert body.decode().splitlines() == ['"x"', '"overwritten"']
    assert target.read_bytes() == before, "the served database changed"
    assert sorted(p.name for p in served.iterdir()) == listing  # no file beside it either
    assert not history.exists() and list(home.rglob("*")) == []  # no history, no downloads
    assert "refused" not in (tmp_path / "serve.log").read_text()


def test_clients_past_the_bound_are_refused(db: Path, tmp_path: Path) -> None:
    import asyncio

    import aiohttp

    async def two(origin: str, token: str) -> int:
        cookies = {f"tracegraph-serve-{origin.rsplit(':', 1)[1]}": token}
        async with aiohttp.ClientSession(cookies=cookies) as session:
            first = await session.ws_connect(f"{origin}/ws", origin=origin)
            try:
                with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
                    await session.ws_connect(f"{origin}/ws", origin=origin)
                return caught.value.status
            finally:
                await first.close()

    with _server(db, tmp_path, "--max-clients", "1") as (_, url):
        assert asyncio.run(two(*_parts(url))) == 503
    assert "1 connected" in (tmp_path / "serve.log").read_text()


def test_a_host_beyond_loopback_needs_allow_remote_and_is_warned_of(
    db: Path, tmp_path: Path
) -> None:
    refused = _cli("serve", str(db), "--host", "0.0.0.0", "--port", str(_free_port()))
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "--allow-remote" in refused.stderr
    with _server(db, tmp_path, "--host", "0.0.0.0", "--allow-remote") as (_, url):
        assert _status(url) == 200
        # a name the machine is reached by cannot be told in advance: the token decides
        origin, token = _parts(url)
        port = origin.rsplit(":", 1)[1]
        assert _status(f"http://127.0.0.1:{port}/?token={token}", {"Host": f"box:{port}"}) == 200
        assert _status(f"http://127.0.0.1:{port}/", {"Host": f"box:{port}"}) == 403
    log = (tmp_path / "serve.log").read_text()
    assert "warning: serving" in log and "beyond this machine" in log


def test_the_page_is_tracegraphs_own_titled_by_the_file(db: Path, tmp_path: Path) -> None:
    """The explorer straight away: the tab titled by the database's file name (not the server's
    path), no landing card, nothing fetched from outside (no web font)."""
    with _server(db, tmp_path) as (_, url):
        with urllib.request.urlopen(url, timeout=10) as response:
            page = response.read().decode()
    assert f"<title>tracegraph — {db.name}</title>" in page
    assert str(db.parent) not in page
    origin = _parts(url)[0]
    fetched = re.findall(r"(?:https?|wss?)://[^\"' ]+", page)
    assert fetched and all(u.split("://")[1].startswith(origin.split("://")[1]) for u in fetched)
    assert "textual.js" in page and 'id="terminal"' in page
