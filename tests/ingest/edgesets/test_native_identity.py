"""Identity invariance of plain native edge sets: the same events give the same graph, however
the ranks come in.

A job's per-rank files and one merged file of the same events (ranks labelled by `args.rank` or
by process metadata only; each rank's events in their own order, or every rank's interleaved by
ts as time-ordered merges write them, equal timestamps kept in order or not) must give, rank by
rank, the same `native` DEP edges (type, endpoints and their boundaries, weight, on the critical
path or not, position on it), the same path length per window (whole trace and every
ProfilerStep), and the same `native:cross-rank` paths. `ev_idx` differs between the files, so
each endpoint is compared by what the event is: (rank, cat, name, ts, dur, pid within its rank,
tid), numbered among equal ones. One rank's events in other orders and under other pids must
likewise give the same graph (`tie_events`: a small trace with ties wherever order could decide);
two of those orders also need the kernel walk and the runtime-lock pass to break ties by
`Frame.seq` (the canonical position) instead of `ev_idx`: expected to fail until they do.

Only plain native must be invariant: the emulations mirror HTA, whose result depends on the
file's order (tests/ingest/edgesets/test_native.py checks them against HTA).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import msgspec
import pytest

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.ingest.edgesets.native.edge_set import build_native_edge_set
from tracegraph.ingest.edgesets.native.options import NativeOptions
from tracegraph.ingest.edgesets.native.rank_build import build_rank
from tracegraph.ingest.edgesets.native.window import Window
from tracegraph.ingest.parse import parse_file
from tracegraph.ingest.parse_options import ParseOptions
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore

from ..merge import PID_STRIDE, UNLABELLED_PID, write_merged
from ..oracle import load_json
from .conftest import TRACES


@dataclass(frozen=True)
class JobSet:
    """Per-rank files of one job (or two single files taken as one), with their ranks."""

    key: str
    files: tuple[str, ...]
    ranks: tuple[int, ...]  # the rank each file's distributedInfo names (or is given)
    unlabelled: tuple[int, ...] = ()  # merged pids that name no rank (ingested with rank_of_pid)
    renumber: bool = False  # the files name one rank: per-rank copies name `ranks` instead
    steps: bool = True  # the traces have ProfilerStep#N annotations (--all-steps windows)
    synthetic: SyntheticConfig | None = None  # generated per-rank files (no shared traces needed)


JOBS = (
    JobSet(
        "synthetic",  # 3 ranks, python stacks, nested annotations, a late rank, sync kinds
        ("rank0.trace.json", "rank1.trace.json", "rank2.trace.json"),
        (0, 1, 2),
        synthetic=SyntheticConfig(
            ranks=3,
            steps=2,
            layers=2,
            python_stacks=True,
            annotate=True,
            late_rank=1,
            late_us=1_500,
            sync_kinds=True,
        ),  # fmt: skip
    ),
    JobSet(
        "trace_filter",  # NCCL, 2 GPU ranks of a 128-rank job, backward thread
        ("hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz"),
        (0, 1),
        (UNLABELLED_PID,),
    ),
    JobSet(
        "cpu_ddp_2r",  # gloo, CPU only
        ("cpu_ddp_2r/rank0.step5.pt.trace.json.gz", "cpu_ddp_2r/rank1.step5.pt.trace.json.gz"),
        (0, 1),
    ),
    JobSet(
        "trace_diff",  # two ~105k-event NCCL traces (rank 3 of 8, rank 1 of 2) as one 2-rank set
        ("hta/trace_diff/control/control.json.gz", "hta/trace_diff/test/test.json.gz"),
        (3, 1),
    ),
    JobSet(
        "cuda_sync",  # two single-GPU traces with cuda_sync events (both rank 0) as ranks 0, 1
        (
            "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
            "hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz",
        ),
        (0, 1),
        renumber=True,
        steps=False,
    ),
)
# (rank labels, interleaved by ts: no, stably, as pandas' quicksort leaves equal timestamps, or
# with equal timestamps reversed)
FLAVOURS = (
    ("args", ""),
    ("args", "stable"),
    ("metadata", ""),
    ("metadata", "stable"),
    ("args", "quicksort"),
    ("metadata", "reversed-ties"),
)


def flavour_id(flavour: tuple[str, str]) -> str:
    return f"{flavour[0]}-{flavour[1] or 'in-rank-order'}"


Endpoint = tuple  # (rank, cat, name, ts, dur, pid within rank, tid, k-th equal)


@dataclass(frozen=True)
class NativeView:
    """One build of `native` on one run, every ev_idx replaced by the event's identity."""

    edges: dict[int, Counter]  # rank → (src, sb, dst, db, type, weight, on_path, order) → n
    lengths: dict[tuple[int, str], tuple[str, int | None]]  # (rank, window) → (status, length)
    cross_edges: Counter  # native:cross-rank path edges
    cross_paths: tuple[tuple, ...]  # per step: length, per-rank time, straggler, bound by, ...


