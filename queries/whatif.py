"""What-if: critical-path lengths recomputed from a stored edge set under changed durations.

Each edge's weight is a span of one event (HTA's attribution: start→start is the source's,
start→end the event's own, end→end the destination's, end→start the enclosing CPU work); its
event's kind decides the factor: `kernel` (GPU activity), `collective` (NCCL/RCCL kernels, gloo
ranges, and the cross-rank collective edges), `cpu` (ops and runtime calls). Launch and
kernel→kernel delays keep their weight; dependency and sync edges weigh 0. Edges can be removed
by type, and an edge set can be compared with a variant of itself or with another set under the
same scaling: `critical-sync-only` keeps only the sync edges on the profiled critical path (what
Chakra's trace linker keeps), which is where the two can disagree once timing changes.

Lengths are per rank and window: one row per rank for a set of one window (the whole trace, or
an annotation's instance), one per rank and step for an `--all-steps` set (an edge belongs to the
step its CPU endpoint, or its kernel's launching call, starts in; the unscaled lengths are the
builder's). A plain native set with cross-rank collective edges is recomputed from the joined
graphs the builder makes of each step (rebuilt in memory from the run's archive), reported as
rank -1: its unscaled lengths are exactly the cross-rank paths `edges` printed, every wait and
blocked span counted as the builder counted it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.critical_path import longest_path
from tracegraph.ingest.edgesets.native.edge_set import build_run
from tracegraph.ingest.edgesets.native.edges import TYPE_NAMES
from tracegraph.ingest.edgesets.native.frame import KIND_KERNEL, KIND_SYNC
from tracegraph.ingest.edgesets.native.options import NativeOptions
from tracegraph.ingest.edgesets.native.step_graph import StepGraph
from tracegraph.ingest.edgesets.native.window import Window
from tracegraph.ingest.errors import TracegraphError
from tracegraph.ingest.store import GraphStore

from .diff import edge_set_runs, edge_set_window, window_label

CRITICAL_SYNC_ONLY = "critical-sync-only"
# What --scale and --remove accept.
KINDS = ("kernel", "cpu", "collective")
KIND_ALIASES = {"cpu_op": "cpu", "op": "cpu"}
EDGE_TYPES = TYPE_NAMES  # HTA's five edge types, and the native cross-rank collective_dependency
COLLECTIVE_NAME = r"^(?i)(nccl|rccl|gloo:)"
COLLECTIVES = ("nccl", "rccl", "gloo:")  # the same names, as prefixes of a lower-cased name
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
       a.name AS src_name, b.name AS dst_name, a.ts AS src_ts, b.ts AS dst_ts
"""
# The launching call of each kernel of a run: a kernel's edges belong to its launch's step.
# (The rank, a validated integer, is inlined: Kuzu prunes the scan for literals.)
_LAUNCH_TS = """
MATCH (r:Runtime)-[:LAUNCHES]->(k:Kernel) WHERE k.run = $run AND k.rank = {rank}
RETURN k.id AS kernel, min(r.ts) AS ts
"""


class WhatIfError(TracegraphError):
    """A what-if that cannot be computed (unknown edge set or run)."""


@dataclass(frozen=True)
class Scaling:
    """Duration factors by kind of event (1.0 = as profiled)."""

    kernel: float = 1.0
    cpu: float = 1.0
    collective: float = 1.0

    @staticmethod
    def parse(items: list[str]) -> Scaling:
        """From `kind=factor` strings (kinds: kernel, cpu (or cpu_op), collective)."""
        values: dict[str, float] = {}
        kinds = ", ".join(KINDS)
        for item in items:
            key, sep, value = (part.strip() for part in item.partition("="))
            if not sep or not key or not value:
                raise WhatIfError(f"--scale {item}: expected KIND=FACTOR (kinds: {kinds})")
            kind = KIND_ALIASES.get(key, key)
            if kind not in KINDS:
                raise WhatIfError(f"--scale {item}: unknown kind '{key}' (kinds: {kinds})")
            try:
                factor = float(value)
            except ValueError as exc:
                raise WhatIfError(f"--scale {item}: '{value}' is not a number") from exc
            if not math.isfinite(factor) or factor < 0:
                raise WhatIfError(f"--scale {item}: a factor is a finite number >= 0")
            values[kind] = factor
        return Scaling(**values)

    def describe(self) -> str:
        """`kernel ×0.5, cpu ×2`, or `as profiled`."""
        factors = [(k, getattr(self, k)) for k in KINDS if getattr(self, k) != 1.0]
        return ", ".join(f"{k} ×{f:g}" for k, f in factors) or "as profiled"


