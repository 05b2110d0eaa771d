"""`tracegraph serve`: the explorer in headless Chromium through textual-serve, and the refusals
that come before serving (one line, exit 2)."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracegraph.explorer.cli import main
from tracegraph.explorer.serve import EXTRA_HINT, explore_command
from tracegraph.ingest.store import GraphStore

from . import dbs

CHROMIUM = Path("/usr/bin/chromium")
# without the background-networking flags, Chromium's own connections on a closed network get
# the page's refused along with them; Playwright gives each launch a fresh --user-data-dir
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
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
    """`tracegraph serve DB` on a free port, answering HTTP; its URL. The server and the
    explorers it started (one process group) are gone afterwards, whatever happened."""
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tracegraph.explorer.cli",
                "serve",
                str(db),
                "--port",
                str(port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + START_S
        while True:
            if server.poll() is not None:
                pytest.fail(f"serve exited with {server.returncode}:\n{log.read_text()}")
            try:
                with urllib.request.urlopen(url, timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"serve did not answer in {START_S:.0f} s:\n{log.read_text()}")
                time.sleep(0.1)
        yield url
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
        if route.request.url.startswith(served):
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
    assert argv[3:] == ["explore", str(db.resolve()), "--keymap", str(keys.resolve())]


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
    assert main(["serve", str(db)]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and EXTRA_HINT in err
