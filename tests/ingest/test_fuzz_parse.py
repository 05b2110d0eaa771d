"""Fuzzing the trace reader: mutated small traces either parse, into events that keep the
parser's promises, or fail with the project's typed errors; no other exception may escape.

Seeds: a small CPU + GPU trace written here, a merged two-rank version of it, and (where the
shared traces are present) HTA's call_stack/backward_thread and a few hundred events of
critical_path/alexnet. Mutations: bytes flipped, cut, inserted or repeated; JSON tokens
inserted; numbers swapped for huge, tiny or odd ones; fields dropped or given another type
(string, number, null, list, object); events that are no object; deep nesting; rank labels
that disagree; distributedInfo garbled; a gzip layer, whole or damaged. Seeded, so a failure
names the case that reproduces it; a Hypothesis test adds field values of any JSON shape.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracegraph.ingest.columns import NS_LIMIT
from tracegraph.ingest.errors import IngestError, TraceFormatError
from tracegraph.ingest.parse import RankTrace, parse_bytes, parse_file
from tracegraph.ingest.schema import MAX_RANK

from ..conftest import TRACES
from .test_bad_input import events as small_events

BACKWARD_THREAD = TRACES / "hta/call_stack/backward_thread.json"
ALEXNET = TRACES / "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
CASES_PER_SEED = 1_000
TYPED = (TraceFormatError, IngestError)

Doc = dict[str, Any]


# -- seeds ----------------------------------------------------------------------------------


def _small() -> Doc:
    return {
        "schemaVersion": 1,
        "distributedInfo": {"rank": 0, "world_size": 2},
        "traceEvents": small_events(),
    }


def _merged() -> Doc:
    """Two ranks in one file: rank 1's pids moved, labelled by args.rank and metadata."""
    out = []
    for rank in (0, 1):
        for e in small_events():
            e = copy.deepcopy(e)
            e["pid"] = rank * 1000 + e["pid"]
            if e["ph"] == "X":
                e["args"]["rank"] = rank
            if e["ph"] == "M":
                e["args"]["name"] = f"rank {rank}: python"
            out.append(e)
    return {"traceEvents": out}


def _backward_thread() -> Doc:
    return json.loads(BACKWARD_THREAD.read_text())


def _alexnet() -> Doc:
    """The first 200 events (CPU ops) and the first 150 of the others: runtime calls, kernels,
    flows, cuda_sync, metadata."""
    doc = json.loads(gzip.decompress(ALEXNET.read_bytes()))
    evs = doc["traceEvents"]
    others = [e for e in evs[200:] if e.get("cat") != "cpu_op"][:150]
    return {**doc, "traceEvents": evs[:200] + others}


SEEDS: dict[str, Callable[[], Doc]] = {
    "small": _small,
    "merged": _merged,
    "backward_thread": _backward_thread,
    "alexnet": _alexnet,
}
REAL = {"backward_thread": BACKWARD_THREAD, "alexnet": ALEXNET}


# -- mutations ------------------------------------------------------------------------------

FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "bp", "args")
ARG_KEYS = (
    "External id",
    "correlation",
    "Sequence number",
    "stream",
    "device",
    "rank",
    "cuda_sync_kind",
    "wait_on_stream",
    "Process Group Name",
    "Collective name",
    "Seq",
    "wait_on_cuda_event_record_corr_id",
    "name",
    "labels",
)
PHASES = ("X", "s", "f", "t", "M", "i", "B", "E", "", "x", "XX")
CATEGORIES = (
    "cpu_op",
    "user_annotation",
    "cuda_runtime",
    "cuda_driver",
    "kernel",
    "gpu_memcpy",
    "cuda_sync",
    "ac2g",
    "async",
    "Trace",
    "Operator",
    "Kernel",
    "",
    "gpu_user_annotation",
)
# JSON text of odd values, put in place of a field's value or a number
ODD_NUMBERS = (
    "9300000000000000000.5",
    "-9300000000000000000.5",
    "9223372036854775808",
    "18446744073709551616",
    "1e999999999",
    "1e-2147483647",
    "-1e308",
    "1E400",
    "0.30000000000000004",
    "-0",
    "-0.0",
    "0",
    "1e-7",
    "4611686018427387.904",
    "4611686018427387.903",
    "123456789012345678901234.5",
    "9" * 60,
    "-1",
    "1.5",
    "2.5e-3",
    "1048576",
    "1048575",
    "3",
)
ODD_VALUES = (
    *ODD_NUMBERS,
    "null",
    "true",
    "false",
    '""',
    '"abc"',
    '"12"',
    '"0x1f"',
    '"-3"',
    '" 7 "',
    "[]",
    "[1, 2]",
    "{}",
    '{"a": 1}',
    '"\\u0000"',
    '"\\ud800"',
    '"rank 5"',
    '"9300000000000000000"',
    "[[[[[]]]]]",
)
TOKENS = (
    b"null",
    b"[",
    b"]",
    b"{",
    b"}",
    b'"',
    b",",
    b":",
    b"1e999",
    b"-",
    b"\\",
    b"\xff",
    b"\x00",
    b"\xc3",
    b"9" * 30,
    b'"\\ud800"',
    b"true",
    b"[]",
    b"{}",
    b"0.1e-9999",
    b'"ph":"X"',
    b'"ts":',
    b'"args":{"rank":7}',
)
PATCH = "@@{}@@"
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


class Mutant:
    """A document being mutated, and raw JSON texts to put in place of its placeholders."""

    def __init__(self, doc: Any) -> None:
        self.doc = doc
        self.raw: list[str] = []

    def placeholder(self, text: str) -> str:
        self.raw.append(text)
        return PATCH.format(len(self.raw) - 1)

    def encode(self) -> bytes:
        text = json.dumps(self.doc)
        for i, raw in enumerate(self.raw):
            text = text.replace(json.dumps(PATCH.format(i)), raw)
        return text.encode("utf-8", "surrogatepass")


def _events(m: Mutant) -> list[Any]:
    if isinstance(m.doc, dict) and isinstance(m.doc.get("traceEvents"), list):
        return m.doc["traceEvents"]
    return m.doc if isinstance(m.doc, list) else []


def _some_event(m: Mutant, r: random.Random) -> dict[str, Any] | None:
    evs = [e for e in _events(m) if isinstance(e, dict)]
    return r.choice(evs) if evs else None


def drop_field(m: Mutant, r: random.Random) -> None:
    e = _some_event(m, r)
    if e:
        e.pop(r.choice(FIELDS), None)


def retype_field(m: Mutant, r: random.Random) -> None:
    e = _some_event(m, r)
    if e is not None:
        e[r.choice(FIELDS)] = m.placeholder(r.choice(ODD_VALUES))


def retype_arg(m: Mutant, r: random.Random) -> None:
    e = _some_event(m, r)
    if e is None:
        return
    args = e.get("args")
    if not isinstance(args, dict):
        args = e["args"] = {}
    args[r.choice(ARG_KEYS)] = m.placeholder(r.choice(ODD_VALUES))


def odd_phase_or_category(m: Mutant, r: random.Random) -> None:
    e = _some_event(m, r)
    if e is not None:
        if r.random() < 0.5:
            e["ph"] = r.choice(PHASES)
        else:
            e["cat"] = r.choice(CATEGORIES)


def deep_nesting(m: Mutant, r: random.Random) -> None:
    depth = r.choice((50, 500, 900, 990, 1000, 1100, 5000, 100_000))
    nested = "[" * depth + "]" * depth if r.random() < 0.5 else '{"a":' * depth + "1" + "}" * depth
    e = _some_event(m, r)
    if e is not None and r.random() < 0.7:
        args = e.get("args")
        if not isinstance(args, dict):
            args = e["args"] = {}
        args["deep"] = m.placeholder(nested)
    elif isinstance(m.doc, dict):
        m.doc[r.choice(("distributedInfo", "deviceProperties", "other"))] = m.placeholder(nested)


