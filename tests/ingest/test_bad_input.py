"""Bad trace input through `tracegraph ingest FILE --db DB`: every case is one line on stderr,
`tracegraph: error: <file>: <problem>`, exit code 2, and every file of a database that already
holds a good run byte-identical before and after; or, for events that can be left out (no
numeric ts, a negative dur), they are dropped, counted in Rank.skipped and reported.

The traces are written here (no shared traces needed): a small CPU + GPU rank, with the bad
value patched into the JSON text, so that numbers no float can hold reach the parser as
written.
"""

from __future__ import annotations

import gzip
import json
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from tracegraph.explorer import cli
from tracegraph.explorer.cli import main
from tracegraph.ingest import file_bytes, parse
from tracegraph.ingest.errors import TraceFormatError
from tracegraph.ingest.file_bytes import read_trace_bytes
from tracegraph.ingest.parse import parse_bytes
from tracegraph.ingest.parse_options import ParseOptions
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore

from ..dbfiles import db_digest

MIB = 1 << 20
PID, GPU_PID = 7, 0


def events() -> list[dict[str, Any]]:
    """One step: an annotation holding two ops, a launch inside the first, its kernel, the
    launch flow, and metadata. Indices: 0 step, 1 aten::mm, 2 aten::add, 3 cudaLaunchKernel,
    4 kernel, 5-6 flow, 7 process_name."""
    return [
        _x("user_annotation", "ProfilerStep#1", 1000, 500, {"External id": 1}),
        _x("cpu_op", "aten::mm", 1010.5, 100.25, {"External id": 2}),
        _x("cpu_op", "aten::add", 1200, 50, {"External id": 3}),
        _x("cuda_runtime", "cudaLaunchKernel", 1020, 10, {"correlation": 11, "External id": 2}),
        {
            **_x("kernel", "gemm", 1040, 30, {"correlation": 11, "device": 0, "stream": 7}),
            "pid": GPU_PID,
            "tid": 7,
        },
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 11, "pid": PID, "tid": PID, "ts": 1020},
        {
            "ph": "f",
            "cat": "ac2g",
            "name": "ac2g",
            "id": 11,
            "pid": GPU_PID,
            "tid": 7,
            "ts": 1040,
            "bp": "e",
        },  # fmt: skip
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python"}},
    ]


def _x(cat: str, name: str, ts: float, dur: float, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": PID, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def trace_text(evs: list[dict[str, Any]] | None = None, **top: Any) -> str:
    doc = {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 2}, **top}
    doc["traceEvents"] = events() if evs is None else evs
    return json.dumps(doc)


def with_field(index: int, field: str, raw: str | None) -> str:
    """The trace with traceEvents[index][field] set to the raw JSON text `raw` (None: removed)."""
    evs = events()
    if raw is None:
        del evs[index][field]
        return trace_text(evs)
    evs[index][field] = "@@PATCH@@"
    return trace_text(evs).replace('"@@PATCH@@"', raw)


# -- the database and the CLI -------------------------------------------------------------


@pytest.fixture(scope="module")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bad-input-template")
    (folder / "good.json").write_text(trace_text())
    db = folder / "run.kuzu"
    ingest([folder / "good.json"], db, IngestOptions(run="good"))
    return db


@pytest.fixture
def db(template_db: Path, tmp_path: Path) -> Path:
    """A copy of the database holding one good run: every entry named after it."""
    target = tmp_path / "db" / template_db.name
    target.parent.mkdir()
    for entry in template_db.parent.glob(template_db.name + "*"):
        copy = target.parent / entry.name
        shutil.copytree(entry, copy) if entry.is_dir() else shutil.copy2(entry, copy)
    return target


