"""`native:<version>` equals that HTA release's own graph, edge for edge, with HTA as the oracle.

For every case HTA itself (each release in its own environment, `hta_env`) exports its CPGraph:
every edge with both endpoints (ev_idx, start|end), type, the weight its longest path used, and
its position on the critical path. The native builder, emulating the same release on the same
file and window, must give the same set of edges, the same path (order included) and the same
length; where HTA fails, the native window must fail too. HTA's answers are cached per
environment, file and window under the HTA cache, so only the first session pays for them.

The default cases are the issue's; TRACEGRAPH_TEST_NATIVE_ALL=1 adds every other shared trace
HTA succeeds on and every ProfilerStep instance.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tracegraph.examples.synthetic import SyntheticConfig
from tracegraph.ingest.edgesets.hta import worker as hta_worker
from tracegraph.ingest.edgesets.hta.env import HtaEnv
from tracegraph.ingest.edgesets.native.edge_set import build_native_edge_set
from tracegraph.ingest.edgesets.native.edges import TYPE_NAMES
from tracegraph.ingest.edgesets.native.frame import FrameSource, frame_source
from tracegraph.ingest.edgesets.native.options import emulate
from tracegraph.ingest.edgesets.native.rank_build import WindowResult, build_rank
from tracegraph.ingest.edgesets.native.window import Window
from tracegraph.ingest.parse import parse_file
from tracegraph.ingest.parse_options import ParseOptions
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore

from ...synthetic_traces import synthetic_rank_files
from ..merge import UNLABELLED_PID, write_merged

TRACES = (Path(__file__).resolve().parents[3] / ".." / "shared" / "traces").resolve()
RUNNER = Path(__file__).with_name("native_oracle.py")
ALEXNET = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
VERSIONS = ("hta-0.5.0", "traceinsight-0.6.1")
EVERYTHING = os.environ.get("TRACEGRAPH_TEST_NATIVE_ALL") == "1"

needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason=f"real traces not at {TRACES}")


@dataclass(frozen=True)
class Case:
    key: str
    file: str  # relative to TRACES, or an absolute path (a synthetic trace)
    rank: int
    annotation: str = ""
    instance: int | None = None

    @property
    def shared(self) -> bool:
        return not Path(self.file).is_absolute()


def _synthetic(name: str, config: SyntheticConfig, rank: int) -> str:
    return str(synthetic_rank_files(name, config)[rank])


def _available(cases: list[Case]) -> list[Case]:
    return [c for c in cases if not c.shared or TRACES.is_dir()]


def _steps(key: str, file: str, rank: int, n: int) -> list[Case]:
    return [Case(f"{key}-step{i}", file, rank, "ProfilerStep", i) for i in range(n)]


CONTROL = "hta/trace_diff/control/control.json.gz"
CASES = [
    Case(
        "alexnet",
        "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
        0,
        ALEXNET,
        1,
    ),
    Case(
        "simple_add",
        "hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
        0,
        ALEXNET,
        1,
    ),
    Case(
        "cuda_event_sync",
        "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
        0,
        "ProfilerStep",
        0,
    ),
    Case(
        "multi_stream", "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz", 0
    ),
    Case("control", CONTROL, 3),
    Case("control-step1", CONTROL, 3, "ProfilerStep", 1),
    Case("negative_queue", "hta/negative_queue_length_values_check/rank0.json.gz", 0),
    Case("nccl_data", "hta/nccl_parser_config/nccl_data.json.gz", 0),
    Case("trace_filter-0", "hta/trace_filter/sampled_rank-0.json.gz", 0),
    Case("trace_filter-1", "hta/trace_filter/sampled_rank-1.json.gz", 1),
    # synthetic: no ../shared needed; python stacks and nested ranges that do not nest, a late
    # rank, several sync kinds and streams
    Case("synthetic", _synthetic("plain", SyntheticConfig(ranks=2, steps=2, layers=2), 0), 0),
    Case(
        "synthetic-stacks-step1",
        _synthetic(
            "stacks",
            SyntheticConfig(
                ranks=2,
                steps=3,
                layers=2,
                python_stacks=True,
                annotate=True,
                late_rank=1,
                late_us=1_000,
            ),  # fmt: skip
            1,
        ),
        1,
        "ProfilerStep",
        1,
    ),
    Case(
        "synthetic-syncs",
        _synthetic(
            "syncs",
            SyntheticConfig(ranks=2, steps=2, layers=2, sync_kinds=True, extra_streams=1),
            0,
        ),
        0,
    ),
    # HTA fails on these; the emulation must fail as well
    Case("cpu_only", "hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", 34),
    Case("mtia", "hta/mtia_inference_trace/mtia_inference_rank_0.json.gz", 0),
]
if EVERYTHING:
    CASES += [
        *_steps("control", CONTROL, 3, 6)[0:1],
        *_steps("control", CONTROL, 3, 6)[2:],
        Case("test", "hta/trace_diff/test/test.json.gz", 1),
        *_steps("test", "hta/trace_diff/test/test.json.gz", 1, 6),
        *_steps("negative_queue", "hta/negative_queue_length_values_check/rank0.json.gz", 0, 5),
        *_steps("nccl_data", "hta/nccl_parser_config/nccl_data.json.gz", 0, 3),
        Case(
            "ns_resolution",
            "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
            0,
        ),
        *_steps(
            "ns_resolution",
            "hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
            0,
            5,
        ),
        Case("amd", "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz", 0),
        Case("mi300", "tracelens/traces/mi300/resnet_act_checkpoint.json.gz", 0),
        Case("b200", "tracelens/traces/b200/eager_trace.json.gz", 0),
        Case("h100", "tracelens/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", 0),
        Case(
            "sglang",
            "tracelens/traces/inference/sglang_decode/capture_traces/bs_32_rank0.json.gz",
            0,
        ),
        Case(
            "vllm",
            "tracelens/traces/inference/vllm_decode_full/capture_traces/"
            "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz",
            0,
        ),
        Case("mi210", "tracelens/traces/mi210/gpu_only_trace/gpu_only_trace.json.gz", 0),
        Case("triton", "hta/triton_example/triton_example.json.gz", 0),
        Case("backward_thread", "hta/call_stack/backward_thread.json", 0),
        Case("rank_non_gpu", "hta/rank_non_gpu/rank_non_gpu.json.gz", 0),
    ]

Row = tuple[int, str, int, str, str, int, int]  # src, boundary, dst, boundary, type, weight, order


@dataclass(frozen=True)
class Answer:
    ok: bool
    message: str
    rows: frozenset[Row]
    length_ns: int | None


def _oracle_root() -> Path:
    if os.environ.get("TRACEGRAPH_TEST_HTA_CACHE"):
        base = Path(os.environ["TRACEGRAPH_TEST_HTA_CACHE"])
    else:
        base = (
            Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tracegraph" / "hta"
        )
    return base / "native-oracle"


def _ident(env: HtaEnv, case: Case) -> dict[str, object]:
    path = TRACES / case.file
    stat = path.stat()
    worker = Path(hta_worker.__file__).read_bytes() + RUNNER.read_bytes()
    return {
        "file": str(path),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        # a synthetic file's mtime is fixed: its content is what tells one from another
        "content": None if case.shared else hashlib.sha256(path.read_bytes()).hexdigest(),
        "rank": case.rank,
        "annotation": case.annotation,
        "instance": case.instance,
        "packages": env.packages,
        "code": hashlib.sha256(worker).hexdigest(),
    }


def _read(folder: Path, rank: int) -> Answer:
    status = json.loads((folder / f"rank-{rank}.json").read_text())
    if status.get("status") != "ok":
        return Answer(False, status.get("message", ""), frozenset(), None)
    rows = pq.read_table(folder / f"rank-{rank}.parquet").to_pylist()
    keyed = frozenset(
        (
            r["src_ev_idx"],
            r["src_boundary"],
            r["dst_ev_idx"],
            r["dst_boundary"],
            r["type"],
            r["weight_ns"],
            r["path_order"],
        )
        for r in rows
    )
    return Answer(True, "", keyed, status["path_length_ns"])


@pytest.fixture(scope="session")
def oracle(hta_envs: dict[str, HtaEnv]) -> dict[tuple[str, str], Answer]:
    """HTA's answer for every (version, case), from the cache or one process per environment."""
    answers = {}
    for version, env in hta_envs.items():
        root = _oracle_root() / env.spec.name
        missing = []
        for case in _available(CASES):
            marker = root / case.key / "ident.json"
            if not marker.exists() or json.loads(marker.read_text()) != _ident(env, case):
                missing.append(case)
        if missing:
            root.mkdir(parents=True, exist_ok=True)
            jobs = [
                {
                    "key": c.key,
                    "rank": c.rank,
                    "file": str(TRACES / c.file),
                    "annotation": c.annotation,
                    "instance_id": c.instance,
                }
                for c in missing
            ]
            (root / "jobs.json").write_text(json.dumps(jobs))
            clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
            subprocess.run(
                [
                    str(env.python),
                    "-I",
                    str(RUNNER),
                    hta_worker.__file__,
                    str(root / "jobs.json"),
                    str(root),
                ],
                check=True,
                capture_output=True,
                env=clean,
            )
            for case in missing:
                (root / case.key / "ident.json").write_text(json.dumps(_ident(env, case)))
        for case in _available(CASES):
            answers[(version, case.key)] = _read(root / case.key, case.rank)
    return answers


