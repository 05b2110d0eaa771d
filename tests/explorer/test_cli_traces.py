"""`report`, `path` and `edges` on trace files or folders: one command from traces to the answer,
the same answer as `ingest` then the command on the database, and the database reused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracegraph.explorer.cli import main
from tracegraph.ingest.errors import IngestError
from tracegraph.ingest.store import GraphStore

from ..conftest import needs_traces, trace

pytestmark = needs_traces


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_report_on_traces_equals_ingest_then_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cache_home: Path
) -> None:
    folder = trace("cpu_ddp_2r_faults")
    db = tmp_path / "ingested.kuzu"
    assert run(capsys, "ingest", folder, "--db", db)[0] == 0
    code, expected, _ = run(capsys, "report", db, "--format", "json")
    assert code == 0
    code, first, err = run(capsys, "report", folder, "--format", "json")
    assert code == 0 and "ingested run 'cpu_ddp_2r_faults'" in err
    [cached] = cache_home.glob("tracegraph/traces/*/traces.kuzu")
    assert json.loads(first) == json.loads(expected.replace(str(db), str(cached)))
    code, again, err = run(capsys, "report", folder, "--format", "json")
    assert code == 0 and again == first and "holds these traces" in err and "ingested" not in err


def test_path_and_edges_on_traces_ingest_into_the_named_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cache_home: Path
) -> None:
    files = sorted(trace("cpu_ddp_2r").glob("*.json.gz"))
    db = tmp_path / "mine.kuzu"
    code, by_traces, err = run(capsys, "path", *files, "--db", db, "--format", "json")
    assert code == 0 and "ingested run" in err
    code, by_db, _ = run(capsys, "path", db, "--format", "json")
    assert code == 0 and by_db == by_traces
    code, out, err = run(capsys, "edges", *files, "--db", db, "--native", "--all-steps")
    assert code == 0 and "holds these traces" in err and "edge set 'native'" in out
    assert not cache_home.exists()  # a named database: nothing in the cache


def test_bad_inputs_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.json"
    code, out, err = run(capsys, "report", missing)
    assert (code, out) == (2, "")
    assert err == f"tracegraph: error: {missing}: no such file or folder\n"
    db = tmp_path / "some.kuzu"
    code, _, err = run(capsys, "report", db, "--db", tmp_path / "other.kuzu")
    assert code == 2 and err.count("\n") == 1 and "only with trace files or folders" in err
    code, _, err = run(capsys, "report", trace("cpu_ddp_2r"), "--top", "0")
    assert code == 2 and err.count("\n") == 1 and "--top 0" in err  # refused before the ingest
    assert not (tmp_path / "xdg").exists()


def test_the_answer_comes_before_the_write_commits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Traces ingested now are reported from the store that loads them: the report is printed
    before the write commits, and a write that then fails leaves the database as it was."""
    folder = trace("cpu_ddp_2r_faults")
    db = tmp_path / "mine.kuzu"
    code, expected, _ = run(capsys, "report", folder, "--db", tmp_path / "ref.kuzu")
    assert code == 0
    printed: list[str] = []

    def failing_commit(store: GraphStore) -> None:
        printed.append(capsys.readouterr().out)  # what the user saw when the write commits
        raise IngestError(f"{db}: writing the database failed (disk full)")

    monkeypatch.setattr(GraphStore, "commit", failing_commit)
    code, _, err = run(capsys, "report", folder, "--db", db)
    assert code == 2 and err.endswith(
        f"tracegraph: error: {db}: writing the database failed (disk full)\n"
    )
    assert printed == [expected.replace(str(tmp_path / "ref.kuzu"), str(db))]
    assert not db.exists() and not list(tmp_path.glob("mine.kuzu.archive/run-*"))
    monkeypatch.undo()
    code, out, err = run(capsys, "report", folder, "--db", db)
    assert code == 0 and "ingested run" in err  # nothing was kept: ingested again
    assert out == printed[0]