def rank_labels(m: Mutant, r: random.Random) -> None:
    """args.rank on some events, process_name metadata naming ranks for some pids."""
    evs = _events(m)
    pids = [e.get("pid") for e in evs if isinstance(e, dict)] or [1]
    for _ in range(r.randint(1, 3)):
        if r.random() < 0.5:
            label = f"rank {r.choice((0, 1, 3, 1048575, 1048576, 10**30))}: python"
            kind, key = r.choice((("process_name", "name"), ("process_labels", "labels")))
            evs.append({"ph": "M", "name": kind, "pid": r.choice(pids), "args": {key: label}})
        else:
            e = _some_event(m, r)
            if e is not None and isinstance(e.get("args"), dict):
                e["args"]["rank"] = r.choice((0, 1, 2, 3))


def distributed_info(m: Mutant, r: random.Random) -> None:
    if not isinstance(m.doc, dict):
        return
    roll = r.random()
    if roll < 0.3:
        m.doc["distributedInfo"] = m.placeholder(r.choice(ODD_VALUES))
    else:
        info = m.doc.get("distributedInfo")
        info = info if isinstance(info, dict) else {}
        info[r.choice(("rank", "world_size"))] = m.placeholder(r.choice(ODD_VALUES))
        m.doc["distributedInfo"] = info


def event_list(m: Mutant, r: random.Random) -> None:
    evs = _events(m)
    roll = r.random()
    if roll < 0.25 and evs:
        evs.insert(r.randrange(len(evs) + 1), m.placeholder(r.choice(ODD_VALUES)))
    elif roll < 0.45 and evs:
        evs.extend(copy.deepcopy(r.choices(evs, k=r.randint(1, 5))))
    elif roll < 0.6:
        r.shuffle(evs)
    elif roll < 0.75 and evs:
        del evs[r.randrange(len(evs)) :]
    elif roll < 0.85 and isinstance(m.doc, dict):
        m.doc = m.doc.get("traceEvents")  # a bare event list
    elif isinstance(m.doc, dict):
        m.doc["traceEvents"] = m.placeholder(r.choice(ODD_VALUES))


STRUCTURED = (
    drop_field,
    retype_field,
    retype_arg,
    odd_phase_or_category,
    deep_nesting,
    rank_labels,
    distributed_info,
    event_list,
)