@pytest.fixture(scope="session")
def sources() -> dict[tuple[str, int], FrameSource]:
    """Every case's rank, parsed once."""
    out = {}
    for case in CASES:
        if case.shared and not TRACES.is_dir():
            continue
        if (case.file, case.rank) not in out:
            traces = parse_file(TRACES / case.file)
            trace = next(t for t in traces if t.rank == case.rank)
            out[(case.file, case.rank)] = frame_source(trace)
    return out


def _native_rows(result: WindowResult) -> tuple[frozenset[Row], int]:
    g = result.graph
    assert g is not None
    order = {int(e): i for i, e in enumerate(g.path.edges)}
    c, e = g.clip, g.edges
    rows = frozenset(
        (
            int(c.ev_idx[e.src[j] // 2]),
            "start" if e.src[j] % 2 == 0 else "end",
            int(c.ev_idx[e.dst[j] // 2]),
            "start" if e.dst[j] % 2 == 0 else "end",
            TYPE_NAMES[e.kind[j]],
            int(g.path_weight[j]) * g.unit_ns,
            order.get(j, -1),
        )
        for j in range(len(e))
    )
    return rows, int(g.path.length) * g.unit_ns


def _mismatch_report(want: frozenset[Row], got: frozenset[Row]) -> str:
    """Every class of difference: edges only in one, weight changes, path changes, by type."""
    key = {r[:5]: r for r in want}
    mine = {r[:5]: r for r in got}
    only_hta = collections.Counter(k[4] for k in key.keys() - mine.keys())
    only_native = collections.Counter(k[4] for k in mine.keys() - key.keys())
    both = key.keys() & mine.keys()
    weight = collections.Counter(k[4] for k in both if key[k][5] != mine[k][5])
    path = collections.Counter(k[4] for k in both if key[k][6] != mine[k][6])
    sample = sorted(key.keys() ^ mine.keys())[:5]
    return (
        f"only in HTA {dict(only_hta)}, only native {dict(only_native)}, weight differs "
        f"{dict(weight)}, path position differs {dict(path)}; e.g. {sample}"
    )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.key)
def test_native_emulation_equals_hta(version: str, case: Case, oracle: dict, sources: dict) -> None:
    if case.shared and not TRACES.is_dir():
        pytest.skip(f"real traces not at {TRACES}")
    want = oracle[(version, case.key)]
    built = build_rank(
        sources[(case.file, case.rank)], emulate(version), Window(case.annotation, case.instance)
    )
    result = built.windows[0] if built.windows else None
    if not want.ok:
        assert result is None or not result.ok, f"HTA fails ({want.message}) but native gave a path"
        return
    assert result is not None and result.ok, (
        f"HTA succeeds, native failed: {result and result.message}"
    )
    rows, length = _native_rows(result)
    assert rows == want.rows, _mismatch_report(want.rows, rows)
    assert length == want.length_ns


@pytest.fixture(scope="session")
def native_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """alexnet, both sampled trace_filter ranks, and those two merged: each a run of its own."""
    folder = tmp_path_factory.mktemp("native")
    db = folder / "native.kuzu"
    ingest([TRACES / "hta/critical_path/alexnet"], db, IngestOptions(run="alexnet"))
    ingest([TRACES / "hta/trace_filter"], db, IngestOptions(run="trace_filter"))
    # the same two ranks in one merged file, one pid naming no rank (as merge tools write them)
    per_rank = sorted((TRACES / "hta/trace_filter").glob("*.json.gz"))
    merged = write_merged(per_rank, folder / "merged.json", [UNLABELLED_PID])
    options = IngestOptions(
        run="trace_filter_merged", parse=ParseOptions(rank_of_pid={UNLABELLED_PID: 1})
    )
    ingest([merged], db, options)
    return db


@needs_traces
@pytest.mark.parametrize("version", VERSIONS)
def test_loaded_edge_set_equals_hta(version: str, native_db: Path, oracle: dict) -> None:
    """Through the database: DEP rows of `native:<version>` equal HTA's export."""
    for run, window, keys in (
        ("alexnet", Window(ALEXNET, 1), {0: "alexnet"}),
        ("trace_filter", Window(), {0: "trace_filter-0", 1: "trace_filter-1"}),
    ):
        result = build_native_edge_set(native_db, run=run, options=emulate(version), window=window)
        assert result.name == f"native:{version}"
        with GraphStore(native_db) as store:
            table = store.run(
                "MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(b:Op:Runtime:Kernel) "
                "WHERE d.edge_set = $name AND a.run = $run "
                "RETURN a.rank AS rank, a.ev_idx AS src, d.src_boundary AS sb, b.ev_idx AS dst, "
                "d.dst_boundary AS db, d.type AS type, d.weight_ns AS w, d.path_order AS o",
                {"name": result.name, "run": run},
            ).table.to_pylist()
        for rank, key in keys.items():
            got = frozenset(
                (r["src"], r["sb"], r["dst"], r["db"], r["type"], r["w"], r["o"])
                for r in table
                if r["rank"] == rank
            )
            want = oracle[(version, key)]
            assert got == want.rows, _mismatch_report(want.rows, got)
            summary = next(s for s in result.ranks if s.rank == rank)
            assert summary.path_length_ns == want.length_ns


@needs_traces
@pytest.mark.parametrize("version", VERSIONS)
def test_diff_against_htas_own_edge_set_shows_nothing(version: str, native_db: Path) -> None:
    """`tracegraph diff DB native:<version> <version>`: no edge, flag or length differs."""
    from tracegraph.ingest.edgesets.hta.edge_set import build_hta_edge_set
    from tracegraph.queries.diff import diff_edge_sets

    from .conftest import SPECS, cache_root

    runs = (
        ("alexnet", Window(ALEXNET, 1)),
        ("trace_filter", Window()),
        ("trace_filter_merged", Window()),
    )
    for run, window in runs:
        build_native_edge_set(native_db, run=run, options=emulate(version), window=window)
        build_hta_edge_set(
            native_db,
            SPECS[version],
            run=run,
            annotation=window.annotation,
            instance=window.instance,
            cache_root=cache_root(),
        )
        with GraphStore(native_db) as store:
            diff = diff_edge_sets(store, f"native:{version}", version, run=run)
        assert diff.edges.num_rows == 0, diff.edges.slice(0, 5).to_pylist()
        lengths = diff.path_lengths.to_pylist()
        assert lengths and all(r["a_ns"] == r["b_ns"] for r in lengths), lengths