def check_edge_types(types: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The edge types to remove, each one of EDGE_TYPES (else a WhatIfError listing them)."""
    for kind in types:
        if kind not in EDGE_TYPES:
            raise WhatIfError(
                f"--remove {kind}: unknown edge type (types: {', '.join(EDGE_TYPES)})"
            )
    return tuple(types)


@dataclass(frozen=True)
class WhatIf:
    """Per rank (-1: the whole run, joined through collectives) and window: lengths before
    and after."""

    run: str
    edge_set: str
    variant: str
    scaling: Scaling
    removed_types: tuple[str, ...]
    # rank, window, edges, baseline_ns, scaled_ns, change, path_edges_changed
    lengths: pa.Table


LENGTHS_SCHEMA = pa.schema(
    [
        ("rank", pa.int64()),
        ("window", pa.string()),
        ("edges", pa.int64()),
        ("baseline_ns", pa.int64()),
        ("scaled_ns", pa.int64()),
        ("change", pa.float64()),
        ("path_edges_changed", pa.int64()),
    ]
)


def what_if(
    store: GraphStore,
    edge_set: str,
    *,
    run: str | None = None,
    scaling: Scaling = Scaling(),
    remove_types: tuple[str, ...] = (),
    variant: str = "all",
) -> WhatIf:
    """Recompute every rank's (and window's) critical-path length with scaled durations /
    removed edges."""
    remove_types = check_edge_types(remove_types)
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
    if _joined(edges):
        rows = _joined_lengths(store, edge_set, run, scaling, remove_types, variant)
        table = pa.Table.from_pylist(rows, schema=LENGTHS_SCHEMA)
        return WhatIf(run, edge_set, variant, scaling, tuple(remove_types), table)
    base = _scaled_weights(edges, Scaling())
    scaled = _scaled_weights(edges, scaling)
    rows = []
    for rank, window, sel in _groups(store, run, edge_set, edges):
        src, dst = _node_ids(edges, sel)
        before = longest_path(src, dst, base[sel])
        after = longest_path(src, dst, scaled[sel])
        changed = len(set(before.edges.tolist()) ^ set(after.edges.tolist()))
        rows.append(
            {
                "rank": rank,
                "window": window,
                "edges": int(len(sel)),
                "baseline_ns": before.length,
                "scaled_ns": after.length,
                "change": (after.length / before.length - 1.0) if before.length else 0.0,
                "path_edges_changed": changed,
            }
        )
    table = pa.Table.from_pylist(rows, schema=LENGTHS_SCHEMA)
    return WhatIf(run, edge_set, variant, scaling, tuple(remove_types), table)


def _joined(edges: pa.Table) -> bool:
    return bool(pc.any(pc.equal(edges["type"], "collective_dependency")).as_py())


def _joined_lengths(
    store: GraphStore,
    edge_set: str,
    run: str,
    scaling: Scaling,
    remove_types: tuple[str, ...],
    variant: str,
) -> list[dict[str, object]]:
    """A plain native set's steps across ranks (rank -1), from the joined graphs the builder
    makes (rebuilt from the run's archive with the set's options, writing nothing): the
    unscaled length is the builder's, every wait and blocked span as it counted them."""
    options_text = (
        store.run(
            "MATCH (e:EdgeSet) WHERE e.name = $name AND e.run = $run RETURN e.options AS o",
            {"name": edge_set, "run": run},
        )
        .table["o"][0]
        .as_py()
    )
    recorded = json.loads(options_text or "{}")
    fields = {f.name for f in dataclasses.fields(NativeOptions)}
    options = NativeOptions().with_changes(**{k: v for k, v in recorded.items() if k in fields})
    window = Window(str(recorded.get("annotation") or ""), recorded.get("instance"))
    built = build_run(
        Path(store.path), run=run, options=options, window=window,
        all_steps=bool(recorded.get("all_steps")),
    )  # fmt: skip
    removed = [EDGE_TYPES.index(t) for t in remove_types]
    rows = []
    for p in built.paths:
        g = p.graph
        assert g is not None and p.path_edges is not None
        keep = ~np.isin(g.kind, removed)
        if variant == CRITICAL_SYNC_ONLY:
            on_path = np.zeros(len(g.kind), bool)
            on_path[p.path_edges] = True
            keep &= ~((g.kind == EDGE_TYPES.index("sync_dependency")) & ~on_path)
        weight = np.where(keep, g.weight, 0)
        before = longest_path(g.src[keep], g.dst[keep], weight[keep], g.n_nodes)
        after = longest_path(g.src[keep], g.dst[keep], _joined_scaled(g, scaling)[keep], g.n_nodes)
        rows.append(
            {
                "rank": -1,
                "window": p.step,
                "edges": int(keep.sum()),
                "baseline_ns": before.length,
                "scaled_ns": after.length,
                "change": (after.length / before.length - 1.0) if before.length else 0.0,
                "path_edges_changed": len(set(before.edges.tolist()) ^ set(after.edges.tolist())),
            }
        )
    return rows


