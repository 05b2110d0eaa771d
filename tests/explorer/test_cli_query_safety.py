"""`tracegraph query` cannot harm the database or the host, and always stops: hostile queries
are refused before Kuzu with the database byte-identical, Ctrl-C and the timeout stop a running
query within about a second, and large results are written batch by batch."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from tracegraph.explorer import output

from ..dbfiles import db_digest
from .test_cli_failures import _run, assert_one_error


@pytest.fixture
def db_copy(synthetic_db: Path, tmp_path: Path) -> Path:
    """A copy of the synthetic database, files and all, to try hostile queries on."""
    copy = tmp_path / "copy.kuzu"
    for entry in synthetic_db.parent.glob(synthetic_db.name + "*"):
        if entry.is_file() and not entry.name.endswith(".lock"):
            shutil.copyfile(entry, tmp_path / entry.name.replace(synthetic_db.name, copy.name, 1))
    return copy


# A compute-bound query on the synthetic run (Kuzu checks interrupts while it joins).
SLOW = "MATCH (a:Op), (b:Op), (c:Op), (d:Op) WHERE a.ts + b.ts + c.ts + d.ts = 7 RETURN count(*)"


@pytest.mark.parametrize(
    ("cypher", "says"),
    [
        ("CHECKPOINT", "not allowed"),  # used to leave .shadow/.wal: every later open failed
        ("BEGIN TRANSACTION", "not allowed"),  # used to segfault
        ("CALL threads=1", "read-only functions"),  # used to segfault
        ("LOAD FROM '/etc/passwd' (file_format='csv', delim=':') RETURN *", "--allow-files"),
        ("LOAD FROM '/proc/self/environ' RETURN *", "--allow-files"),
        ("COPY (MATCH (n:Op) RETURN n.id) TO '/tmp/tracegraph-x.csv'", "--format csv"),
        ("EXPORT DATABASE '/tmp/tracegraph-dump'", "EXPORT"),
        ("LOAD EXTENSION '/tmp/x.so'", "--allow-files"),
        ("UNWIND range(1, 100000000000) AS x RETURN count(x)", "range"),
        ("UNWIND range(1, 100000*1000000) AS x RETURN count(x)", "range"),  # was 6.5 GB, 7.5 s
        ("WITH 100000000000 AS n UNWIND range(1, n) AS x RETURN count(x)", "range"),
        ("RETURN size(repeat('x', 100000 * 100000))", "repeat"),
        ("MATCH (n:Op) RETURN n.id; MATCH (n:Op) DETACH DELETE n", "one statement"),
    ],
)
def test_hostile_queries_are_refused_and_change_nothing(
    db_copy: Path, capsys: pytest.CaptureFixture[str], cypher: str, says: str
) -> None:
    before = db_digest(db_copy)
    code, out, err = _run(capsys, "query", db_copy, cypher)
    assert code == 2 and out == ""
    assert_one_error(err, db_copy, says)
    assert db_digest(db_copy) == before
    assert not Path("/tmp/tracegraph-x.csv").exists()
    code, _, _ = _run(capsys, "query", db_copy, "MATCH (n:Op) RETURN count(*) AS n")
    assert code == 0  # the database still opens


def test_a_range_sized_by_a_parameter_is_refused_and_ranges_within_the_bound_run(
    db_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cypher = "UNWIND range(1, $n) AS x RETURN count(x) AS n"
    code, out, err = _run(capsys, "query", db_copy, cypher, "--param", "n=100000000000")
    assert code == 2 and out == ""
    assert_one_error(err, db_copy, "range() of more than 1,000,000 values")
    code, out, _ = _run(capsys, "query", db_copy, cypher, "--param", "n=1000000", "--format", "csv")
    assert code == 0 and out.splitlines()[1:] == ["1000000"]
    from_data = "MATCH (o:Op) RETURN sum(size(range(1, o.rank + 1))) = sum(o.rank + 1) AS same"
    code, out, _ = _run(capsys, "query", db_copy, from_data, "--format", "csv")
    assert code == 0 and out.splitlines()[1:] == ["true"]


def test_load_from_runs_only_when_allowed(
    db_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "mine.csv"
    csv.write_text("a,b\n1,2\n3,4\n")
    cypher = f"LOAD FROM '{csv}' (header=true) RETURN a, b"
    assert _run(capsys, "query", db_copy, cypher)[0] == 2
    code, out, _ = _run(capsys, "query", db_copy, cypher, "--allow-files", "--format", "csv")
    assert code == 0 and out.splitlines()[1:] == ["1,2", "3,4"]


def _cli(*args: object) -> subprocess.Popen[str]:
    # As from a terminal, where Ctrl-C is not ignored: a test run started as a background job
    # (`pytest &`) has SIGINT ignored, and a child would inherit that (and never see Ctrl-C).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "tracegraph.explorer.cli", *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    finally:
        signal.signal(signal.SIGINT, previous)


def _wait_for_cpu(proc: subprocess.Popen[str], seconds: float) -> None:
    """Until the process has used `seconds` of CPU (Linux), or 30 s have passed."""
    stat = Path(f"/proc/{proc.pid}/stat")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        if not stat.exists():
            time.sleep(seconds)
            return
        fields = stat.read_text().rsplit(")", 1)[1].split()
        if (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") >= seconds:
            return
        time.sleep(0.05)


def test_ctrl_c_stops_a_running_query_within_a_second(db_copy: Path) -> None:
    proc = _cli("query", db_copy, SLOW, "--timeout-s", "0")
    _wait_for_cpu(proc, 2.0)  # started, and well into the query (a loaded machine is slow)
    assert proc.poll() is None
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=10)
    assert time.monotonic() - sent < 1.5
    assert proc.returncode == 130 and "interrupted" in err
    assert "Traceback" not in err


def test_the_timeout_stops_a_running_query(db_copy: Path) -> None:
    began = time.monotonic()
    proc = _cli("query", db_copy, SLOW, "--timeout-s", "1")
    _, err = proc.communicate(timeout=20)
    assert time.monotonic() - began < 6.0  # start-up, 1 s, and the grace second
    assert proc.returncode == 2 and "timed out after 1 s" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("fmt", ["csv", "json", "table"])
def test_large_results_are_written_batch_by_batch_as_one_document(fmt: str) -> None:
    table = pa.table({"id": list(range(1000)), "name": [f"op{i}" for i in range(1000)]})
    streamed = io.StringIO()
    output.write(streamed, table, fmt, batch_rows=64)
    assert streamed.getvalue() == output.render(table, fmt)
    if fmt == "json":
        assert len(json.loads(streamed.getvalue())) == 1000


def test_a_value_with_line_breaks_stays_on_its_row() -> None:
    """An `args` text holding newlines (a stack, a docstring) must not break the table apart;
    CSV and JSON keep the value as it is."""
    table = pa.table({"args": ['{"stack": "a\nb\r\nc\td"}', "plain"], "n": [1, 2]})
    lines = output.render(table, "table").splitlines()
    assert len(lines) == 2 + table.num_rows
    assert '{"stack": "a↵b↵c d"}' in lines[2] and lines[3].startswith("plain")
    assert json.loads(output.render(table, "json"))[0]["args"] == table["args"][0].as_py()
