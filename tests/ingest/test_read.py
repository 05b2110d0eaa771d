"""Reading a file block by block (`read.rank_traces` past `stream_bytes`) against parsing it
whole (`parse.parse_file`): the same ranks, the same event tables column for column, the same
refusals; one rank in memory at a time; nothing left on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.examples.synthetic import write_merged as write_synthetic_merged
from tracegraph.ingest import parse, read
from tracegraph.ingest.errors import TraceFormatError
from tracegraph.ingest.parse import RankTrace
from tracegraph.ingest.parse_options import DEFAULT_OPTIONS, ParseOptions
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore

from ..conftest import MERGED, RANK_OF_PID, RANK_OF_PID_KEY, label_counts, trace, trace_files
from ..conftest import trace_id as shared_id
from .merge import write_merged

STREAM = 1  # bytes: every file is read block by block


def _facts(t: RankTrace) -> tuple[object, ...]:
    return (t.file, t.rank, t.world_size, t.schema_version, t.base_time_ns, t.device,
            t.distributed_info, dict(t.dropped))  # fmt: skip


def _assert_same(path: Path, options: ParseOptions = DEFAULT_OPTIONS) -> list[RankTrace]:
    whole = parse.parse_file(path, options)
    spill_at = path.with_name(".spill")
    streamed = list(
        read.rank_traces(
            path, ParseOptions(**{**vars(options), "stream_bytes": STREAM, "spill_at": spill_at})
        )  # fmt: skip
    )
    assert [_facts(t) for t in streamed] == [_facts(t) for t in whole]
    for a, b in zip(streamed, whole, strict=True):
        assert a.events.schema == b.events.schema
        assert a.events.equals(b.events), f"rank {a.rank}"
    assert not list(path.parent.glob(".spill-*"))  # the spill folder is gone
    return streamed


SYNTHETIC = {
    "4 ranks, stacks, annotations, a late rank": SyntheticConfig(
        ranks=4, steps=2, layers=3, python_stacks=True, annotate=True, late_rank=2, late_us=900
    ),
    "3 ranks, sync kinds, two devices": SyntheticConfig(
        ranks=3, steps=2, layers=2, sync_kinds=True, devices_per_rank=2, extra_streams=1
    ),
}


@pytest.mark.parametrize("config", SYNTHETIC.values(), ids=SYNTHETIC.keys())
@pytest.mark.parametrize("rank_in_args", [True, False], ids=["args.rank", "metadata"])
def test_a_synthetic_merged_file_reads_the_same_block_by_block(
    tmp_path: Path, config: SyntheticConfig, rank_in_args: bool
) -> None:
    path = write_synthetic_merged(config, tmp_path / "merged.json", rank_in_args=rank_in_args)
    assert [t.rank for t in _assert_same(path)] == list(range(config.ranks))


def test_a_gzipped_rank_file_reads_the_same_block_by_block(tmp_path: Path) -> None:
    config = SyntheticConfig(ranks=2, steps=2, layers=2)
    for path in write_per_rank(config, tmp_path, gzip=True):
        _assert_same(path)


@pytest.mark.parametrize("shared_file", trace_files(), ids=shared_id)
def test_every_shared_trace_reads_the_same_block_by_block(shared_file: Path) -> None:
    _assert_same(shared_file)


@pytest.mark.parametrize("key", sorted(MERGED))
def test_merged_real_traces_read_the_same_block_by_block(tmp_path: Path, key: str) -> None:
    if not trace(MERGED[key][0]).exists():
        pytest.skip("shared traces absent")
    unlabelled = RANK_OF_PID if key == RANK_OF_PID_KEY else {}
    path = write_merged([trace(f) for f in MERGED[key]], tmp_path / "m.json", unlabelled)
    _assert_same(path, ParseOptions(rank_of_pid=unlabelled))


def _doc(events: list[dict[str, object]], **top: object) -> str:
    return json.dumps({"schemaVersion": 1, **top, "traceEvents": events})


def _x(pid: int, ts: int, rank: int | None = None, cat: str = "cpu_op") -> dict[str, object]:
    args = {} if rank is None else {"rank": rank}
    return {"ph": "X", "cat": cat, "name": "op", "pid": pid, "tid": 1, "ts": ts, "dur": 1,
            "args": args}  # fmt: skip


def _meta(pid: int, label: str) -> dict[str, object]:
    return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": label}}


REFUSED = {
    "truncated": '{"traceEvents": [{"ph": "X"',
    "no traceEvents": '{"schemaVersion": 1}',
    "traceEvents not a list": '{"traceEvents": {"a": 1}}',
    "no events": '{"traceEvents": []}',
    "malformed event": '{"traceEvents": [{"ph": "X"}, {"ph": "X", "ts": [}]}',
    "no complete events": _doc([{"ph": "i", "ts": 1}]),
    "all dropped": _doc([{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1}]),
    "pid labelled two ranks": _doc(
        [_meta(5, "rank 1"), _meta(5, "rank 3"), _x(5, 10), _x(6, 10, rank=0)]
    ),
    "metadata and args.rank disagree": _doc(
        [_meta(5, "rank 1"), _x(5, 10), _x(5, 20, rank=2), _x(6, 10, rank=0)]
    ),
    "a pid with no rank": _doc([_x(5, 10, rank=0), _x(6, 10, rank=1), _x(7, 10)]),
    "distributedInfo not an object": _doc([_x(1, 10)], distributedInfo=[1]),
    "a bad args.rank": _doc([_x(1, 10, rank=-4)]),
}


@pytest.mark.parametrize("text", REFUSED.values(), ids=REFUSED.keys())
def test_what_the_whole_parse_refuses_the_block_reader_refuses(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(TraceFormatError) as whole:
        parse.parse_file(path)
    with pytest.raises(TraceFormatError) as streamed:
        list(read.rank_traces(path, ParseOptions(stream_bytes=STREAM, spill_at=tmp_path / "s")))
    assert str(streamed.value).startswith(f"{path}: ")
    if "malformed" not in str(whole.value) and "not a Kineto" not in str(whole.value):
        assert str(streamed.value) == str(whole.value)  # the same words where both can tell
    assert not list(tmp_path.glob("s-*"))


def test_ranks_come_one_at_a_time(tmp_path: Path) -> None:
    """While a consumer holds only the rank in hand, Arrow holds about one rank, not the file."""
    config = SyntheticConfig(ranks=8, steps=2, layers=6)
    path = write_synthetic_merged(config, tmp_path / "merged.json")
    whole = parse.parse_file(path)
    largest = max(t.events.get_total_buffer_size() for t in whole)
    everything = sum(t.events.get_total_buffer_size() for t in whole)
    del whole
    before = pa.total_allocated_bytes()  # what the rest of the process holds
    held = []
    options = ParseOptions(stream_bytes=STREAM, spill_at=tmp_path / "s")
    for rank_trace in read.rank_traces(path, options):
        held.append(pa.total_allocated_bytes() - before)
        del rank_trace
    assert len(held) == 8
    assert max(held) < 3 * largest < everything / 2


def test_a_streamed_ingest_gives_the_same_database(tmp_path: Path) -> None:
    config = SyntheticConfig(ranks=4, steps=2, layers=3, python_stacks=True, annotate=True)
    gz = write_synthetic_merged(config, tmp_path / "merged.json.gz")
    assert gz.read_bytes()[:2] == b"\x1f\x8b"
    counts = []
    for name, stream in (("whole", None), ("blocks", STREAM)):
        db = tmp_path / f"{name}.kuzu"
        ingest([gz], db, IngestOptions(parse=ParseOptions(stream_bytes=stream)))
        store = GraphStore(db)
        counts.append((label_counts(store), _ids(store)))
        store.close()
    assert counts[0] == counts[1]
    assert not list(tmp_path.glob(".*.spill-*"))


def _ids(store: GraphStore) -> list[int]:
    table = store.run("MATCH (n:Kernel) RETURN n.id AS id, n.ts AS ts ORDER BY id").table
    return table["id"].to_pylist() + table["ts"].to_pylist()


def test_an_ingest_removes_the_spill_a_killed_one_left(tmp_path: Path) -> None:
    config = SyntheticConfig(ranks=2, steps=1, layers=1)
    path = write_synthetic_merged(config, tmp_path / "merged.json")
    db = tmp_path / "run.kuzu"
    left = tmp_path / ".run.kuzu.spill-4242"
    left.mkdir()
    (left / "1.arrow").write_bytes(b"x" * 100)
    ingest([path], db, IngestOptions(parse=ParseOptions(stream_bytes=STREAM)))
    assert not left.exists()
    assert not list(tmp_path.glob(".run.kuzu.spill-*"))


def test_a_failed_ingest_removes_its_spill_at_once(tmp_path: Path) -> None:
    """Not when the traceback is collected: a notebook keeps the last one."""
    config = SyntheticConfig(ranks=2, steps=1, layers=1)
    folder = tmp_path / "traces"
    write_per_rank(config, folder)  # rank0.trace.json, rank1.trace.json
    write_synthetic_merged(config, folder / "zz-merged.json")  # ranks 0 and 1 again
    options = IngestOptions(parse=ParseOptions(stream_bytes=STREAM))
    with pytest.raises(TraceFormatError, match="rank 0 is also in") as caught:
        ingest([folder], tmp_path / "run.kuzu", options)
    assert caught.value.__traceback__ is not None  # the traceback, with its frames, is alive
    assert not list(tmp_path.glob(".run.kuzu.spill-*"))