def _joined_scaled(graph: StepGraph, scaling: Scaling) -> np.ndarray:
    """The joined graph's weights scaled by the kind of work each edge is: GPU activity
    (kernel; NCCL/RCCL: collective), CPU time (cpu; gloo ranges: collective), a collective's
    time across ranks (collective); launch and stream delays as they are."""
    factor = np.full(len(graph.weight), scaling.cpu, np.float64)
    gpu = np.zeros(graph.n_nodes, bool)
    collective = np.zeros(graph.n_nodes, bool)
    for i, w in enumerate(graph.graphs):
        c, lo = w.clip, int(graph.base[i])
        rows_gpu = (c.kind == KIND_KERNEL) | (c.kind == KIND_SYNC) | (c.stream >= 0)
        rows_coll = np.isin(
            c.name.codes,
            [k for k, v in enumerate(c.name.values) if v and v.lower().startswith(COLLECTIVES)],
        )
        gpu[lo : lo + 2 * c.n] = np.repeat(rows_gpu, 2)
        collective[lo : lo + 2 * c.n] = np.repeat(rows_coll, 2)
    factor[gpu[graph.dst] & gpu[graph.src]] = scaling.kernel
    factor[collective[graph.dst]] = scaling.collective
    factor[graph.kind == EDGE_TYPES.index("collective_dependency")] = scaling.collective
    factor[np.isin(graph.kind, [EDGE_TYPES.index(t) for t in UNSCALED_TYPES])] = 1.0
    return np.rint(graph.weight * factor).astype(np.int64)


