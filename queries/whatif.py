"""What-if: critical-path lengths recomputed from a stored edge set under changed durations.

Each edge's weight is a span of one event (HTA's attribution: start→start is the source's,
start→end the event's own, end→end the destination's, end→start the enclosing CPU work); its
event's kind decides the factor: `kernel` (GPU activity), `collective` (NCCL/RCCL kernels, gloo
ranges, and the cross-rank collective edges), `cpu` (ops and runtime calls). Launch and
kernel→kernel delays keep their weight; dependency and sync edges weigh 0. Edges can be removed
by type, and an edge set can be compared with a variant of itself or with another set under the
same scaling: `critical-sync-only` keeps only the sync edges on the profiled critical path (what
Chakra's trace linker keeps), which is where the two can disagree once timing changes.

Lengths are per rank over the whole edge set (for an `--all-steps` set: its longest step); with
cross-rank collective edges (plain native sets) the whole run is one graph, reported as rank -1,
and each waiting participant's span counts only its part after the last participant arrived.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.critical_path import longest_path
from tracegraph.ingest.store import GraphStore

from .diff import edge_set_runs

CRITICAL_SYNC_ONLY = "critical-sync-only"
COLLECTIVE_NAME = r"^(?i)(nccl|rccl|gloo:)"
SPAN_TYPES = ("operator_kernel",)
UNSCALED_TYPES = ("kernel_launch_delay", "kernel_kernel_delay")

# Labels named: with unlabeled endpoints, Kuzu 0.11.3 returns wrong `id`s for some rows (the
# column is a union with EdgeSet's STRING id).
_EDGES = """
MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(b:Op:Runtime:Kernel)
WHERE d.edge_set = $edge_set AND a.run = $run
RETURN a.id AS src, d.src_boundary AS src_boundary, b.id AS dst, d.dst_boundary AS dst_boundary,
       d.type AS type, d.weight_ns AS weight_ns, d.on_critical_path AS on_critical_path,
       a.rank AS src_rank, b.rank AS dst_rank, label(a) AS src_label, label(b) AS dst_label,
       a.name AS src_name, b.name AS dst_name
"""


class WhatIfError(Exception):
    """A what-if that cannot be computed (unknown edge set or run)."""


@dataclass(frozen=True)
class Scaling:
    """Duration factors by kind of event (1.0 = as profiled)."""

    kernel: float = 1.0
    cpu: float = 1.0
    collective: float = 1.0

    @staticmethod
    def parse(items: list[str]) -> Scaling:
        """From `kind=factor` strings (kinds: kernel, cpu, cpu_op, collective)."""
        values: dict[str, float] = {}
        for item in items:
            key, _, value = item.partition("=")
            key = {"cpu_op": "cpu", "op": "cpu"}.get(key.strip(), key.strip())
            if key not in ("kernel", "cpu", "collective") or not value:
                raise WhatIfError(f"scale '{item}': expected kernel|cpu|collective=FACTOR")
            try:
                values[key] = float(value)
            except ValueError as exc:
                raise WhatIfError(f"scale '{item}': {value!r} is not a number") from exc
            if values[key] < 0:
                raise WhatIfError(f"scale '{item}': factors must be >= 0")
        return Scaling(**values)


@dataclass(frozen=True)
class WhatIf:
    """Per rank (-1: the whole run, joined through collectives): lengths before and after."""

    run: str
    edge_set: str
    variant: str
    scaling: Scaling
    removed_types: tuple[str, ...]
    lengths: pa.Table  # rank, edges, baseline_ns, scaled_ns, change, path_edges_changed


def what_if(
    store: GraphStore,
    edge_set: str,
    *,
    run: str | None = None,
    scaling: Scaling = Scaling(),
    remove_types: tuple[str, ...] = (),
    variant: str = "all",
) -> WhatIf:
    """Recompute every rank's critical-path length with scaled durations / removed edges."""
    run = _run_of(store, edge_set, run)
    edges = store.run(_EDGES, {"edge_set": edge_set, "run": run}).table
    if variant == CRITICAL_SYNC_ONLY:
        off_path_sync = pc.and_(
            pc.equal(edges["type"], "sync_dependency"), pc.invert(edges["on_critical_path"])
        )
        edges = edges.filter(pc.invert(off_path_sync))
    elif variant != "all":
        raise WhatIfError(f"unknown variant '{variant}' (all, {CRITICAL_SYNC_ONLY})")
    if remove_types:
        edges = edges.filter(pc.invert(pc.is_in(edges["type"], pa.array(list(remove_types)))))
    base = _scaled_weights(edges, Scaling())
    scaled = _scaled_weights(edges, scaling)
    rows = []
    for rank, sel in _groups(edges):
        src, dst = _node_ids(edges, sel)
        before = longest_path(src, dst, base[sel])
        after = longest_path(src, dst, scaled[sel])
        changed = len(set(before.edges.tolist()) ^ set(after.edges.tolist()))
        rows.append(
            {
                "rank": rank,
                "edges": int(len(sel)),
                "baseline_ns": before.length,
                "scaled_ns": after.length,
                "change": (after.length / before.length - 1.0) if before.length else 0.0,
                "path_edges_changed": changed,
            }
        )
    schema = pa.schema(
        [
            ("rank", pa.int64()),
            ("edges", pa.int64()),
            ("baseline_ns", pa.int64()),
            ("scaled_ns", pa.int64()),
            ("change", pa.float64()),
            ("path_edges_changed", pa.int64()),
        ]
    )
    table = pa.Table.from_pylist(rows, schema=schema)
    return WhatIf(run, edge_set, variant, scaling, tuple(remove_types), table)


