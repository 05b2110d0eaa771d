"""What HTA is given: the run's ranks read from the database, one trace file per rank.

The bytes come from the run's archive (`archive.source_copy`), so the traces may have moved or
gone since the ingest; a run ingested before archives held them reads the original files.
HTA numbers events by their position in the file it reads. A rank that has a file of its own is
given that file unchanged, so HTA's ev_idx is ours. The ranks of a merged multi-rank file are each
written to a temporary file of their own, and `ev_idx_of` maps HTA's positions in it back to the
positions in the original file.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import schema
from ...archive import RunArchive, run_archive, source_copy
from ...errors import TraceFormatError
from ...file_bytes import read_trace_bytes
from ...parse import RankTrace, parse_file
from ...parse_options import ParseOptions
from ...store import GraphStore
from ..errors import EdgeSetError
from ..records import run_source, unique_pid_ranks

HTA_SUFFIXES = (".json", ".gz")


@dataclass(frozen=True)
class RunNodes:
    """A run as stored: its ranks' source files and the id and label of every event node."""

    run: str
    run_idx: int
    files: dict[int, str]
    event_counts: dict[int, int]
    node_ids: np.ndarray
    node_labels: np.ndarray
    pid_ranks: dict[int, int]  # pids whose event nodes all belong to one rank
    ingested_at: str
    archive: RunArchive | None  # the run's archive (None: ingested before archives)


@dataclass(frozen=True)
class RankInput:
    """The file HTA reads for one rank; `ev_idx_of[i]` is the original ev_idx of its event i."""

    rank: int
    source: str
    file: Path
    ev_idx_of: np.ndarray | None  # None: HTA reads the original file, positions are ours

    @property
    def split(self) -> bool:
        return self.ev_idx_of is not None


def read_run(db: Path, run: str | None) -> RunNodes:
    """The run's ranks, files and event nodes; `run` may be omitted when the database holds one."""
    if not Path(db).exists():
        raise EdgeSetError(f"{db}: no such database")
    with GraphStore(Path(db), read_only=True) as store:
        source = run_source(store, run)
        source.events_needed(db, "HTA's graph")
        ids, labels, pid_ranks = _event_nodes(store, source.run_idx)
        folder = run_archive(Path(db), store, source.run_idx)
    return RunNodes(
        source.run,
        source.run_idx,
        source.files,
        source.counts,
        ids,
        labels,
        pid_ranks,
        source.ingested_at,
        folder,
    )


# the categories of GPU work HTA's critical path reads (MTIA's it cannot: it stops on them)
HTA_KERNEL_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset")


def require_gpu_kernels(db: Path, run: str) -> None:
    """Refuse, before any HTA environment is built, a run HTA's critical path cannot read: one
    without CUDA or ROCm kernels (CPU-only, MTIA), where every rank fails with HTA's raw
    error."""
    with GraphStore(Path(db), read_only=True) as store:
        result = store.run(
            "MATCH (k:Kernel) WHERE k.run = $run AND k.cat IN $cats RETURN count(*) AS n",
            {"run": run, "cats": list(HTA_KERNEL_CATEGORIES)},
        )
    if not result.table["n"][0].as_py():
        raise EdgeSetError(
            f"{db}: run '{run}' has no GPU kernels (a CPU-only or MTIA trace): HTA's critical "
            "path needs them; use `--native` (tracegraph's own graph reads CPU work too)"
        )


def _event_nodes(store: GraphStore, run_idx: int) -> tuple[np.ndarray, np.ndarray, dict[int, int]]:
    """Sorted ids of the run's Op/Runtime/Kernel nodes, their labels, and pid → its one rank."""
    lo, hi = schema.key_range(run_idx)
    id_parts: list[np.ndarray] = []
    label_parts: list[np.ndarray] = []
    pid_pairs: list[pa.Table] = []
    for label in schema.EVENT_LABELS:
        # Validated integers inlined: Kuzu prunes the id scan only for literals.
        table = store.run(
            f"MATCH (n:{label}) WHERE n.id >= {lo} AND n.id < {hi} "
            "RETURN n.id AS id, n.pid AS pid, n.rank AS rank"
        ).table
        id_parts.append(table["id"].to_numpy(zero_copy_only=False).astype(np.int64))
        label_parts.append(np.full(table.num_rows, label, dtype=object))
        pid_pairs.append(table.select(["pid", "rank"]).drop_null())
    ids = np.concatenate(id_parts)
    labels = np.concatenate(label_parts)
    order = np.argsort(ids, kind="stable")
    return ids[order], labels[order], unique_pid_ranks(pa.concat_tables(pid_pairs))