def compare_what_if(
    store: GraphStore,
    edge_set: str,
    other: str,
    *,
    run: str | None = None,
    scaling: Scaling = Scaling(),
    remove_types: tuple[str, ...] = (),
) -> pa.Table:
    """Two edge sets (or a set and its `critical-sync-only` variant) under the same scaling
    and with the same edge types removed."""
    a = what_if(store, edge_set, run=run, scaling=scaling, remove_types=remove_types)
    if other == CRITICAL_SYNC_ONLY:
        b = what_if(
            store,
            edge_set,
            run=run,
            scaling=scaling,
            remove_types=remove_types,
            variant=CRITICAL_SYNC_ONLY,
        )
    else:
        b = what_if(store, other, run=run, scaling=scaling, remove_types=remove_types)
    columns = ["rank", "window", "baseline_ns", "scaled_ns"]
    left = a.lengths.select(columns).rename_columns(
        ["rank", "a_window", "a_baseline_ns", "a_scaled_ns"]
    )
    right = b.lengths.select(columns).rename_columns(
        ["rank", "b_window", "b_baseline_ns", "b_scaled_ns"]
    )
    if _one_row_per_rank(left) and _one_row_per_rank(right):
        # one window each (e.g. the whole trace vs one step): rank by rank, windows named
        joined = left.join(right, "rank", join_type="full outer")
        window = pc.if_else(
            pc.fill_null(pc.equal(joined["a_window"], joined["b_window"]), True),
            pc.coalesce(joined["a_window"], joined["b_window"]),
            pc.binary_join_element_wise(joined["a_window"], joined["b_window"], " / "),
        )
    else:
        left = left.append_column("window", left["a_window"])
        right = right.append_column("window", right["b_window"])
        joined = left.join(right, ["rank", "window"], join_type="full outer")
        window = joined["window"]
    order = pa.array(np.arange(joined.num_rows))
    joined = pa.table(
        {
            "rank": joined["rank"],
            "window": window,
            "a_baseline_ns": joined["a_baseline_ns"],
            "a_scaled_ns": joined["a_scaled_ns"],
            "b_baseline_ns": joined["b_baseline_ns"],
            "b_scaled_ns": joined["b_scaled_ns"],
            "_order": _row_order(joined, a.lengths, b.lengths, order),
        }
    ).sort_by([("rank", "ascending"), ("_order", "ascending")])
    diff = pc.subtract(joined["b_scaled_ns"], joined["a_scaled_ns"])
    return joined.drop_columns(["_order"]).append_column("scaled_difference_ns", diff)


def _one_row_per_rank(lengths: pa.Table) -> bool:
    return len(pc.unique(lengths["rank"])) == lengths.num_rows


def _row_order(joined: pa.Table, a: pa.Table, b: pa.Table, fallback: pa.Array) -> pa.Array:
    """Within a rank: A's rows in A's order (the windows' time order), then B's other rows."""
    position: dict[tuple[int, str], int] = {}
    for offset, table in ((0, a), (a.num_rows, b)):
        keys = zip(table["rank"].to_pylist(), table["window"].to_pylist(), strict=True)
        for i, key in enumerate(keys):
            position.setdefault(key, offset + i)
    ranks = joined["rank"].to_pylist()
    a_windows, b_windows = joined["a_window"].to_pylist(), joined["b_window"].to_pylist()
    out = []
    for rank, wa, wb in zip(ranks, a_windows, b_windows, strict=True):
        out.append(position.get((rank, wa), position.get((rank, wb), len(position))))
    return pa.array(out, pa.int64()) if out else fallback


def _run_of(store: GraphStore, edge_set: str, run: str | None) -> str:
    runs = edge_set_runs(store, edge_set)
    if not runs:
        raise WhatIfError(f"{store.path}: no edge set '{edge_set}'")
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


def _groups(
    store: GraphStore, run: str, edge_set: str, edges: pa.Table
) -> list[tuple[int, str, np.ndarray]]:
    """(rank, window, edge indices) in rank and time order; rank -1 is the whole run of a
    window when collective edges join the ranks."""
    if edges.num_rows == 0:
        return []
    default, per_rank = _rank_windows(edge_set_window(store, edge_set, run))
    rank = edges["src_rank"].to_numpy(zero_copy_only=False).astype(np.int64)
    label = np.full(edges.num_rows, default, dtype=object)
    start = np.zeros(edges.num_rows, dtype=np.int64)
    for r in np.unique(rank).tolist():
        windows = per_rank.get(r, [])
        sel = np.nonzero(rank == r)[0]
        if len(windows) == 1:
            label[sel], start[sel] = windows[0][0], windows[0][1]
        elif len(windows) > 1:
            starts = np.array([w[1] for w in windows], dtype=np.int64)
            which = np.searchsorted(starts, _anchor_ts(store, run, r, edges, sel), side="right")
            which = np.maximum(which - 1, 0)
            label[sel] = np.array([w[0] for w in windows], dtype=object)[which]
            start[sel] = starts[which]
    joined = pc.any(pc.equal(edges["type"], "collective_dependency")).as_py()
    group_rank = np.full(edges.num_rows, -1, dtype=np.int64) if joined else rank
    groups: dict[tuple[int, str], list[int]] = {}
    first: dict[tuple[int, str], int] = {}
    for i, key in enumerate(zip(group_rank.tolist(), label.tolist(), strict=True)):
        groups.setdefault(key, []).append(i)
        first[key] = min(first.get(key, int(start[i])), int(start[i]))
    ordered = sorted(groups, key=lambda k: (k[0], first[k], k[1]))
    return [(r, w, np.asarray(groups[(r, w)], dtype=np.int64)) for r, w in ordered]