def compare_what_if(
    store: GraphStore,
    edge_set: str,
    other: str,
    *,
    run: str | None = None,
    scaling: Scaling = Scaling(),
) -> pa.Table:
    """Two edge sets (or a set and its `critical-sync-only` variant) under the same scaling."""
    a = what_if(store, edge_set, run=run, scaling=scaling)
    if other == CRITICAL_SYNC_ONLY:
        b = what_if(store, edge_set, run=run, scaling=scaling, variant=CRITICAL_SYNC_ONLY)
    else:
        b = what_if(store, other, run=run, scaling=scaling)
    left = a.lengths.select(["rank", "baseline_ns", "scaled_ns"]).rename_columns(
        ["rank", "a_baseline_ns", "a_scaled_ns"]
    )
    right = b.lengths.select(["rank", "baseline_ns", "scaled_ns"]).rename_columns(
        ["rank", "b_baseline_ns", "b_scaled_ns"]
    )
    joined = left.join(right, "rank", join_type="full outer").sort_by("rank")
    diff = pc.subtract(joined["b_scaled_ns"], joined["a_scaled_ns"])
    return joined.append_column("scaled_difference_ns", diff)


def _run_of(store: GraphStore, edge_set: str, run: str | None) -> str:
    runs = edge_set_runs(store, edge_set)
    if not runs:
        raise WhatIfError(f"no edge set '{edge_set}' in {store.path}")
    if run is not None:
        if run not in runs:
            raise WhatIfError(f"edge set '{edge_set}' is not in run '{run}' (runs: {runs})")
        return run
    if len(runs) != 1:
        raise WhatIfError(f"edge set '{edge_set}' is in runs {sorted(runs)}: choose one")
    return runs[0]


def _attributed(edges: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """For each edge, the label and name of the event its weight belongs to."""
    src_start = pc.equal(edges["src_boundary"], "start").to_numpy(zero_copy_only=False)
    dst_start = pc.equal(edges["dst_boundary"], "start").to_numpy(zero_copy_only=False)
    use_src = src_start  # start→start and start→end: the source's span
    label = np.where(
        use_src,
        edges["src_label"].to_numpy(zero_copy_only=False),
        edges["dst_label"].to_numpy(zero_copy_only=False),
    )
    name = np.where(
        use_src,
        edges["src_name"].to_numpy(zero_copy_only=False),
        edges["dst_name"].to_numpy(zero_copy_only=False),
    )
    # end→start: time between two children, inside their CPU parent
    label = np.where(~src_start & dst_start, "Op", label)
    return label, name


def _scaled_weights(edges: pa.Table, scaling: Scaling) -> np.ndarray:
    weight = edges["weight_ns"].to_numpy(zero_copy_only=False).astype(np.float64)
    types = edges["type"].to_numpy(zero_copy_only=False)
    label, name = _attributed(edges)
    collective = np.asarray(
        pc.fill_null(pc.match_substring_regex(pa.array(name, pa.string()), COLLECTIVE_NAME), False)
    )
    factor = np.where(label == "Kernel", scaling.kernel, scaling.cpu)
    factor = np.where(collective, scaling.collective, factor)
    factor = np.where(types == "collective_dependency", scaling.collective, factor)
    factor = np.where(np.isin(types, UNSCALED_TYPES), 1.0, factor)
    scaled = np.rint(weight * factor).astype(np.int64)
    return _cut_waits(edges, scaled)


def _cut_waits(edges: pa.Table, weight: np.ndarray) -> np.ndarray:
    """With collective edges, a waiting participant's span counts only after the last arrival."""
    types = edges["type"].to_numpy(zero_copy_only=False)
    coll = np.nonzero(types == "collective_dependency")[0]
    if len(coll) == 0:
        return weight
    dst = edges["dst"].to_numpy(zero_copy_only=False)
    after_arrival = dict(zip(dst[coll].tolist(), weight[coll].tolist(), strict=True))
    src = edges["src"].to_numpy(zero_copy_only=False)
    starts = pc.equal(edges["src_boundary"], "start").to_numpy(zero_copy_only=False)
    ends = pc.equal(edges["dst_boundary"], "end").to_numpy(zero_copy_only=False)
    span = (types == "operator_kernel") & (src == dst) & starts & ends
    out = weight.copy()
    for j in np.nonzero(span)[0].tolist():
        if int(dst[j]) in after_arrival:
            out[j] = after_arrival[int(dst[j])]
    return out


def _groups(edges: pa.Table) -> list[tuple[int, np.ndarray]]:
    """Edge indices per rank, or the whole run (-1) when collective edges join the ranks."""
    if pc.any(pc.equal(edges["type"], "collective_dependency")).as_py():
        return [(-1, np.arange(edges.num_rows))]
    rank = edges["src_rank"].to_numpy(zero_copy_only=False)
    return [(int(r), np.nonzero(rank == r)[0]) for r in np.unique(rank)]


def _node_ids(edges: pa.Table, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense node ids for (event id, boundary) pairs of the selected edges."""
    src = edges["src"].to_numpy(zero_copy_only=False)[sel].astype(np.int64) * 2
    dst = edges["dst"].to_numpy(zero_copy_only=False)[sel].astype(np.int64) * 2
    src += pc.equal(edges["src_boundary"], "end").to_numpy(zero_copy_only=False)[sel]
    dst += pc.equal(edges["dst_boundary"], "end").to_numpy(zero_copy_only=False)[sel]
    uniq, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    inverse = inverse.ravel()
    return inverse[: len(src)], inverse[len(src) :]
