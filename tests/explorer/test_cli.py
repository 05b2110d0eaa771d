"""The `tracegraph` command end to end: ingest real traces, info, query, and one-line errors."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import shutil
from pathlib import Path

import pytest

import tracegraph
from tracegraph.explorer.cli import main

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/traces is absent")
CONTROL = TRACES / "hta/trace_diff/control/control.json.gz"
EVENT_SYNC = TRACES / "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def ddp_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("cli") / "run.kuzu"
    assert main(["ingest", str(TRACES / "cpu_ddp_2r"), "--db", str(db), "--run", "ddp"]) == 0
    assert main(["ingest", str(EVENT_SYNC), "--db", str(db), "--run", "sync"]) == 0
    return db


@needs_traces
def test_info_lists_runs_ranks_and_counts(ddp_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "info", str(ddp_db), "--format", "json")
    assert code == 0
    runs = {r["name"]: r for r in json.loads(out)["runs"]}
    assert set(runs) == {"ddp", "sync"}
    assert [r["rank"] for r in runs["ddp"]["ranks"]] == [0, 1]
    raw = json.load(gzip.open(TRACES / "cpu_ddp_2r/rank1.step5.pt.trace.json.gz"))["traceEvents"]
    ops = sum(
        e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation", "python_function")
        for e in raw
    )
    assert runs["ddp"]["ranks"][1]["Op"] == ops
    assert runs["sync"]["edges"]["SYNCS"] == 4
    code, out, _ = _run(capsys, "info", str(ddp_db))
    assert code == 0 and "run 'ddp': world size 2" in out
    # the files by name under their folder, said once; Kineto's session span is no skipped event
    assert f"files in {TRACES / 'cpu_ddp_2r'}" in out
    assert "rank1.step5.pt.trace.json.gz" in out and '{"Trace": 1}' not in out
    assert runs["ddp"]["ranks"][1]["skipped"] == '{"Trace": 1}'  # JSON keeps the counts


@needs_traces
def test_query_with_param_as_csv(ddp_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        capsys,
        "query",
        str(ddp_db),
        "MATCH (o:Op) WHERE o.run = $run AND o.name STARTS WITH 'gloo:' "
        "RETURN o.rank AS rank, count(*) AS n ORDER BY rank",
        "--param",
        "run=ddp",
        "--format",
        "csv",
    )
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["rank"] for r in rows] == ["0", "1"]
    assert rows[0]["n"] == rows[1]["n"] != "0"


@needs_traces
def test_query_limit_prints_the_first_rows_and_says_so(
    ddp_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cypher = "MATCH (o:Op) WHERE o.run = 'ddp' RETURN o.ev_idx AS i ORDER BY i"
    code, every, err = _run(capsys, "query", str(ddp_db), cypher, "--format", "csv")
    assert code == 0 and "(--limit" not in err
    code, first, err = _run(capsys, "query", str(ddp_db), cypher, "--format", "csv", "--limit", "7")
    assert code == 0 and "the first 7 row(s) (--limit; there are more)" in err
    assert first.splitlines() == every.splitlines()[:8]  # the header and 7 rows
    code, _, err = _run(capsys, "query", str(ddp_db), cypher, "--limit", "0")
    assert code == 2 and err.count("\n") == 1 and "--limit 0: at least 1" in err


@needs_traces
def test_canned_query_and_listing(ddp_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "queries")
    assert code == 0 and "collective-skew" in out and "params: run (string)" in out
    code, out, _ = _run(
        capsys,
        "query",
        str(ddp_db),
        "--canned",
        "collective-skew",
        "--param",
        "run=ddp",
        "--format",
        "json",
    )
    assert code == 0
    rows = json.loads(out)
    assert rows and all(r["participants"] == 2 for r in rows)


@needs_traces
def test_a_parameter_the_query_does_not_use_is_ignored_with_a_warning(
    ddp_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A notebook passes run= to every query out of habit: said, not refused."""
    argv = ["query", str(ddp_db), "MATCH (n:Op) RETURN count(*) AS n", "--param", "rank=3"]
    code, out, err = _run(capsys, *argv)
    assert code == 0 and int(out.split()[-1]) > 0
    assert "ignoring --param rank: the query does not use $rank" in err
    with pytest.warns(UserWarning, match=r"ignoring parameter\(s\) \['run'\]"):
        rows = tracegraph.open(ddp_db).query("MATCH (n:Op) RETURN count(*) AS n", run="x")
    assert rows.column("n")[0].as_py() > 0