def _rank_windows(window: dict[str, object]) -> tuple[str, dict[int, list[tuple[str, int]]]]:
    """The edge set's window label, and per rank its windows that have a graph: (label, start)
    in time order (the native builder's `ranks` entries; HTA's sets have one window a rank)."""
    default = window_label(window)
    per_rank: dict[int, list[tuple[str, int]]] = {}
    ranks = window.get("ranks")
    if not isinstance(ranks, dict):
        return default, per_rank
    for key, entries in ranks.items():
        if not isinstance(entries, list) or not str(key).lstrip("-").isdigit():
            continue
        found = [
            (str(e.get("step") or window_label(e)), int(e["start_ns"]))
            for e in entries
            if isinstance(e, dict)
            and e.get("status", "ok") == "ok"
            and isinstance(e.get("start_ns"), int)
        ]
        per_rank[int(key)] = sorted(found, key=lambda w: w[1])
    return default, per_rank


def _anchor_ts(
    store: GraphStore, run: str, rank: int, edges: pa.Table, sel: np.ndarray
) -> np.ndarray:
    """The time that places each selected edge in a window: its CPU endpoint's start (the
    source's if both are CPU), else the start of the call that launched its source kernel."""
    src_ts = edges["src_ts"].to_numpy(zero_copy_only=False)[sel].astype(np.int64)
    dst_ts = edges["dst_ts"].to_numpy(zero_copy_only=False)[sel].astype(np.int64)
    src_gpu = edges["src_label"].to_numpy(zero_copy_only=False)[sel] == "Kernel"
    dst_gpu = edges["dst_label"].to_numpy(zero_copy_only=False)[sel] == "Kernel"
    out = np.where(~src_gpu, src_ts, dst_ts)
    both_gpu = np.nonzero(src_gpu & dst_gpu)[0]
    if len(both_gpu):
        launches = store.run(_LAUNCH_TS.format(rank=int(rank)), {"run": run}).table
        src = edges["src"].to_numpy(zero_copy_only=False)[sel][both_gpu].astype(np.int64)
        kernels = launches["kernel"].to_numpy(zero_copy_only=False).astype(np.int64)
        order = np.argsort(kernels)
        kernels, launch_ts = kernels[order], launches["ts"].to_numpy(zero_copy_only=False)[order]
        at = np.minimum(np.searchsorted(kernels, src), max(len(kernels) - 1, 0))
        found = (kernels[at] == src) if len(kernels) else np.zeros(len(src), dtype=bool)
        out[both_gpu] = np.where(found, launch_ts[at] if len(kernels) else 0, src_ts[both_gpu])
    return out


def _node_ids(edges: pa.Table, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense node ids for (event id, boundary) pairs of the selected edges."""
    src = edges["src"].to_numpy(zero_copy_only=False)[sel].astype(np.int64) * 2
    dst = edges["dst"].to_numpy(zero_copy_only=False)[sel].astype(np.int64) * 2
    src += pc.equal(edges["src_boundary"], "end").to_numpy(zero_copy_only=False)[sel]
    dst += pc.equal(edges["dst_boundary"], "end").to_numpy(zero_copy_only=False)[sel]
    uniq, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
    inverse = inverse.ravel()
    return inverse[: len(src)], inverse[len(src) :]
