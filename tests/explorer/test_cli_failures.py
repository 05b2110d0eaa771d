"""The `tracegraph` command when things go wrong: one-line errors (exit 2) that leave every file
of the database as it was, builds where every rank failed, window warnings, what-if tables, and
folders holding files that are no traces."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.explorer.cli import main
from tracegraph.explorer.commands.common import exit_code_for
from tracegraph.ingest.edgesets.hta import edge_set as hta_edge_set
from tracegraph.ingest.edgesets.hta.edge_set import EdgeSetResult
from tracegraph.ingest.edgesets.hta.env import _read_marker, parse_spec
from tracegraph.ingest.edgesets.native.edge_set import build_native_edge_set
from tracegraph.ingest.edgesets.native.options import emulate
from tracegraph.ingest.edgesets.native.window import Window
from tracegraph.ingest.edgesets.records import RankOutcome
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore

from ..conftest import TRACES, needs_traces
from ..dbfiles import db_digest
from ..ingest.edgesets.conftest import cache_root as hta_cache_root

FAULTS = TRACES / "cpu_ddp_2r_faults"
CPU_ONLY = TRACES / "hta/cpu_only"
ALEXNET = TRACES / "hta/critical_path/alexnet"


def _run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error(err: str, db: Path | str, *parts: str) -> None:
    """Exactly one stderr line, `tracegraph: error: <db>: <problem>`, holding every part."""
    assert err.count("\n") == 1, err
    assert err.startswith(f"tracegraph: error: {db}: "), err
    for part in parts:
        assert part in err, (part, err)


@pytest.fixture(scope="module")
def syn_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    """A 2-rank, 3-step synthetic job with edge sets over different windows: native:hta-0.5.0
    over every step, native:traceinsight-0.6.1 over ProfilerStep[1], and plain `native` over the
    whole trace. Also the per-rank, per-window lengths the builder gave."""
    folder = tmp_path_factory.mktemp("cli-failures")
    write_per_rank(SyntheticConfig(ranks=2, steps=3, layers=4), folder / "traces")
    db = folder / "syn.kuzu"
    ingest([folder / "traces"], db, IngestOptions(run="syn"))
    built = {
        "native:hta-0.5.0": build_native_edge_set(db, options=emulate("hta-0.5.0"), all_steps=True),
        "native:traceinsight-0.6.1": build_native_edge_set(
            db, options=emulate("traceinsight-0.6.1"), window=Window("ProfilerStep", 1)
        ),
        "native": build_native_edge_set(db),
    }
    windows = {
        name: {
            (s.rank, str(w["step"] or w["annotation"])): w.get("path_length_ns")
            for s in result.ranks
            for w in s.windows
        }
        for name, result in built.items()
    }
    return db, windows


@pytest.fixture
def db_copy(syn_db: tuple[Path, dict], tmp_path: Path) -> Path:
    db, _ = syn_db
    copy = tmp_path / "copy.kuzu"
    for entry in db.parent.glob(db.name + "*"):
        target = tmp_path / entry.name.replace(db.name, copy.name, 1)
        if entry.is_dir():
            shutil.copytree(entry, target)
        else:
            shutil.copyfile(entry, target)
    return copy


# -- one-line errors that change nothing ---------------------------------------------------

BAD_COMMANDS = {
    "whatif unknown edge type": (
        ["whatif", "{db}", "native:hta-0.5.0", "--remove", "foo"],
        ["--remove foo: unknown edge type", "sync_dependency", "collective_dependency"],
    ),
    "whatif unknown kind": (
        ["whatif", "{db}", "native:hta-0.5.0", "--scale", "gpu=0.5"],
        ["--scale gpu=0.5: unknown kind 'gpu'", "kernel, cpu, collective"],
    ),
    "whatif factor not a number": (
        ["whatif", "{db}", "native:hta-0.5.0", "--scale", "kernel=fast"],
        ["--scale kernel=fast", "not a number"],
    ),
    "whatif negative factor": (
        ["whatif", "{db}", "native:hta-0.5.0", "--scale", "kernel=-1"],
        ["--scale kernel=-1", ">= 0"],
    ),
    "whatif no such edge set": (["whatif", "{db}", "nope"], ["no edge set 'nope'"]),
    "canned int param given a word": (
        [
            "query",
            "{db}",
            "--canned",
            "critical-path",
            "--param",
            "run=syn",
            "--param",
            "rank=one",
            "--param",
            "edge_set=native",
        ],
        ["rank=one: not an int", "critical-path", "rank (int)"],
    ),  # fmt: skip
    "canned int param out of range": (
        [
            "query",
            "{db}",
            "--canned",
            "top-kernels",
            "--param",
            "run=syn",
            "--param",
            "rank=99999999999999999999",
        ],
        ["rank=99999999999999999999", "64-bit"],
    ),  # fmt: skip
    "canned param it does not declare": (
        ["query", "{db}", "--canned", "step-times", "--param", "run=syn", "--param", "rank=1"],
        ["has no parameter 'rank'", "run (string)"],
    ),
    "list of mixed types": (
        ["query", "{db}", "RETURN $x AS x", "--param", 'x=[1,2,"a"]'],
        ['--param x=[1,2,"a"]', "one type"],
    ),
    "empty list": (["query", "{db}", "RETURN $x AS x", "--param", "x=[]"], ["--param x=[]"]),
    "integer out of range": (
        ["query", "{db}", "RETURN $x AS x", "--param", "x=99999999999999999999"],
        ["--param x=99999999999999999999", "64-bit"],
    ),
    "param without =": (
        ["query", "{db}", "RETURN 1", "--param", "noequals"],
        ["--param noequals: expected NAME=VALUE"],
    ),
    "rank-of-pid rank out of range": (
        [
            "ingest",
            str(TRACES / "cpu_ddp_2r"),
            "--db",
            "{db}",
            "--run",
            "x",
            "--rank-of-pid",
            "4242=99999999999999999999",
        ],
        ["--rank-of-pid 4242=99999999999999999999", "out of range"],
    ),  # fmt: skip
    "rank-of-pid pid out of range": (
        [
            "ingest",
            str(TRACES / "cpu_ddp_2r"),
            "--db",
            "{db}",
            "--run",
            "x",
            "--rank-of-pid",
            "99999999999999999999=1",
        ],
        ["pid 99999999999999999999 is out of the 64-bit range"],
    ),  # fmt: skip
    "rank-of-pid not integers": (
        ["ingest", str(TRACES / "cpu_ddp_2r"), "--db", "{db}", "--rank-of-pid", "P=one"],
        ["--rank-of-pid P=one: expected PID=RANK"],
    ),
    "report table of --compare alone": (
        ["report", "{db}", "--format", "csv", "--table", "kernels"],
        ["--table kernels: only with --compare OTHER_RUN"],
    ),
    "kernel gap cutoff nan": (
        ["edges", "{db}", "--native", "--kernel-gap-cutoff-us", "nan"],
        ["--kernel-gap-cutoff-us nan", "finite number of µs >= 0"],
    ),
    "kernel gap cutoff negative": (
        ["edges", "{db}", "--native", "--kernel-gap-cutoff-us=-5"],
        ["--kernel-gap-cutoff-us -5", "finite number of µs >= 0"],
    ),
    "kernel gap cutoff infinite": (
        ["edges", "{db}", "--native", "--kernel-gap-cutoff-us", "inf"],
        ["--kernel-gap-cutoff-us inf"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_COMMANDS))
def test_bad_input_is_one_line_exit_2_and_changes_no_file(
    db_copy: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    argv, parts = BAD_COMMANDS[case]
    if any("cpu_ddp_2r" in a for a in argv) and not TRACES.is_dir():
        pytest.skip(f"real traces not at {TRACES}")
    before = db_digest(db_copy)
    code, out, err = _run(capsys, *(a.format(db=db_copy) for a in argv))
    assert code == 2 and out == ""
    assert_one_error(err, db_copy, *parts)
    assert "Traceback" not in err
    assert db_digest(db_copy) == before


def test_valid_params_still_typed(syn_db: tuple[Path, dict], capsys: pytest.CaptureFixture[str]):
    db, _ = syn_db
    code, out, _ = _run(
        capsys,
        "query",
        db,
        "RETURN $n + 1 AS n, $xs AS xs, $f AS f, $name AS name, $b AS b",
        "--param", "n=41", "--param", "xs=[1, 2.5]", "--param", "f=0.5",
        "--param", "name=[param|pytorch.model|0]", "--param", "b=true",
        "--format", "json",
    )  # fmt: skip
    assert code == 0
    assert json.loads(out) == [
        {"n": 42, "xs": [1.0, 2.5], "f": 0.5, "name": "[param|pytorch.model|0]", "b": True}
    ]
    code, out, _ = _run(
        capsys, "query", db, "--canned", "top-kernels", "--param", "run=syn", "--param",
        "rank=1", "--format", "json",
    )  # fmt: skip
    assert code == 0 and json.loads(out)


def test_a_number_in_double_quotes_is_a_string_parameter(
    syn_db: tuple[Path, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = syn_db
    code, out, _ = _run(
        capsys, "query", db, "RETURN $run AS run, typeof($run) AS t, $e AS e, $n AS n",
        "--param", 'run="2024"', "--param", 'e=""', "--param", "n=2024", "--format", "json",
    )  # fmt: skip
    assert code == 0
    assert json.loads(out) == [{"run": "2024", "t": "STRING", "e": "", "n": 2024}]
    code, out, _ = _run(
        capsys, "query", db, "--canned", "top-kernels", "--param", 'run="syn"', "--param",
        "rank=1", "--format", "json",
    )  # fmt: skip
    assert code == 0 and json.loads(out)


def test_parameter_like_text_in_literals_is_no_parameter(
    syn_db: tuple[Path, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = syn_db
    cypher = "RETURN '$x' AS a, \"$y\" AS `$z`, $w AS w // $v\n/* $u */"
    code, out, err = _run(capsys, "query", db, cypher, "--param", "w=1", "--format", "json")
    assert code == 0, err
    assert json.loads(out) == [{"a": "$x", "$z": "$y", "w": 1}]


def test_argparse_errors_are_one_line_too(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["edges", "x.kuzu", "--native", "--kernel-gap-cutoff-us", "soon"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tracegraph: error: edges: ")
    assert "--kernel-gap-cutoff-us" in err and "--help" in err


# -- edge sets where every rank failed -----------------------------------------------------


def _ranks(*outcomes: tuple[int, str, str]) -> list[SimpleNamespace]:
    return [SimpleNamespace(rank=r, status=s, message=m) for r, s, m in outcomes]


def test_exit_code_for_all_failed_prints_one_line_per_rank(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ranks = _ranks((0, "failed", "no GPU kernels:\n  CPU-only trace"), (3, "failed", ""))
    assert exit_code_for(ranks, "run.kuzu") == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "tracegraph: error: run.kuzu: rank 0: no GPU kernels: CPU-only trace",
        "tracegraph: error: run.kuzu: rank 3: failed",
    ]
    assert exit_code_for(ranks) == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        "tracegraph: error: rank 0: no GPU kernels: CPU-only trace"
    )


@pytest.mark.parametrize(
    "ranks",
    [
        _ranks((0, "ok", ""), (1, "failed", "annotation not found")),
        _ranks((0, "ok", ""), (1, "ok", "")),
        [],
    ],
    ids=["partial", "all ok", "no ranks"],
)
def test_exit_code_for_is_0_unless_every_rank_failed(
    ranks: list[SimpleNamespace], capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_code_for(ranks, "run.kuzu") == 0
    assert capsys.readouterr().err == ""


def _hta_result(*statuses: tuple[int, str, str]) -> EdgeSetResult:
    ranks = tuple(
        RankOutcome(r, s, m, 1000 if s == "ok" else None, (),
                    {"dependency": 3} if s == "ok" else {}, {}, 0, {})
        for r, s, m in statuses
    )  # fmt: skip
    return EdgeSetResult("hta-0.5.0", "syn", "HolisticTraceAnalysis==0.5.0", "0.5.0", "", None,
                         ranks, 3 * sum(s == "ok" for _, s, _ in statuses), 0.1)  # fmt: skip


@pytest.mark.parametrize(
    ("statuses", "code"),
    [
        (((0, "failed", "ValueError: no kernels"), (1, "failed", "ValueError: no kernels")), 2),
        (((0, "ok", ""), (1, "failed", "ValueError: no kernels")), 0),
    ],
    ids=["all failed", "partial"],
)
def test_hta_edges_exit_code_follows_the_ranks(
    db_copy: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    statuses: tuple[tuple[int, str, str], ...],
    code: int,
) -> None:
    """The CLI's side of `edges --hta` (the build itself, which needs HTA, is stubbed)."""
    monkeypatch.setattr(hta_edge_set, "build_hta_edge_set", lambda *a, **k: _hta_result(*statuses))
    got, out, err = _run(capsys, "edges", db_copy, "--hta", "HolisticTraceAnalysis==0.5.0")
    assert got == code
    assert "edge set 'hta-0.5.0' of run 'syn'" in out  # what was recorded, either way
    assert "rank 1: failed: ValueError: no kernels" in out
    if code == 2:
        assert err.splitlines() == [
            f"tracegraph: error: {db_copy}: rank {r}: {m}" for r, _, m in statuses
        ]
    else:
        assert err == ""