def run_cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(
    capsys: pytest.CaptureFixture[str], path: Path, db: Path, *parts: str, argv: tuple = ()
) -> str:
    """`tracegraph ingest path --db db` fails with one line naming the file and every part,
    exit code 2, the database untouched and no staging file left."""
    before = db_digest(db)
    code, out, err = run_cli(capsys, "ingest", path, "--db", db, "--run", "bad", *argv)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1 and err.startswith(f"tracegraph: error: {path}: "), err
    for part in parts:
        assert part in err, (part, err)
    assert db_digest(db) == before
    assert not [p for p in db.parent.iterdir() if "staging" in p.name]
    return err


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def rank_rows(db: Path, run: str) -> list[dict[str, Any]]:
    store = GraphStore(db)
    table = store.run(
        "MATCH (r:Rank) WHERE r.run = $run RETURN r.rank AS rank, r.op_count AS ops, "
        "r.runtime_count AS runtimes, r.kernel_count AS kernels, r.skipped AS skipped "
        "ORDER BY rank",
        {"run": run},
    ).table
    return table.to_pylist()


def call_pairs(db: Path, run: str) -> set[tuple[int, int]]:
    store = GraphStore(db)
    table = store.run(
        "MATCH (a:Op:Runtime)-[:CALLS]->(b:Op:Runtime) WHERE a.run = $run "
        "RETURN a.ev_idx AS a, b.ev_idx AS b",
        {"run": run},
    ).table
    return set(zip(table["a"].to_pylist(), table["b"].to_pylist(), strict=True))


def test_the_good_trace_ingests(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    code, out, err = run_cli(capsys, "ingest", write(tmp_path, "t.json", trace_text()), "--db",
                             db, "--run", "again")  # fmt: skip
    assert (code, err) == (0, "")
    assert rank_rows(db, "again") == [
        {"rank": 0, "ops": 3, "runtimes": 1, "kernels": 1, "skipped": "{}"}
    ]


# -- 1. timestamps and durations beyond INT64 ns ------------------------------------------


@pytest.mark.parametrize(
    ("index", "field", "raw"),
    [
        (2, "ts", "9300000000000000000.5"),  # 9.3e18 µs: 2^63 ns is 9.2e15 µs
        (2, "ts", "-9300000000000000000.5"),
        (1, "ts", "9223372036854775.808"),  # exactly 2^63 ns
        (1, "ts", "4611686018427387.904"),  # 2^62 ns, the first out of range
        (2, "ts", "1e999999999"),  # must not expand a billion digits
        (2, "ts", "9" * 5000),  # Arrow's decimal parser wraps this to -1
        (3, "dur", "9300000000000000000"),
        (3, "dur", "9223372036854775.807"),
        (3, "dur", "1.5e300"),
    ],
)
def test_timestamps_and_durations_beyond_int64_are_refused(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], index: int, field: str, raw: str
):
    path = write(tmp_path, "big.json", with_field(index, field, raw))
    assert_refused(capsys, path, db, f"event {index}: '{field}'", "out of range")


