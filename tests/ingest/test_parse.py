"""One file → Arrow events per rank: exact nanoseconds, the rank rules, and one typed error
(naming the file) for everything that is not a Kineto trace."""

from __future__ import annotations

import gzip
import json
import pickle
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import pyarrow.compute as pc
import pytest

from tracegraph.ingest import parse
from tracegraph.ingest.errors import TraceFormatError
from tracegraph.ingest.parse import parse_file
from tracegraph.ingest.parse_options import ParseOptions

from ..conftest import TracePool, needs_traces, trace
from .oracle import load_json, read_bytes, trace_events

NS_RESOLUTION = "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
OLD_LIST = "kineto/samples/resnet50_num_workers_0/worker0.pt.trace.json.gz"
SMALL = "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz"


def write_json(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def one_event(tmp_path: Path, fields: str, args: str = "{}") -> Path:
    """A trace with one cpu_op whose ts/dur JSON text is given verbatim."""
    head = '"ph": "X", "cat": "cpu_op", "name": "mm", "pid": 7, "tid": 7'
    event = f'{{{head}, {fields}, "args": {args}}}'
    return write_json(tmp_path / "one.json", f'{{"traceEvents": [{event}]}}')


def test_epoch_microseconds_with_three_decimals_become_exact_nanoseconds(tmp_path: Path):
    path = one_event(tmp_path, '"ts": 1712195495519689.047, "dur": 20.176')
    (rank,) = parse_file(path)
    assert rank.events.select(["ts", "dur"]).to_pylist() == [
        {"ts": 1712195495519689047, "dur": 20176}
    ]


@needs_traces
def test_ns_resolution_trace_keeps_its_nanoseconds_in_the_database(traces: TracePool):
    path = trace(NS_RESOLUTION)
    assert b'"ts": 1712195495519689.047' in read_bytes(path)
    ingested = traces.db_of(path)
    assert ingested.scalar("MATCH (n:Op) WHERE n.ts = 1712195495519689047 RETURN count(*)") == 1
    # and no timestamp was rounded to a whole microsecond on the way
    sub_us = ingested.scalar("MATCH (n:Kernel) WHERE n.ts % 1000 <> 0 RETURN count(*)")
    assert sub_us > 0.9 * ingested.scalar("MATCH (n:Kernel) RETURN count(*)")


@needs_traces
def test_old_format_integer_microseconds_and_top_level_list(traces: TracePool):
    path = trace(OLD_LIST)
    text = read_bytes(path).decode()
    assert text.lstrip().startswith("[")  # no {"traceEvents": ...} wrapper
    first, _ = json.JSONDecoder().raw_decode(text, text.index("{"))
    assert (first["ph"], first["ts"], first["dur"]) == ("X", 1606910596297023, 13)
    ingested = traces.db_of(path)
    (op,) = ingested.rows("MATCH (n:Op) WHERE n.ev_idx = 0 RETURN n.ts AS ts, n.dur AS dur")
    assert op == {"ts": 1606910596297023000, "dur": 13000}
    assert [r.rank for r in ingested.result.ranks] == [0]


def test_top_level_list_parses(tmp_path: Path):
    path = write_json(
        tmp_path / "list.json",
        '[{"ph": "X", "cat": "Operator", "name": "aten::add", "pid": 1, "tid": "42", '
        '"ts": 10, "dur": 3}]',
    )
    (rank,) = parse_file(path)
    assert rank.rank == 0
    assert rank.events.select(["label", "tid", "ts", "dur"]).to_pylist() == [
        {"label": "Op", "tid": 42, "ts": 10_000, "dur": 3_000}
    ]


@pytest.mark.parametrize("edge", ["4611686018427387.903", "-4611686018427387.904"])  # ±2^62 ns
@pytest.mark.parametrize("odd", [None, "0.0005", "1e3"])
def test_timestamps_read_in_one_cast_equal_the_exact_decimal_reading(
    tmp_path: Path, edge: str, odd: str | None
):
    """Up to 3 decimals (trailing zeros beyond them too) and within ±2^62 ns, a column is read
    as the decimal's unscaled integer; one value of 4 decimals or an exponent sends the whole
    column the exact way (half to even). Either way: Decimal's ns, the oracle here."""
    values = [edge, "1712195495519689.047", "0", "-0.001", "12.5", "1.5000", "-12.340", "7"]
    if odd is not None:
        values.append(odd)
    head = '"ph": "X", "cat": "cpu_op", "name": "mm", "pid": 7, "tid": 7, "dur": 1'
    events = ", ".join(f'{{{head}, "ts": {v}}}' for v in values)
    (rank,) = parse_file(write_json(tmp_path / "ts.json", f'{{"traceEvents": [{events}]}}'))
    exact = [int((Decimal(v) * 1000).to_integral_value(ROUND_HALF_EVEN)) for v in values]
    assert rank.events.sort_by("ev_idx")["ts"].to_pylist() == exact


def test_microseconds_with_more_than_six_decimals_round_to_the_nanosecond(tmp_path: Path):
    path = one_event(tmp_path, '"ts": 1000.0000004, "dur": 0.30000000000000004')
    (rank,) = parse_file(path)
    assert rank.events.select(["ts", "dur"]).to_pylist() == [{"ts": 1_000_000, "dur": 300}]


def test_ids_beyond_int64_become_null(tmp_path: Path):
    path = one_event(tmp_path, '"ts": 1, "dur": 1', '{"External id": 18446744073709551615}')
    (rank,) = parse_file(path)
    assert rank.events["external_id"].to_pylist() == [None]


def test_rank_comes_from_options_then_distributed_info_then_zero(tmp_path: Path):
    event = '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1}'
    with_info = write_json(
        tmp_path / "info.json",
        f'{{"distributedInfo": {{"rank": 3, "world_size": 8}}, "traceEvents": [{event}]}}',
    )
    without = write_json(tmp_path / "bare.json", f'{{"traceEvents": [{event}]}}')
    assert [(r.rank, r.world_size) for r in parse_file(with_info)] == [(3, 8)]
    assert [r.rank for r in parse_file(with_info, ParseOptions(rank=5))] == [5]
    assert [r.rank for r in parse_file(without)] == [0]


def merged_two_rank_file(tmp_path: Path) -> Path:
    """Two ranks' events on pids 10 and 20; rank 1's flow event says no rank (pid tells it)."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 10, "tid": 1, "ts": 1, "dur": 5,
         "args": {"rank": 0}},
        {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 20, "tid": 1, "ts": 2, "dur": 5,
         "args": {"rank": 1}},
        {"ph": "s", "cat": "ac2g", "name": "launch", "pid": 20, "tid": 1, "ts": 3, "id": 9},
        {"ph": "X", "cat": "cpu_op", "name": "c", "pid": 10, "tid": 1, "ts": 3, "dur": 1,
         "args": {"rank": 0}},
    ]  # fmt: skip
    return write_json(tmp_path / "merged.json", json.dumps({"traceEvents": events}))


def test_merged_file_splits_by_rank_keeping_file_positions(tmp_path: Path):
    ranks = parse_file(merged_two_rank_file(tmp_path))
    assert [(r.rank, r.world_size) for r in ranks] == [(0, 2), (1, 2)]
    assert ranks[0].events.select(["ev_idx", "name"]).to_pylist() == [
        {"ev_idx": 0, "name": "a"},
        {"ev_idx": 3, "name": "c"},
    ]
    assert ranks[1].events["ev_idx"].to_pylist() == [1, 2]


def test_rank_option_on_a_merged_file_is_an_error(tmp_path: Path):
    path = merged_two_rank_file(tmp_path)
    with pytest.raises(TraceFormatError, match="several ranks") as caught:
        parse_file(path, ParseOptions(rank=0))
    assert caught.value.path == str(path)


def assert_format_error(path: Path, reason: str) -> None:
    with pytest.raises(TraceFormatError) as caught:
        parse_file(path)
    assert caught.value.path == str(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert reason in caught.value.reason


def test_non_json_file_is_a_format_error(tmp_path: Path):
    assert_format_error(write_json(tmp_path / "notes.json", "ts,dur\n1,2\n"), "not a Kineto JSON")
    zipped = tmp_path / "notes.json.gz"
    zipped.write_bytes(gzip.compress(b"hello"))
    assert_format_error(zipped, "not a Kineto JSON")


@needs_traces
def test_truncated_gzip_is_a_format_error(tmp_path: Path):
    data = trace(SMALL).read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    assert_format_error(cut, "truncated gzip")


def test_json_without_trace_events_is_a_format_error(tmp_path: Path):
    assert_format_error(write_json(tmp_path / "x.json", '{"schemaVersion": 1}'), "traceEvents")
    assert_format_error(write_json(tmp_path / "y.json", '{"traceEvents": null}'), "traceEvents")


def test_empty_trace_events_is_a_format_error(tmp_path: Path):
    assert_format_error(write_json(tmp_path / "x.json", '{"traceEvents": []}'), "no events")
    only_metadata = '{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1}]}'
    assert_format_error(write_json(tmp_path / "y.json", only_metadata), "no complete")


def test_trace_format_error_survives_pickling():
    error = TraceFormatError("/traces/rank0.json", "trace has no events")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.path, copy.reason, str(copy)) == (error.path, error.reason, str(error))


# small files are decoded whole (`parse.WHOLE_DECODE_BYTES`), larger ones a chunk at a time:
# traces unlike each other (ROCm, ns timestamps, CUDA syncs, gloo DDP with memory, MTIA, a list)
WHOLE_OR_CHUNKED = (
    NS_RESOLUTION,
    SMALL,
    OLD_LIST,
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta/mtia_inference_trace/mtia_inference_rank_0.json.gz",
    "cpu_ddp_2r_memory/rank1.step6.pt.trace.json.gz",
    "hta/nccl_parser_config/nccl_data.json.gz",
)


@needs_traces
@pytest.mark.parametrize("name", WHOLE_OR_CHUNKED)
def test_a_file_decoded_whole_gives_what_its_chunks_give(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = trace(name)
    taken: list[bool] = []
    top_level = parse._top_level

    def spied(*args: object) -> tuple[object, object, bool]:
        found = top_level(*args)  # type: ignore[arg-type]
        taken.append(found[2])
        return found

    monkeypatch.setattr(parse, "_top_level", spied)
    monkeypatch.setattr(parse, "WHOLE_DECODE_BYTES", 1 << 30)  # whatever its size
    whole = parse_file(path)
    monkeypatch.setattr(parse, "WHOLE_DECODE_BYTES", 0)
    monkeypatch.setattr(parse, "CHUNK_EVENTS", 997)  # several chunks, cut anywhere
    chunked = parse_file(path)
    assert taken == [True, False]  # each way was taken
    assert [r.rank for r in whole] == [r.rank for r in chunked]
    for a, b in zip(whole, chunked, strict=True):
        assert a.events.equals(b.events)
        assert (a.dropped, a.world_size, a.device, a.host, a.gpu, a.distributed_info) == (
            b.dropped, b.world_size, b.device, b.host, b.gpu, b.distributed_info
        )  # fmt: skip


# the args each link needs, as the raw JSON says them (names as Kineto writes them)
ARG_COLUMNS = {
    "correlation": ("correlation",),
    "external_id": ("External id", "external id"),
    "seq": ("Sequence number",),
    "device": ("device",),
    "stream": ("stream", "stream_id"),
    "sync_kind": ("cuda_sync_kind",),
    "wait_on_stream": ("wait_on_stream",),
    "wait_on_event_corr": ("wait_on_cuda_event_record_corr_id",),
    "pg_name": ("Process Group Name",),
    "coll_name": ("Collective name",),
    "coll_seq": ("Seq",),
}


def _arg_value(args: dict, keys: tuple[str, ...], text: bool) -> object:
    """The first of `keys` present with a value, as the column holds it: text as text (a
    number as its digits), else a whole number within INT64 (quoted digits or hex too), else
    None."""
    for key in keys:
        value = args.get(key)
        if value is None:
            continue
        if text:
            return value if isinstance(value, str) else str(value)
        if isinstance(value, str) and value.lstrip("-").isdigit():
            value = int(value)
        elif isinstance(value, str) and value.lower().startswith("0x"):
            value = int(value, 16)  # ROCm's streams
        if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
            return value
    return None


@needs_traces
@pytest.mark.parametrize("name", WHOLE_OR_CHUNKED)
def test_the_args_columns_equal_what_the_json_says(name: str) -> None:
    path = trace(name)
    events = trace_events(load_json(path))
    for rank in parse_file(path):
        table = rank.events.select(["ev_idx", "ph", *ARG_COLUMNS]).to_pylist()
        for row in table:
            raw = events[row["ev_idx"]]
            args = raw.get("args") if row["ph"] in ("X", "i") else None
            args = args if isinstance(args, dict) else {}
            for column, keys in ARG_COLUMNS.items():
                text = column in ("sync_kind", "pg_name", "coll_name")
                assert row[column] == _arg_value(args, keys, text), (name, row["ev_idx"], column)


# the three shared traces whose launches a summary reads from their flow events, and others
FLOW_READS = (
    *WHOLE_OR_CHUNKED,
    "hta/negative_queue_length_values_check/rank0.json.gz",
    "hta/trace_diff/test/test.json.gz",
    "tracelens/traces/mi300/resnet_act_checkpoint.json.gz",
)


@needs_traces
@pytest.mark.parametrize("name", FLOW_READS)
def test_a_read_without_flow_rows_has_every_other_row_and_count(name: str) -> None:
    """`flow_rows=False` (a summary's first read): the rows a read with them has, but for the
    flow events, which are still counted among those dropped."""
    path = trace(name)
    with_flows = parse_file(path)
    without = parse_file(path, ParseOptions(flow_rows=False))
    assert [r.rank for r in without] == [r.rank for r in with_flows]
    for a, b in zip(without, with_flows, strict=True):
        kept = b.events.filter(pc.fill_null(pc.not_equal(b.events["label"], "flow"), True))
        assert a.events.equals(kept)
        assert (a.dropped, a.world_size, a.device, a.host, a.gpu, a.flow_rows) == (
            b.dropped, b.world_size, b.device, b.host, b.gpu, False
        )  # fmt: skip
        assert b.flow_rows
    flows_in_json = sum(e.get("ph") in ("s", "f", "t") for e in trace_events(load_json(path)))
    assert flows_in_json == sum(pc.sum(pc.equal(b.events["label"], "flow")).as_py() or 0
                                for b in with_flows)  # fmt: skip


def flow_events(tmp_path: Path, *flows: dict[str, object]) -> Path:
    """A trace of one cpu_op at ts 10 and the flow events `flows`."""
    op = {"ph": "X", "cat": "cpu_op", "name": "mm", "pid": 7, "tid": 7, "ts": 10, "dur": 5}
    base = {"ph": "s", "cat": "ac2g", "name": "launch", "pid": 7, "tid": 7, "id": 1}
    events = [op, *({**base, **f} for f in flows)]
    return write_json(tmp_path / "flows.json", json.dumps({"traceEvents": events}))


def test_flow_events_left_out_are_counted_and_checked_as_rows(tmp_path: Path) -> None:
    without = ParseOptions(flow_rows=False)
    no_ts = flow_events(tmp_path, {"ts": "soon"}, {"ts": 12}, {"ph": "f"})
    (a,), (b,) = parse_file(no_ts), parse_file(no_ts, without)
    assert a.dropped == b.dropped == {"no ts": 2}
    assert b.events["name"].to_pylist() == ["mm"]
    # flows whose span (with a flow's dur) overflows an INT64 are refused either way
    far = 4_600_000_000_000_000  # µs: within ±2^62 ns
    for dur, refused in ((0, False), (100_000_000_000_000, True)):
        path = flow_events(tmp_path, {"ts": -far}, {"ts": far, "dur": dur})
        for options in (ParseOptions(), without):
            if refused:
                with pytest.raises(TraceFormatError, match="timestamps span"):
                    parse_file(path, options)
            else:
                assert parse_file(path, options)[0].dropped == {}
    with pytest.raises(TraceFormatError, match="out of range"):
        parse_file(flow_events(tmp_path, {"ts": 1e17}), without)


def test_a_merged_file_read_without_flow_rows_asks_for_them(tmp_path: Path) -> None:
    """Each flow event of a merged file is given its rank (here by its pid): a read that left
    them out cannot, and says so."""
    with pytest.raises(parse.FlowRowsNeeded):
        parse_file(merged_two_rank_file(tmp_path), ParseOptions(flow_rows=False))