def identities(store: GraphStore, run: str, merged: bool) -> dict[tuple[int, int], Endpoint]:
    """(rank, ev_idx) → identity, for every node of the run."""
    out: dict[tuple[int, int], Endpoint] = {}
    for label in ("Op", "Runtime", "Kernel"):
        rows = store.run(
            f"MATCH (n:{label}) WHERE n.run = $run RETURN n.rank AS rank, n.ev_idx AS ev, "
            "n.cat AS cat, n.name AS name, n.ts AS ts, n.dur AS dur, n.pid AS pid, n.tid AS tid",
            {"run": run},
        ).table.to_pylist()
        rows.sort(key=lambda r: (r["rank"], r["ts"], r["ev"]))
        seen: Counter = Counter()
        for r in rows:
            pid = r["pid"]
            if merged and pid is not None:
                pid -= r["rank"] * PID_STRIDE
            key = (r["rank"], r["cat"], r["name"], r["ts"], r["dur"], pid, r["tid"])
            seen[key] += 1
            out[(r["rank"], r["ev"])] = (*key, seen[key])
    return out


def straggler_identity(straggler, ident: dict) -> tuple | None:
    """A straggler with its participant event named by identity, not by its file's ev_idx."""
    if straggler is None:
        return None
    fields = asdict(straggler)
    event = ident.get((straggler.rank, fields.pop("ev_idx")))
    return (*fields.values(), event)


def dep_edges(store: GraphStore, run: str, name: str, ident: dict) -> list[tuple]:
    rows = store.run(
        "MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(b:Op:Runtime:Kernel) "
        "WHERE d.edge_set = $name AND a.run = $run "
        "RETURN a.rank AS ar, a.ev_idx AS a, b.rank AS br, b.ev_idx AS b, d.type AS type, "
        "d.src_boundary AS sb, d.dst_boundary AS db, d.weight_ns AS w, "
        "d.on_critical_path AS on_path, d.path_order AS o",
        {"name": name, "run": run},
    ).table.to_pylist()
    return [
        (
            ident[(r["ar"], r["a"])],
            r["sb"],
            ident[(r["br"], r["b"])],
            r["db"],
            r["type"],
            r["w"],
            bool(r["on_path"]),
            r["o"],
        )
        for r in rows
    ]


def native_view(db: Path, run: str, merged: bool, all_steps: bool) -> NativeView:
    result = build_native_edge_set(db, run=run, all_steps=all_steps)
    assert result.name == "native"
    with GraphStore(db, read_only=True) as store:
        ident = identities(store, run, merged)
        edges: dict[int, Counter] = {}
        for e in dep_edges(store, run, "native", ident):
            edges.setdefault(e[0][0], Counter())[e] += 1
        cross = Counter(dep_edges(store, run, "native:cross-rank", ident))
    lengths = {}
    for s in result.ranks:
        for i, w in enumerate(s.windows):
            label = str(w.get("step") or w.get("instance") or i)
            lengths[(s.rank, label)] = (str(w["status"]), w.get("path_length_ns"))
    paths = tuple(
        (
            p.step,
            p.length_ns,
            tuple(sorted(p.rank_ns.items())),
            straggler_identity(p.straggler, ident),
            p.bound_by_rank,
            p.bound_by_op,
            tuple(sorted(p.wait_ns.items())),
            tuple(sorted(p.clock_offset_ns.items())),
            p.span_ns,
        )
        for p in result.cross_rank
    )
    return NativeView(edges, lengths, cross, paths)