@needs_traces
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["query", "{db}", "MATCH (n RETURN n"], "Parser exception"),
        (["query", "{db}", "MATC (n) RETURN n"], "queries are read-only"),
        (["query", "{db}", "--canned", "nope"], "no canned query 'nope'"),
        (["query", "{tmp}/missing.kuzu", "RETURN 1"], "no such database"),
    ],
)
def test_query_errors_are_one_line_exit_2(
    ddp_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    argv = [a.format(db=ddp_db, tmp=tmp_path) for a in argv]
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err


def _bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    (tmp / "empty_dir").mkdir()
    (tmp / "not_json.json").write_text("this is not json")
    (tmp / "truncated.json.gz").write_bytes(CONTROL.read_bytes()[:20_000])
    (tmp / "no_events.json").write_text(json.dumps({"schemaVersion": 1}))
    (tmp / "empty.json").write_text(json.dumps({"traceEvents": []}))
    return {
        "folder": (tmp / "empty_dir", "no trace files"),
        "non-json": (tmp / "not_json.json", "not a Kineto JSON trace"),
        "truncated gzip": (tmp / "truncated.json.gz", "truncated gzip"),
        "no traceEvents": (tmp / "no_events.json", "no 'traceEvents'"),
        "empty trace": (tmp / "empty.json", "no events"),
    }


@needs_traces
@pytest.mark.parametrize(
    "case", ["folder", "non-json", "truncated gzip", "no traceEvents", "empty trace"]
)
def test_bad_input_leaves_database_unchanged(
    ddp_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    db = tmp_path / "copy.kuzu"
    shutil.copyfile(ddp_db, db)
    before = db.read_bytes()
    path, message = _bad_inputs(tmp_path)[case]
    code, out, err = _run(capsys, "ingest", str(path), "--db", str(db))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and str(path) in err and message in err
    assert db.read_bytes() == before
    assert not list(tmp_path.glob(".copy.kuzu.staging-*"))


@needs_traces
def test_duplicate_run_name_is_refused(
    ddp_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "copy.kuzu"
    shutil.copyfile(ddp_db, db)
    before = db.read_bytes()
    code, _, err = _run(capsys, "ingest", str(EVENT_SYNC), "--db", str(db), "--run", "ddp")
    assert code == 2 and "run 'ddp' already exists" in err
    assert db.read_bytes() == before


def test_version_comes_from_the_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == (
        f"tracegraph {version('tracegraph')} (kuzu {version('kuzu')})"
    )


@needs_traces
def test_edges_says_why_inferred_syncs_and_exported_sync_deps_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The inferred waits cover the whole trace; the edge set holds those in its window: the
    two counts `edges` prints are the SYNCS and what `export --sync-deps` writes."""
    db = tmp_path / "nccl.kuzu"
    code, _, _ = _run(capsys, "ingest", str(TRACES / "hta/nccl_parser_config"), "--db", str(db))
    assert code == 0
    code, out, _ = _run(capsys, "edges", str(db), "--native")
    found = re.search(r"; ([\d,]+) sync waits inferred .* whole trace \(SYNCS\), ([\d,]+) of them "
                      r"in the set's window\(s\) as sync_dependency edges", out)  # fmt: skip
    assert code == 0 and found
    inferred, in_set = (int(g.replace(",", "")) for g in found.groups())
    syncs = tracegraph.open(db).query("MATCH ()-[s:SYNCS]->() RETURN count(*) AS n")
    assert syncs["n"][0].as_py() == inferred > in_set
    out_file = tmp_path / "deps.json"
    code, out, _ = _run(
        capsys, "export", str(db), "--sync-deps", str(out_file), "--edge-set", "native"
    )
    assert code == 0 and f"wrote {out_file}: {in_set:,} sync dependencies" in out


def test_every_command_module_is_registered() -> None:
    """A module of explorer/commands/ with `add_parser` is a command: `cli.COMMANDS` lists
    it (else it would silently be missing from `tracegraph --help`), and `--help` shows it."""
    import importlib
    import pkgutil

    from tracegraph.explorer import cli, commands

    defined = {
        m.name
        for m in pkgutil.iter_modules(commands.__path__)
        if hasattr(importlib.import_module(f"{commands.__name__}.{m.name}"), "add_parser")
    }
    assert defined == set(cli.COMMANDS)
    shown = cli._parser().format_help()
    assert all(name in shown for name in cli.COMMANDS)


def test_the_parsers_int64_limits_are_the_catalogues() -> None:
    """`commands/common.py` keeps its own copy (parsing must not load Kuzu): the same values."""
    from tracegraph.explorer.commands import common
    from tracegraph.queries import catalog

    assert (common.INT64_MIN, common.INT64_MAX) == (catalog.INT64_MIN, catalog.INT64_MAX)