def flip_bytes(data: bytes, r: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(r.randint(1, 8)):
        if out:
            out[r.randrange(len(out))] = r.randrange(256)
    return bytes(out)


def cut_slice(data: bytes, r: random.Random) -> bytes:
    if not data:
        return data
    a = r.randrange(len(data))
    return data[:a] + data[a + r.randint(1, 200) :]


def insert_token(data: bytes, r: random.Random) -> bytes:
    at = r.randrange(len(data) + 1)
    return data[:at] + r.choice(TOKENS) + data[at:]


def truncate(data: bytes, r: random.Random) -> bytes:
    return data[: r.randrange(len(data) + 1)]


def repeat_slice(data: bytes, r: random.Random) -> bytes:
    if not data:
        return data
    a = r.randrange(len(data))
    b = min(len(data), a + r.randint(1, 400))
    return data[:b] + data[a:b] * r.randint(1, 3) + data[b:]


def swap_number(data: bytes, r: random.Random) -> bytes:
    numbers = list(_NUMBER.finditer(data))
    if not numbers:
        return data
    for _ in range(r.randint(1, 4)):
        match = r.choice(numbers)
        data = data[: match.start()] + r.choice(ODD_NUMBERS).encode() + data[match.end() :]
        numbers = list(_NUMBER.finditer(data))
    return data


BYTEWISE = (flip_bytes, cut_slice, insert_token, truncate, repeat_slice, swap_number)


def mutate(seed_doc: Doc, r: random.Random) -> tuple[bytes, bool, list[str]]:
    """A mutated trace: (bytes, gzipped, what was done)."""
    m = Mutant(copy.deepcopy(seed_doc))
    done = []
    for mutation in r.sample(STRUCTURED, r.randint(1, 3) if r.random() < 0.8 else 0):
        mutation(m, r)
        done.append(mutation.__name__)
    data = m.encode()
    if not done or r.random() < 0.15:
        for mutation in r.sample(BYTEWISE, r.randint(1, 2)):
            data = mutation(data, r)
            done.append(mutation.__name__)
    zipped = r.random() < 0.12
    if zipped:
        data = gzip.compress(data, compresslevel=1)
        if r.random() < 0.4:
            data = r.choice((flip_bytes, cut_slice, truncate))(data, r)
            done.append("damaged gzip")
    return data, zipped, done


# -- what a parse that succeeds promises -----------------------------------------------------


def check_parsed(traces: list[RankTrace]) -> None:
    assert traces and len({t.rank for t in traces}) == len(traces)
    for t in traces:
        assert 0 <= t.rank <= MAX_RANK and t.events.num_rows > 0
        assert "drop" not in t.events.column_names and "arg_rank" not in t.events.column_names
        ts = t.events["ts"]
        assert ts.null_count == 0
        assert -NS_LIMIT <= pc.min(ts).as_py() and pc.max(ts).as_py() < NS_LIMIT
        is_x = pc.equal(t.events["ph"], "X")
        durs = pc.filter(t.events["dur"], is_x).drop_null()
        assert len(durs) == 0 or (pc.min(durs).as_py() >= 0 and pc.max(durs).as_py() < NS_LIMIT)
        assert all(n >= 0 for n in t.dropped.values())


def parse_case(data: bytes, zipped: bool, tmp_path: Path) -> str:
    """'ok', or the typed error's class name; anything else propagates."""
    try:
        if zipped:  # through a file, as the CLI reads it
            path = tmp_path / "case.json.gz"
            path.write_bytes(data)
            traces = parse_file(path)
        else:
            traces = parse_bytes(data, "case.json")
    except TYPED as exc:
        assert str(exc).count("\n") == 0, str(exc)
        return type(exc).__name__
    check_parsed(traces)
    return "ok"


# -- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("seed_name", list(SEEDS))
def test_mutated_traces_parse_or_fail_typed(seed_name: str, tmp_path: Path):
    if seed_name in REAL and not REAL[seed_name].exists():
        pytest.skip(f"real trace not at {REAL[seed_name]}")
    seed_doc = SEEDS[seed_name]()
    check_parsed(parse_bytes(json.dumps(seed_doc).encode(), seed_name))
    outcomes: dict[str, int] = {}
    failures = []
    for case in range(CASES_PER_SEED):
        r = random.Random(f"{seed_name}:{case}")
        data, zipped, done = mutate(seed_doc, r)
        try:
            outcome = parse_case(data, zipped, tmp_path)
        except Exception as exc:  # noqa: BLE001 - what the test looks for
            failures.append(f"case {case} ({', '.join(done)}): {type(exc).__name__}: {exc}"[:300])
            continue
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert not failures, f"{len(failures)} untyped failures, e.g.\n" + "\n".join(failures[:10])
    # the mutations reach both sides: some traces still parse, some are refused
    assert outcomes.get("ok", 0) > 0 and outcomes.get("TraceFormatError", 0) > 0, outcomes


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(
    max_examples=500,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    changes=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=20),
            st.sampled_from(
                (
                    *FIELDS,
                    *(f"args.{k}" for k in ARG_KEYS),
                    "distributedInfo",
                    "distributedInfo.rank",
                    "distributedInfo.world_size",
                )
            ),
            JSON_VALUES,
        ),
        min_size=1,
        max_size=4,
    ),
    merged=st.booleans(),
)
def test_fields_of_any_json_shape_parse_or_fail_typed(
    changes: list[tuple[int, str, Any]], merged: bool
):
    doc = _merged() if merged else _small()
    evs = doc["traceEvents"]
    for index, where, value in changes:
        if where.startswith("distributedInfo"):
            if "." in where:
                info = doc.get("distributedInfo")
                doc["distributedInfo"] = {
                    **(info if isinstance(info, dict) else {}),
                    where.split(".")[1]: value,
                }
            else:
                doc["distributedInfo"] = value
            continue
        event = evs[index % len(evs)]
        if where.startswith("args."):
            args = event.get("args")
            event["args"] = {**(args if isinstance(args, dict) else {}), where[5:]: value}
        else:
            event[where] = value
    try:
        traces = parse_bytes(json.dumps(doc).encode(), "case.json")
    except TYPED as exc:
        assert "\n" not in str(exc)
        return
    check_parsed(traces)