class Builds:
    """Databases and native views, built once per job set and flavour (session)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.views: dict[tuple[str, str, bool], NativeView] = {}

    def view(self, job: JobSet, flavour: str, all_steps: bool) -> NativeView:
        key = (job.key, flavour, all_steps)
        if key not in self.views:
            db = self.root / f"{job.key}-{flavour}.kuzu"
            if not db.exists():
                self._ingest(job, flavour, db)
            self.views[key] = native_view(db, flavour, flavour != "per-rank", all_steps)
        return self.views[key]

    def _ingest(self, job: JobSet, flavour: str, db: Path) -> None:
        files = [TRACES / f for f in job.files]
        if job.synthetic is not None:
            folder = self.root / job.key
            if not folder.exists():
                write_per_rank(job.synthetic, folder)
            files = [folder / f for f in job.files]
        if job.renumber:
            files = [
                write_as_rank(f, self.root / f"{job.key}-rank{r}.json", r)
                for f, r in zip(files, job.ranks, strict=True)
            ]
        if flavour == "per-rank":
            ingest(files, db, IngestOptions(run=flavour))
            return
        labels, interleave = next(f for f in FLAVOURS if flavour_id(f) == flavour)
        merged = write_merged(
            files,
            self.root / f"{job.key}-{flavour}.json",
            job.unlabelled,
            labels=labels,  # type: ignore[arg-type]
            interleave=interleave or False,  # type: ignore[arg-type]
            ranks=job.ranks,
        )
        rank_of_pid = {pid: job.ranks[pid // PID_STRIDE] for pid in job.unlabelled}
        ingest(
            [merged], db, IngestOptions(run=flavour, parse=ParseOptions(rank_of_pid=rank_of_pid))
        )


def write_as_rank(path: Path, out: Path, rank: int) -> Path:
    """A copy of a trace file whose distributedInfo names `rank`."""
    doc = load_json(path)
    doc["distributedInfo"] = {**doc.get("distributedInfo", {}), "rank": rank}
    out.write_bytes(msgspec.json.Encoder(decimal_format="number").encode(doc))
    return out


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Builds:
    return Builds(tmp_path_factory.mktemp("identity"))


def differences(a: NativeView, b: NativeView) -> list[str]:
    """What differs between two views, one line per rank and kind (empty: identical)."""
    out = []
    for rank in sorted(a.edges.keys() | b.edges.keys()):
        ea, eb = a.edges.get(rank, Counter()), b.edges.get(rank, Counter())
        sa = Counter({k[:6]: n for k, n in ea.items()})
        sb = Counter({k[:6]: n for k, n in eb.items()})
        only_a, only_b = sa - sb, sb - sa
        if only_a or only_b:
            by_type = Counter(k[4] for k in (only_a + only_b).elements())
            out.append(
                f"rank {rank}: {sum(only_a.values())} edges only per-rank, "
                f"{sum(only_b.values())} only merged ({dict(by_type)}); "
                f"e.g. {sorted(only_a)[:1]} / {sorted(only_b)[:1]}"
            )
        path_a = Counter({k: n for k, n in ea.items() if k[6]})
        path_b = Counter({k: n for k, n in eb.items() if k[6]})
        if path_a != path_b:
            out.append(
                f"rank {rank}: critical path differs ({sum((path_a - path_b).values())} / "
                f"{sum((path_b - path_a).values())} path edges only per-rank / merged)"
            )
    for key in sorted(a.lengths.keys() | b.lengths.keys()):
        if a.lengths.get(key) != b.lengths.get(key):
            out.append(
                f"rank {key[0]} window {key[1]}: {a.lengths.get(key)} vs {b.lengths.get(key)}"
            )
    if a.cross_paths != b.cross_paths:
        out.append(f"cross-rank paths: {a.cross_paths} vs {b.cross_paths}")
    if a.cross_edges != b.cross_edges:
        out.append(
            f"native:cross-rank: {sum((a.cross_edges - b.cross_edges).values())} / "
            f"{sum((b.cross_edges - a.cross_edges).values())} edges only per-rank / merged"
        )
    return out


@pytest.mark.parametrize("all_steps", [False, True], ids=["whole-trace", "all-steps"])
@pytest.mark.parametrize("flavour", FLAVOURS, ids=flavour_id)
@pytest.mark.parametrize("job", JOBS, ids=lambda j: j.key)
def test_merged_file_gives_the_per_rank_native_edge_set(
    builds: Builds, job: JobSet, flavour: tuple[str, str], all_steps: bool
) -> None:
    if job.synthetic is None and not TRACES.is_dir():
        pytest.skip(f"real traces not at {TRACES}")
    if all_steps and not job.steps:
        pytest.skip("no ProfilerStep annotations")
    per_rank = builds.view(job, "per-rank", all_steps)
    merged = builds.view(job, flavour_id(flavour), all_steps)
    assert sorted(per_rank.edges) == sorted(job.ranks)
    assert all(status == "ok" for status, _ in per_rank.lengths.values()), per_rank.lengths
    if all_steps:
        assert len(per_rank.lengths) > len(job.ranks)  # several ProfilerSteps per rank
    assert not differences(per_rank, merged), "\n".join(differences(per_rank, merged))


# One rank's events in other orders and under other pids: the same graph (no database involved).

CPU, LOADER, GPU = 100, 200, 0


def _x(cat: str, name: str, pid: int, tid: int, ts: int, dur: int, **args: int) -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def tie_events() -> list[dict]:
    """A rank (µs timestamps) whose events tie wherever an order could decide: a stream sync
    ending as the next kernel on its stream starts, a graph launch of two kernels starting
    together on two streams, two ops of one thread spanning the same µs, launches on two
    threads meeting at one instant (runtime lock), a copy no call launched (while it is
    pending, kG's launch finds an idle stream only if the copy is not taken for one launched by
    event 0), a second process."""
    launch, rt = "cudaLaunchKernel", "cuda_runtime"
    return [
        _x("cpu_op", "aten::first", CPU, 1, 1, 2),
        _x("cpu_op", "aten::mm", CPU, 1, 10, 10),
        _x(rt, launch, CPU, 1, 11, 3, correlation=1),
        _x(rt, launch, CPU, 3, 14, 2, correlation=6),
        _x("kernel", "kA", GPU, 7, 20, 30, stream=7, correlation=1, device=0),
        _x("kernel", "kF", GPU, 10, 30, 2, stream=10, correlation=6, device=0),
        _x(rt, "cudaStreamSynchronize", CPU, 1, 16, 34, correlation=2),
        _x("cuda_sync", "Stream Sync", GPU, 7, 40, 10, stream=7, correlation=2, device=0),
        _x("cpu_op", "aten::add", CPU, 1, 49, 5),
        _x(rt, launch, CPU, 1, 49, 1, correlation=3),
        _x("kernel", "kB", GPU, 7, 50, 10, stream=7, correlation=3, device=0),
        _x(rt, "cudaGraphLaunch", CPU, 1, 55, 2, correlation=4),
        _x("kernel", "kC", GPU, 8, 60, 5, stream=8, correlation=4, device=0),
        _x("kernel", "kD", GPU, 9, 60, 7, stream=9, correlation=4, device=0),
        _x(rt, launch, CPU, 1, 62, 1, correlation=7),
        _x("kernel", "kG", GPU, 7, 66, 2, stream=7, correlation=7, device=0),
        _x("cpu_op", "aten::view", CPU, 1, 70, 1),
        _x("cpu_op", "aten::reshape", CPU, 1, 70, 1),
        _x("cpu_op", "aten::empty", CPU, 2, 70, 1),
        _x("cpu_op", "loader::next", LOADER, 4, 5, 60),
        _x("gpu_memcpy", "Memcpy DtoD", GPU, 7, 80, 3, stream=7, correlation=99, device=0),
        _x(rt, launch, CPU, 1, 75, 2, correlation=5),
        _x("kernel", "kE", GPU, 7, 84, 4, stream=7, correlation=5, device=0),
    ]


def _reorder_ties_reversed(events: list[dict]) -> list[dict]:
    return [e for _, e in sorted(enumerate(events), key=lambda p: (p[1]["ts"], -p[0]))]


REORDERED = {
    "ts-order, ties reversed": _reorder_ties_reversed,
    "pids renumbered": lambda events: [
        {**e, "pid": {CPU: 7, LOADER: 3, GPU: 9}[e["pid"]]} for e in events
    ],
    # event 0 is no row of the rank (a merged file's is another rank's)
    "metadata first": lambda events: [
        {"ph": "M", "name": "process_name", "pid": CPU, "tid": 0, "args": {"name": "python"}},
        *events,
    ],
}
# Two orders that need the kernel walk (native_kernels.kernel_edges) and the runtime-lock pass
# (native_callstack.runtime_lock_edges) to break ties by `Frame.seq` rather than `ev_idx`.
NEEDS_SEQ_TIES = {
    "reversed": lambda events: list(reversed(events)),
    "reversed, runtime lock": lambda events: list(reversed(events)),
}


def _graph(path: Path, options: NativeOptions) -> tuple[frozenset, int]:
    """The rank's whole-trace edges by what their ends are, and its path length."""
    (trace,) = parse_file(path)
    built = build_rank(trace, options, Window())
    graph = built.windows[0].graph
    assert graph is not None, built.windows[0].message
    c, e = graph.clip, graph.edges
    on_path = set(graph.path.edges.tolist())

    def end(node: int) -> tuple:
        row = node // 2
        return (c.name.at(row), int(c.ts[row]), int(c.dur[row]), int(c.tid[row]), node % 2)

    edges = frozenset(
        (end(int(e.src[j])), end(int(e.dst[j])), int(e.kind[j]), int(e.weight[j]), j in on_path)
        for j in range(len(e))
    )
    return edges, int(graph.path.length)


def _same_graph(tmp_path: Path, reorder, options: NativeOptions) -> None:
    events = tie_events()
    doc = {"schemaVersion": 1, "distributedInfo": {"rank": 0}}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({**doc, "traceEvents": events}))
    b.write_text(json.dumps({**doc, "traceEvents": reorder(events)}))
    (ea, la), (eb, lb) = _graph(a, options), _graph(b, options)
    assert sorted(ea - eb) == [] and sorted(eb - ea) == []
    assert la == lb


@pytest.mark.parametrize("reorder", list(REORDERED), ids=str)
def test_plain_native_does_not_depend_on_event_order_or_pids(tmp_path: Path, reorder: str) -> None:
    for options in (NativeOptions(), NativeOptions().with_changes(runtime_lock=True)):
        _same_graph(tmp_path, REORDERED[reorder], options)


@pytest.mark.parametrize("reorder", list(NEEDS_SEQ_TIES), ids=str)
def test_ties_in_the_kernel_walk_and_runtime_lock(tmp_path: Path, reorder: str) -> None:
    options = NativeOptions()
    if "runtime lock" in reorder:
        options = options.with_changes(runtime_lock=True)
    _same_graph(tmp_path, NEEDS_SEQ_TIES[reorder], options)