def test_an_answer_that_fails_leaves_no_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "mine.kuzu"
    code, out, err = run(capsys, "report", trace("cpu_ddp_2r_faults"), "--db", db, "--rank", "7")
    assert (code, out) == (2, "")
    assert err.splitlines()[-1].startswith(
        f"tracegraph: error: {db}: run 'cpu_ddp_2r_faults' has no rank(s) [7]"
    )
    assert not db.exists() and not list(tmp_path.glob("mine.kuzu.archive/run-*"))


def test_the_same_traces_asked_about_twice_at_once_are_ingested_once(tmp_path: Path) -> None:
    """Two commands on the same new traces while a third process writes the database: each
    waits for the writer, one ingests, the other waits for it and reuses what it wrote."""
    import fcntl
    import subprocess
    import sys

    folder, db = trace("cpu_ddp_2r"), tmp_path / "shared.kuzu"
    argv = [sys.executable, "-m", "tracegraph.explorer.cli", "report", str(folder)]
    argv += ["--db", str(db), "--format", "json"]
    with open(db.with_name(db.name + ".lock"), "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        children = [
            subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        for child in children:  # each is waiting before the lock goes
            assert child.stderr is not None
            assert "waiting for another tracegraph process" in child.stderr.readline()
    results = [(c.wait(timeout=300), c.stdout.read(), c.stderr.read()) for c in children]  # type: ignore[union-attr]
    assert [code for code, _, _ in results] == [0, 0], results
    assert results[0][1] == results[1][1] and json.loads(results[0][1])["steps"]
    said = sorted("ingested run" in err for _, _, err in results)
    assert said == [False, True], results  # one ingested, the other reused it


@needs_traces
def test_a_reader_gone_before_the_write_commits_still_gets_it_written(tmp_path: Path) -> None:
    """`report TRACES | head`: the answer is printed before the write commits, so the reader
    may go while it is printed; the write still commits, and the next command reuses it."""
    import subprocess
    import sys

    db = tmp_path / "piped.kuzu"
    argv = [sys.executable, "-m", "tracegraph.explorer.cli", "report", str(trace("cpu_ddp_2r"))]
    child = subprocess.Popen(
        [*argv, "--db", str(db), "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # gone before a byte is read: the answer's first write breaks the pipe
    assert child.wait(timeout=300) == 0, child.stderr.read()
    again = subprocess.run([*argv, "--db", str(db)], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "ingested run" not in again.stderr, again.stderr
    assert "holds these traces" in again.stderr


def test_report_summarises_a_fleet_unless_told_not_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """From SUMMARY_FROM_FILES trace files on, `report TRACES` ingests summaries (lowered here
    to the 4 files of a real gloo job), says so, and caches them apart from a full ingest."""
    from tracegraph.explorer.commands import traces

    monkeypatch.setattr(traces, "SUMMARY_FROM_FILES", 4)
    folder = Path(__file__).resolve().parents[1] / "data" / "gloo_4r" / "data_stall"
    code, out, err = run(capsys, "report", folder)
    assert code == 0 and "trace files: summarised" in err and "summary tier: 4 ranks (0–3)" in out
    code, out, err = run(capsys, "report", folder, "--no-summary")
    assert code == 0 and "summarised" not in err and "summary tier" not in out
    assert "ingested run" in err  # not the summary's database: the cache keeps them apart
    code, out, err = run(capsys, "report", trace("cpu_ddp_2r"))  # 2 files: in full
    assert code == 0 and "summary tier" not in out


def test_a_summary_run_is_redone_when_every_event_is_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In a database named with --db: a summary of the traces is not an answer to a report of
    every event (it is ingested again, in full, in its place); a full run is one to a summary's."""
    folder, db = trace("cpu_ddp_2r"), tmp_path / "both.kz"
    code, out, err = run(capsys, "report", folder, "--db", db, "--summary")
    assert code == 0 and "summarised run" in err and "summary tier" in out
    code, out, err = run(capsys, "report", folder, "--db", db)
    assert code == 0 and "ingested run" in err and "summary tier" not in out
    code, out, err = run(capsys, "report", folder, "--db", db, "--summary")
    assert code == 0 and "holds these traces" in err and "summary tier" not in out