def test_ends_beyond_int64_are_refused(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Each value within range, but the span from the first start to the last end is not."""
    text = with_field(0, "ts", "-4611686018427387")
    path = write(tmp_path, "span.json", text.replace('"ts": 1200', '"ts": 4611686018427387'))
    assert_refused(capsys, path, db, "timestamps span", "INT64")


def test_plain_extreme_numbers_stay_exact():
    """Exponents and long decimals take the exact one-by-one path, beside plain numbers."""
    text = trace_text()
    for old, new in [
        ('"ts": 1010.5', '"ts": 1.0105e3'),
        ('"dur": 50,', '"dur": 0.30000000000000004,'),
        ('"ts": 1200', '"ts": 1e-2147483647'),  # crashed Arrow's decimal parser
    ]:
        text = text.replace(old, new, 1)
    (trace,) = parse_bytes(text.encode(), "extreme.json")
    names = trace.events["name"].to_pylist()
    ts = dict(zip(names, trace.events["ts"].to_pylist(), strict=True))
    dur = dict(zip(names, trace.events["dur"].to_pylist(), strict=True))
    assert (ts["aten::mm"], ts["aten::add"], dur["aten::add"]) == (1_010_500, 0, 300)


# -- 2. deep nesting ------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [1_000, 100_000])
@pytest.mark.parametrize("where", ["args", "distributedInfo", "event"])
def test_deeply_nested_json_is_refused(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int, where: str
):
    deep = "[" * depth + "]" * depth
    if where == "args":
        evs = events()
        evs[1]["args"]["nested"] = "@@PATCH@@"
        text = trace_text(evs)
    elif where == "event":
        evs = events()
        evs.append("@@PATCH@@")  # type: ignore[arg-type]
        text = trace_text(evs)
    else:
        text = trace_text(distributedInfo="@@PATCH@@")
    path = write(tmp_path, "deep.json", text.replace('"@@PATCH@@"', deep))
    assert_refused(capsys, path, db, "nested too deeply")


# -- 3. merged files: a pid labelled with two ranks ---------------------------------------


def _named(pid: int, name: str) -> dict[str, Any]:
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}


def test_a_pid_labelled_with_two_ranks_is_refused(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Before: the later label won, and rank 1 silently got every event of the pid."""
    evs = [*events(), _named(PID, "rank 3: python"), _named(PID, "rank 1: python")]
    path = write(tmp_path, "two_ranks.json", trace_text(evs))
    assert_refused(capsys, path, db, f"pid {PID}", "rank 1 and rank 3", "--rank-of-pid")


def test_args_rank_against_the_pids_label_is_refused(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    evs = [*events(), _named(PID, "rank 3: python")]
    evs[2]["args"]["rank"] = 1
    path = write(tmp_path, "args_vs_label.json", trace_text(evs))
    assert_refused(capsys, path, db, f"pid {PID}", "rank 3", "event 2", "args.rank 1")


def test_rank_of_pid_settles_a_doubly_labelled_pid(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    evs = [*events(), _named(PID, "rank 3: python"), _named(PID, "rank 1: python")]
    path = write(tmp_path, "two_ranks.json", trace_text(evs))
    argv = ("--rank-of-pid", f"{PID}=3", "--rank-of-pid", f"{GPU_PID}=3")
    code, _, err = run_cli(capsys, "ingest", path, "--db", db, "--run", "settled", *argv)
    assert (code, err) == (0, "")
    assert [r["rank"] for r in rank_rows(db, "settled")] == [3]


def test_a_doubly_labelled_pid_whose_events_say_their_rank_is_split(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Merge tools that keep colliding pids label every event: then the labels do not matter."""
    evs = [e for e in events() if e["ph"] != "s" and e["ph"] != "f"]  # flows carry no rank
    evs += [_named(PID, "rank 3: python"), _named(PID, "rank 1: python")]
    for i, e in enumerate(evs):
        if e["ph"] == "X":
            e.setdefault("args", {})["rank"] = 1 if i == 2 else 3
    path = write(tmp_path, "labelled.json", trace_text(evs))
    code, _, err = run_cli(capsys, "ingest", path, "--db", db, "--run", "split")
    assert (code, err) == (0, "")
    assert [(r["rank"], r["ops"]) for r in rank_rows(db, "split")] == [(1, 1), (3, 2)]


@pytest.mark.parametrize("value", ['"abc"', "1.5", "-1", "1180591620717411303424"])
def test_a_bad_args_rank_is_refused(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
):
    evs = events()
    evs[2]["args"]["rank"] = "@@PATCH@@"
    path = write(tmp_path, "arg_rank.json", trace_text(evs).replace('"@@PATCH@@"', value))
    assert_refused(capsys, path, db, "event 2: args.rank is", "not a rank")


# -- 4. and 5. events without a numeric ts, with a bad dur: dropped and counted -----------


@pytest.mark.parametrize("raw", [None, "null", '"1010.5"', '"abc"', "[1]", "{}", "true"])
def test_complete_events_without_a_numeric_ts_are_dropped_and_counted(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], raw: str | None
):
    path = write(tmp_path, "no_ts.json", with_field(1, "ts", raw))
    code, out, err = run_cli(capsys, "ingest", path, "--db", db, "--run", "no-ts")
    assert code == 0 and "2 Op" in out
    assert err == (
        f"tracegraph: skipped 1 event(s) of rank 0 in {path}: no numeric 'ts' "
        '(counted in Rank.skipped as "no ts")\n'
    )
    (row,) = rank_rows(db, "no-ts")
    assert json.loads(row["skipped"]) == {"no ts": 1} and row["ops"] == 2


def test_flow_events_without_ts_are_counted_too(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    path = write(tmp_path, "flow.json", with_field(5, "ts", None))
    code, _, err = run_cli(capsys, "ingest", path, "--db", db, "--run", "flow")
    assert code == 0 and "skipped 1 event(s) of rank 0" in err
    assert json.loads(rank_rows(db, "flow")[0]["skipped"]) == {"no ts": 1}


@pytest.mark.parametrize("raw", [None, "null"])
def test_events_without_a_phase_are_dropped_and_counted(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], raw: str | None
):
    """Not known to be complete events, so no nodes; but not silently gone either."""
    path = write(tmp_path, "no_ph.json", with_field(2, "ph", raw))
    code, _, err = run_cli(capsys, "ingest", path, "--db", db, "--run", "no-ph")
    assert code == 0
    assert err == (
        f"tracegraph: skipped 1 event(s) of rank 0 in {path}: no 'ph' "
        '(counted in Rank.skipped as "no ph")\n'
    )
    (row,) = rank_rows(db, "no-ph")
    assert json.loads(row["skipped"]) == {"no ph": 1} and row["ops"] == 2


def test_a_trace_whose_every_event_lacks_ts_is_refused(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    evs = [{k: v for k, v in e.items() if k != "ts"} for e in events()]
    path = write(tmp_path, "none.json", trace_text(evs))
    assert_refused(capsys, path, db, "no complete ('X') events to keep", "7 with no numeric 'ts'")


@pytest.mark.parametrize("raw", ["-5", "-0.001", '"abc"', "null", "[]"])
def test_a_negative_or_non_numeric_dur_is_dropped_and_counted(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], raw: str
):
    """Before: a negative dur was stored, and the range nested nothing, so its children got
    another parent. Now the event is left out: CALLS is as if it were not there."""
    path = write(tmp_path, "neg.json", with_field(1, "dur", raw))
    code, _, err = run_cli(capsys, "ingest", path, "--db", db, "--run", "neg")
    assert code == 0
    assert err == (
        f"tracegraph: skipped 1 event(s) of rank 0 in {path}: negative or non-numeric 'dur' "
        '(counted in Rank.skipped as "bad dur")\n'
    )
    (row,) = rank_rows(db, "neg")
    assert json.loads(row["skipped"]) == {"bad dur": 1} and row["ops"] == 2
    gone = events()
    gone[1] = _named(99, "placeholder")  # same indices, no event 1
    capsys.readouterr()
    assert main(["ingest", str(write(tmp_path, "gone.json", trace_text(gone))), "--db", str(db),
                 "--run", "gone"]) == 0  # fmt: skip
    assert call_pairs(db, "neg") == call_pairs(db, "gone") == {(0, 2), (0, 3)}


def test_a_missing_dur_is_a_zero_length_range(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Not dropped (as before): HTA and Perfetto show such events as instants."""
    path = write(tmp_path, "no_dur.json", with_field(2, "dur", None))
    code, _, err = run_cli(capsys, "ingest", path, "--db", db, "--run", "no-dur")
    assert (code, err) == (0, "")
    assert rank_rows(db, "no-dur")[0]["ops"] == 3


# -- 6. distributedInfo ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["1180591620717411303424", '"abc"', "1.5", "-1", "true", "[0]", '{"r":1}', "1048576"]
)
def test_a_bad_distributed_rank_is_refused_not_rank_0(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
):
    text = trace_text(distributedInfo={"rank": "@@PATCH@@"}).replace('"@@PATCH@@"', value)
    path = write(tmp_path, "rank.json", text)
    err = assert_refused(capsys, path, db, "distributedInfo.rank is", "not a rank", "--rank N")
    assert value[:20] in err


def test_rank_overrides_a_bad_distributed_rank(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    path = write(tmp_path, "rank.json", trace_text(distributedInfo={"rank": "abc"}))
    code, _, err = run_cli(capsys, "ingest", path, "--db", db, "--run", "given", "--rank", "2")
    assert (code, err) == (0, "")
    assert [r["rank"] for r in rank_rows(db, "given")] == [2]


@pytest.mark.parametrize(
    ("top", "message"),
    [
        ({"distributedInfo": {"rank": 0, "world_size": "x"}}, "distributedInfo.world_size"),
        ({"distributedInfo": {"rank": 0, "world_size": 0}}, "distributedInfo.world_size"),
        ({"distributedInfo": "rank 0"}, "distributedInfo is"),
        ({"distributedInfo": [0]}, "not an object"),
    ],
)
def test_a_bad_distributed_info_is_refused(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], top: dict, message: str
):
    path = write(tmp_path, "info.json", trace_text(**top))
    assert_refused(capsys, path, db, message)


# -- 7. gzip bombs ----------------------------------------------------------------------------


def write_bomb(path: Path, mib: int, level: int = 1, tail: bytes = b"") -> Path:
    """A gzip of a trace's opening and `mib` MiB of spaces, written a MiB at a time."""
    with gzip.open(path, "wb", compresslevel=level) as f:
        f.write(b'{"traceEvents": ')
        for _ in range(mib):
            f.write(b" " * MIB)
        f.write(tail)
    return path


def test_a_gzip_bomb_is_refused_at_the_size_limit(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(file_bytes, "MAX_JSON_BYTES", 50 * MIB)
    bomb = write_bomb(tmp_path / "bomb.json.gz", 60)
    assert_refused(capsys, bomb, db, "more than the limit of 50.0 MiB", "--max-json-gb")


def test_a_gzip_bomb_is_refused_by_its_ratio(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    """Past RATIO_FLOOR (1 GiB by default), a .gz expanding over 200x is refused."""
    monkeypatch.setattr(file_bytes, "RATIO_FLOOR", 20 * MIB)
    bomb = write_bomb(tmp_path / "bomb.json.gz", 60, level=9)
    assert_refused(capsys, bomb, db, "expands more than 200x", "likely gzip bomb")


def test_decompression_stops_at_the_limit(tmp_path: Path):
    """Streaming: a 1 GiB bomb (many gzip members) is refused having held about the limit."""
    member = gzip.compress(b" " * (16 * MIB), compresslevel=9)
    bomb = tmp_path / "members.json.gz"
    bomb.write_bytes(gzip.compress(b'{"traceEvents": ') + member * 64)
    tracemalloc.start()
    try:
        with pytest.raises(TraceFormatError, match="more than the limit of 20.0 MiB"):
            read_trace_bytes(bomb, ParseOptions(max_json_bytes=20 * MIB))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * 20 * MIB + len(bomb.read_bytes()), peak


def test_a_raised_limit_takes_a_large_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(file_bytes, "MAX_JSON_BYTES", 10 * MIB)
    tail = json.dumps(events()).encode() + b', "distributedInfo": {"rank": 0}}'
    trace = write_bomb(tmp_path / "padded.json.gz", 12, tail=tail)
    with pytest.raises(TraceFormatError, match="limit"):
        parse.parse_file(trace)
    (rank,) = parse.parse_file(trace, ParseOptions(max_json_bytes=20 * MIB))
    assert rank.events.num_rows == 7
    result = ingest(
        [trace], tmp_path / "big.kuzu", IngestOptions(parse=ParseOptions(max_json_bytes=20 * MIB))
    )
    assert [r.counts["Op"] for r in result.ranks] == [3]


def test_plain_json_over_the_limit_is_refused(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(file_bytes, "MAX_JSON_BYTES", 1000)
    path = write(tmp_path, "plain.json", trace_text() + " " * 2000)
    assert_refused(capsys, path, db, "of JSON is over the limit", "--max-json-gb")


def _has_max_json_flag() -> bool:
    parser = cli._parser()
    ingest_parser = parser._subparsers._group_actions[0].choices["ingest"]  # type: ignore[union-attr]
    return any("--max-json-gb" in a.option_strings for a in ingest_parser._actions)


@pytest.mark.skipif(not _has_max_json_flag(), reason="the CLI has no --max-json-gb yet")
def test_the_cli_flag_raises_the_limit(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(file_bytes, "MAX_JSON_BYTES", 10 * MIB)
    tail = json.dumps(events()).encode() + b', "distributedInfo": {"rank": 0}}'
    trace = write_bomb(tmp_path / "padded.json.gz", 12, tail=tail)
    assert_refused(capsys, trace, db, "limit")
    code, _, err = run_cli(capsys, "ingest", trace, "--db", db, "--run", "big",
                           "--max-json-gb", "0.02")  # fmt: skip
    assert (code, err) == (0, "")


# -- 8. files that are no trace at all ----------------------------------------------------------


def _bad_files() -> dict[str, tuple[bytes, str]]:
    good = trace_text().encode()
    return {
        "empty file": (b"", "not a Kineto JSON trace"),
        "non-JSON": (b"this is not json", "not a Kineto JSON trace"),
        "binary": (b"\x00\xff\xfe\x01", "not a Kineto JSON trace"),
        "a number": (b"42", "not a Kineto JSON trace"),
        "a string": (b'"traceEvents"', "not a Kineto JSON trace"),
        "null": (b"null", "not a Kineto JSON trace"),
        "an object without events": (b'{"schemaVersion": 1}', "no 'traceEvents'"),
        "traceEvents a number": (b'{"traceEvents": 5}', "not a Kineto JSON trace"),
        "no events": (b'{"traceEvents": []}', "no events"),
        "an empty list": (b"[]", "no events"),
        "events that are numbers": (b'{"traceEvents": [1, 2]}', "malformed event 0"),
        "a phase that is a number": (b'{"traceEvents": [{"ph": 5}]}', "malformed event 0"),
        "args that are a list": (
            b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 1, "args": [1]}]}',
            "unreadable args of event 0",
        ),
        "only metadata": (b'{"traceEvents": [{"ph": "M", "name": "x"}]}', "no complete"),
        "invalid UTF-8": (good.replace(b"aten::mm", b"aten::\xff"), "malformed event"),
        "truncated JSON": (good[: len(good) // 2], "not a Kineto JSON trace"),
        "truncated gzip": (gzip.compress(good)[:-30], "truncated gzip"),
        "gzip magic only": (b"\x1f\x8b", "truncated gzip"),
        "gzip with trailing garbage": (gzip.compress(good) + b"garbage", "corrupt"),
        "gzip of nothing": (gzip.compress(b""), "not a Kineto JSON trace"),
    }


@pytest.mark.parametrize("case", list(_bad_files()))
def test_files_that_are_no_trace_are_refused(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
):
    data, message = _bad_files()[case]
    path = write(tmp_path, "bad.json.gz" if data[:2] == b"\x1f\x8b" else "bad.json", data)
    assert_refused(capsys, path, db, message)


def test_gzip_members_and_padding_are_read(tmp_path: Path):
    good = trace_text().encode()
    data = gzip.compress(good[:100]) + gzip.compress(good[100:]) + b"\x00" * 64
    (rank,) = parse_bytes(data, "members.json.gz")
    assert rank.events.num_rows == 7