def _hta_env_cached() -> bool:
    spec = parse_spec("HolisticTraceAnalysis==0.5.0")
    return _read_marker(hta_cache_root() / spec.name, spec) is not None


@needs_traces
def test_hta_on_a_cpu_only_run_is_refused_before_any_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """HTA's critical path fails on CPU-only traces: refused in one line naming --native, before
    an HTA environment is built (the cache stays empty), the database as it was."""
    db = tmp_path / "hta.kuzu"
    assert main(["ingest", str(CPU_ONLY), "--db", str(db), "--run", "cpu"]) == 0
    capsys.readouterr()
    before = db_digest(db)
    cache = tmp_path / "empty-cache"
    code, _, err = _run(capsys, "edges", db, "--hta", "HolisticTraceAnalysis==0.5.0", "--cache",
                        cache)  # fmt: skip
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith(f"tracegraph: error: {db}: run 'cpu' has no GPU kernels")
    assert "use `--native`" in line
    assert not cache.exists() and db_digest(db) == before


@needs_traces
@pytest.mark.skipif(
    not _hta_env_cached(), reason="HTA 0.5.0 environment not cached (building it needs PyPI)"
)
def test_hta_on_a_partial_run_writes_nothing_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One rank of two gives no edges (CPU-only beside alexnet): the build is refused and the
    database left as it was; --allow-empty writes the ok rank and records the failed one."""
    db = tmp_path / "hta.kuzu"
    assert main(["ingest", str(CPU_ONLY), str(ALEXNET), "--db", str(db), "--run", "mixed"]) == 0
    capsys.readouterr()
    before = db_digest(db)
    spec = "HolisticTraceAnalysis==0.5.0"
    code, _, err = _run(capsys, "edges", db, "--hta", spec, "--cache", hta_cache_root())
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[0].startswith(f"tracegraph: error: {db}: rank 34: ")
    assert "not written: rank(s) [34] gave no edges" in lines[-1]
    assert db_digest(db) == before
    code, _, err = _run(capsys, "edges", db, "--hta", spec, "--cache", hta_cache_root(),
                        "--allow-empty")  # fmt: skip
    assert code == 0 and "error" not in err
    with GraphStore(db) as store:
        (ranks,) = store.run("MATCH (e:EdgeSet) RETURN e.ranks AS ranks").table["ranks"]
    assert sorted(v["status"] for v in json.loads(ranks.as_py()).values()) == ["failed", "ok"]


def test_native_edges_where_every_rank_failed_exit_2_and_change_no_file(
    db_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = db_digest(db_copy)
    code, out, err = _run(capsys, "edges", db_copy, "--native", "--annotation", "NoSuchStep")
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[:2] == [
        f"tracegraph: error: {db_copy}: rank {r}: Could not find annotation NoSuchStep in the "
        "trace."
        for r in (0, 1)
    ]
    assert all(line.startswith(f"tracegraph: error: {db_copy}: ") for line in lines)
    assert db_digest(db_copy) == before


# -- what-if: one labelled row per rank and window, in µs -----------------------------------


def _csv(out: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(out)))


def test_whatif_rows_per_rank_and_step_in_us(
    syn_db: tuple[Path, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    db, windows = syn_db
    code, out, err = _run(capsys, "whatif", db, "native:hta-0.5.0", "--format", "csv")
    assert code == 0 and err == ""
    rows = _csv(out)
    assert list(rows[0]) == [
        "rank", "window", "path_before_us", "path_after_us", "ratio", "path_edges_changed"
    ]  # fmt: skip
    built = {k: v for k, v in windows["native:hta-0.5.0"].items() if v is not None}
    assert len(built) >= 4  # HTA 0.5.0 drops the last step: 2 of 3 steps, 2 ranks
    assert {(int(r["rank"]), r["window"]): float(r["path_before_us"]) for r in rows} == {
        k: v / 1e3 for k, v in built.items()
    }
    assert all(float(r["ratio"]) == 1.0 for r in rows)

    code, out, _ = _run(capsys, "whatif", db, "native:hta-0.5.0", "--scale", "kernel=0.5",
                        "--format", "csv")  # fmt: skip
    for row in _csv(out):
        before, after = float(row["path_before_us"]), float(row["path_after_us"])
        assert after <= before
        assert float(row["ratio"]) == pytest.approx(after / before, abs=1e-3)

    code, out, _ = _run(capsys, "whatif", db, "native:hta-0.5.0", "--scale", "kernel=0.5")
    lines = out.splitlines()
    assert code == 0 and "kernel ×0.5" in lines[0] and "µs" in lines[1]
    header = next(line for line in lines if line.startswith("rank"))
    assert header.split() == [
        "rank", "window", "path_before_us", "path_after_us", "ratio", "path_edges_changed"
    ]  # fmt: skip
    assert sum("ProfilerStep#" in line for line in lines) == len(built)


def test_whatif_compare_names_the_windows_and_warns_when_they_differ(
    syn_db: tuple[Path, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = syn_db
    code, out, err = _run(capsys, "whatif", db, "native:traceinsight-0.6.1", "--compare",
                          "native", "--format", "csv")  # fmt: skip
    assert code == 0
    assert err == (
        "tracegraph: warning: native:traceinsight-0.6.1 covers ProfilerStep[1], native covers "
        "the whole trace: differences include the window\n"
    )
    rows = _csv(out)
    assert [(r["rank"], r["window"]) for r in rows] == [("-1", "whole trace")] + [
        (str(r), "ProfilerStep[1]") for r in (0, 1)
    ]
    code, out, err = _run(capsys, "whatif", db, "native:hta-0.5.0", "--compare",
                          "critical-sync-only", "--remove", "kernel_kernel_delay",
                          "--format", "csv")  # fmt: skip
    assert code == 0 and err == ""
    for row in _csv(out):
        assert row["a_before_us"] == row["b_before_us"] and row["window"].startswith("Profiler")


# -- diff: a warning when the windows differ -------------------------------------------------


def test_diff_warns_when_windows_differ_and_exit_code_is_unchanged(
    syn_db: tuple[Path, dict], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = syn_db
    code, out, err = _run(capsys, "diff", db, "native:traceinsight-0.6.1", "native")
    assert code == 0 and out
    assert err == (
        "tracegraph: warning: native:traceinsight-0.6.1 covers ProfilerStep[1], native covers "
        "the whole trace: differences include the window\n"
    )
    code, out, err = _run(capsys, "diff", db, "native:hta-0.5.0", "native", "--format", "json")
    assert code == 0
    assert "native:hta-0.5.0 covers every ProfilerStep, native covers the whole trace" in err
    assert json.loads(out)["windows"] == {"a": "every ProfilerStep", "b": "whole trace"}
    # the same window: no warning
    code, _, err = _run(capsys, "diff", db, "native:hta-0.5.0", "native:hta-0.5.0")
    assert code == 0 and err == ""


# -- ingest of folders: files directly in them, non-traces skipped with a notice --------------


@needs_traces
def test_ingest_recursive_skips_a_json_that_is_no_trace_with_a_notice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "faults.kuzu"
    code, out, err = _run(capsys, "ingest", FAULTS, "--db", db, "--recursive")
    assert code == 0 and "2 rank(s)" in out
    assert err == "tracegraph: skipped meta/run_meta.json: not a trace (no traceEvents)\n"
    code, out, err = _run(capsys, "ingest", FAULTS, "--db", db, "--run", "flat")
    assert code == 0 and "2 rank(s)" in out and err == ""  # meta/ is not looked into


@needs_traces
@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("meta/run_meta.json", "JSON has no 'traceEvents' list"),
        ("meta", "folder holds no traces (run_meta.json: not a trace)"),
    ],
    ids=["named file", "folder of no traces"],
)
def test_ingest_of_no_trace_is_one_line_exit_2_and_changes_no_file(
    db_copy: Path, capsys: pytest.CaptureFixture[str], target: str, message: str
) -> None:
    before = db_digest(db_copy)
    path = FAULTS / target
    code, out, err = _run(capsys, "ingest", path, "--db", db_copy, "--run", "x")
    assert code == 2 and out == ""
    assert err == f"tracegraph: error: {path}: {message}\n"
    assert db_digest(db_copy) == before
    assert not list(db_copy.parent.glob(f".{db_copy.name}.staging-*"))


def test_a_canned_query_for_a_run_that_is_not_there_is_an_error(tmp_path, capsys) -> None:
    """A misspelt run is one line naming the runs, exit 2, not an empty result."""
    from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
    from tracegraph.explorer.cli import main

    write_per_rank(SyntheticConfig(ranks=1, steps=1, layers=1), tmp_path / "t")
    db = tmp_path / "r.kuzu"
    assert main(["ingest", str(tmp_path / "t"), "--db", str(db), "--run", "job"]) == 0
    capsys.readouterr()
    argv = ["query", str(db), "--canned", "step-times", "--param", "run=jbo"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"tracegraph: error: {db}: no run 'jbo' (runs: ['job'])"
    argv[-1] = "run=job"
    assert main(argv) == 0


@needs_traces
def test_the_first_hta_build_says_what_it_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A first `edges --hta` builds HTA's environment (~450 MB, a minute or two on a slow
    mirror): a line before (what, how big, where), a line per build step, the time it took."""
    db = tmp_path / "hta.kuzu"
    assert main(["ingest", str(ALEXNET), "--db", str(db), "--run", "alexnet"]) == 0
    capsys.readouterr()
    cache = tmp_path / "cache"
    code, out, err = _run(capsys, "edges", db, "--hta", "traceinsight==0.6.1", "--cache", cache)
    if code != 0 and "HTA environment" in err and "failed" in err:
        pytest.skip(f"HTA environment not installable here: {err.strip()[-200:]}")
    assert code == 0 and "edge set 'traceinsight-0.6.1'" in out
    lines = err.strip().splitlines()
    assert lines[0].startswith("tracegraph: building the traceinsight-0.6.1 environment once")
    assert "about 450 MB" in lines[0] and str(cache / "traceinsight-0.6.1") in lines[0]
    assert any("installing traceinsight==0.6.1" in line for line in lines[1:-1])
    assert re.fullmatch(r"tracegraph: built the traceinsight-0.6.1 environment in \d+ s", lines[-1])
    code, _, err = _run(capsys, "edges", db, "--hta", "traceinsight==0.6.1", "--cache", cache)
    assert code == 0 and "building" not in err  # built once