def rank_inputs(nodes: RunNodes, work_dir: Path) -> list[RankInput]:
    """One input per rank: the trace file (its archived bytes), or a per-rank split of a merged
    file."""
    sharing = Counter(nodes.files.values())
    inputs: list[RankInput] = []
    split_done: dict[str, dict[int, RankInput]] = {}
    local: dict[str, Path] = {}  # each source's bytes, written out once
    for rank, source in sorted(nodes.files.items()):
        if source not in local:
            local[source] = _trace_bytes(nodes, rank, source, work_dir)
        path = local[source]
        if sharing[source] == 1:
            inputs.append(RankInput(rank, source, _hta_readable(path, rank, work_dir), None))
            continue
        if source not in split_done:
            split_done[source] = _split_merged(path, source, nodes, work_dir)
        if rank not in split_done[source]:
            raise EdgeSetError(f"{source}: re-reading it found no events of rank {rank}")
        inputs.append(split_done[source][rank])
    return inputs


def _trace_bytes(nodes: RunNodes, rank: int, source: str, work_dir: Path) -> Path:
    """Where the bytes the run was read from are: its archive, else the original file."""
    if nodes.archive is not None:
        copy = source_copy(nodes.archive, source, work_dir)
        if copy is not None:
            return copy
    path = Path(source)
    if not path.is_file():
        raise EdgeSetError(
            f"{source}: source trace of run '{nodes.run}' rank {rank} is gone, and the run's "
            "archive holds no copy (ingested by an older tracegraph: ingest it again)"
        )
    return path


def _hta_readable(path: Path, rank: int, work_dir: Path) -> Path:
    """HTA reads only *.json and *.gz names: link other names under one it accepts."""
    if path.name.endswith(HTA_SUFFIXES):
        return path.resolve()
    gzipped = path.read_bytes()[:2] == b"\x1f\x8b"
    link = work_dir / f"rank-{rank}-source.{'json.gz' if gzipped else 'json'}"
    link.symlink_to(path.resolve())
    return link


def _split_merged(path: Path, source: str, nodes: RunNodes, work_dir: Path) -> dict[int, RankInput]:
    """Write each rank's events of merged file `source` (its bytes at `path`), verbatim and in
    order, to a file of its own."""
    traces = _reparse(path, source, nodes)
    data = read_trace_bytes(path)
    try:
        top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
        events = msgspec.json.decode(top["traceEvents"], type=list[msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError, KeyError) as exc:
        raise EdgeSetError(f"{source}: cannot re-read it to split its ranks ({exc})") from exc
    dist = _distributed_info(top)
    rest = [
        json.dumps(k).encode() + b": " + bytes(v)
        for k, v in top.items()
        if k not in ("traceEvents", "distributedInfo")
    ]
    out: dict[int, RankInput] = {}
    for trace in traces:
        keep = trace.events["ev_idx"].to_numpy()
        # distributedInfo first, with json's default separators: what HTA's rank pattern reads.
        header = json.dumps({"distributedInfo": {"rank": trace.rank, **dist}})[:-1].encode()
        body = b", ".join(bytes(events[i]) for i in keep)
        parts = [header, *(b", " + r for r in rest), b', "traceEvents": [', body, b"]}"]
        target = work_dir / f"rank-{trace.rank}.json"
        target.write_bytes(b"".join(parts))
        out[trace.rank] = RankInput(trace.rank, source, target, keep)
    return out


def _distributed_info(top: dict[str, msgspec.Raw]) -> dict[str, object]:
    raw = top.get("distributedInfo")
    try:
        info = msgspec.json.decode(bytes(raw)) if raw is not None else {}
    except msgspec.DecodeError:
        info = {}
    return {k: v for k, v in info.items() if k != "rank"} if isinstance(info, dict) else {}


def _reparse(path: Path, source: str, nodes: RunNodes) -> list[RankTrace]:
    """The file split by rank as at ingest; a split that disagrees with the database fails."""
    try:
        traces = parse_file(path)
    except TraceFormatError:
        # Ingested with --rank-of-pid: the database says which rank each such pid is.
        traces = parse_file(path, ParseOptions(rank_of_pid=nodes.pid_ranks))
    for trace in traces:
        if trace.rank not in nodes.files:
            continue
        labels = trace.events["label"]
        events = pc.sum(pc.is_in(labels, pa.array(list(schema.EVENT_LABELS)))).as_py() or 0
        if events != nodes.event_counts[trace.rank]:
            raise EdgeSetError(
                f"{source}: re-reading it gave {events} events for rank {trace.rank}, the "
                f"database holds {nodes.event_counts[trace.rank]}; re-ingest the run"
            )
    return [t for t in traces if t.rank in nodes.files and nodes.files[t.rank] == source]
