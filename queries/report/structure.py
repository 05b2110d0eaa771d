"""Two runs' call trees matched by structure (`report --compare`'s `structure` table), as
TraceLens's `TraceDiff` matches them: op by op, not kernel by kernel, so the same model on two
GPU vendors or two library versions lines up where its kernels are named differently.

A run's call tree, per rank and step: its CPU ops and annotations nested as CALLS nests them
(python frames left out: their file paths and line numbers differ between checkouts), each
node's figures inclusive of its children: calls, CPU time, and the kernels launched inside it
(kernels whose launching call the node holds; their summed durations, `gpu_ns`). Two trees are
matched from the top: the top-level nodes of the two steps, thread by thread in the order the
threads start, are aligned by name (a longest common subsequence, as TraceLens's
Wagner-Fischer alignment; long sibling lists in linear space, Hirschberg's split); a matched
pair's children are aligned the same way, and so on down.
A node without a counterpart is reported with its whole subtree as `only_a` or `only_b`.
`ProfilerStep#N` counts as one name, whatever N. Rows are per path (names from the top, as the
module tree writes them) and status; the largest change in a node's own time (CPU time or kernel
time outside its children) first: that is where the runs differ, while its ancestors only
inherit it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.arrays import ints
from tracegraph.ingest.link import (
    ancestor_paths,
    innermost_holding,
    nesting_depths,
    range_parents,
)
from tracegraph.ingest.row_codes import row_codes

from .launchers import LaunchedKernels, launched_kernels
from .steps import StepWindow

TREE_CATEGORIES = ("cpu_op", "user_annotation", "Operator")
SEPARATOR = " > "
_STEP_NUMBER = re.compile(r"^ProfilerStep#\d+$")
BOTH, ONLY_A, ONLY_B = "both", "only_a", "only_b"


@dataclass(frozen=True)
class CallTree:
    """One rank's CPU ops and annotations as a forest (positions index every array)."""

    name: list[str]  # ProfilerStep#N written ProfilerStep#N whatever N
    parent: np.ndarray  # -1: top level of its thread
    ts: np.ndarray
    thread: np.ndarray  # a number per (pid, tid)
    cpu_ns: np.ndarray
    gpu_ns: np.ndarray  # kernels launched inside, summed durations (inclusive)
    kernels: np.ndarray  # how many (inclusive)
    children: list[list[int]]  # each node's children in start order

    def homes(self, windows: list[StepWindow]) -> np.ndarray:
        """Each node's step: its parent's, else the step whose window holds its start (-1:
        none); every node when `windows` is empty is step 0's (the whole trace)."""
        n = len(self.name)
        if not windows:
            return np.zeros(n, np.int64)
        starts = np.array([w.ts for w in windows], np.int64)
        ends = np.array([w.end for w in windows], np.int64)
        at = np.searchsorted(starts, self.ts, side="right") - 1
        own = np.where((at >= 0) & (self.ts < ends[np.maximum(at, 0)]), at, -1)
        home = own.copy()
        for i in np.lexsort((np.arange(n), nesting_depths(self.parent))).tolist():  # parents first
            up = int(self.parent[i])
            if up >= 0 and home[up] >= 0:
                home[i] = home[up]
        return home

    def roots(self, home: np.ndarray, step: int) -> list[int]:
        """The top nodes of `step` (`homes`): thread by thread, the threads in the order their
        first such node starts."""
        parent_home = np.where(self.parent >= 0, home[np.maximum(self.parent, 0)], -1)
        top = np.flatnonzero((home == step) & (parent_home != step))
        if not len(top):
            return []
        first_of_thread: dict[int, int] = {}
        for i in top[np.lexsort((top, self.ts[top]))].tolist():
            first_of_thread.setdefault(int(self.thread[i]), int(self.ts[i]))
        thread, start = self.thread, self.ts
        return sorted(
            top.tolist(),
            key=lambda i: (first_of_thread[int(thread[i])], int(thread[i]), int(start[i]), i),
        )

    def self_ns(self, values: np.ndarray) -> np.ndarray:
        """`values` less their children's (a node's own share)."""
        out = values.astype(np.int64).copy()
        child = np.flatnonzero(self.parent >= 0)
        np.subtract.at(out, self.parent[child], values[child].astype(np.int64))
        return out


def call_tree(rows: pa.Table, kernels: LaunchedKernels | None = None) -> CallTree:
    """The call tree of one rank's archived rows (`FrameSource.rows`)."""
    nodes = rows.select(["ev_idx", "cat", "name", "pid", "tid", "ts", "dur"]).filter(
        pc.is_in(pc.fill_null(rows["cat"], ""), value_set=pa.array(TREE_CATEGORIES))
    )
    n = nodes.num_rows
    parent = range_parents(nodes)
    names = [
        "ProfilerStep#N" if _STEP_NUMBER.match(s) else s
        for s in pc.fill_null(nodes["name"], "").to_pylist()
    ]
    ts = ints(nodes["ts"], 0)
    dur = ints(nodes["dur"], 0)
    pid = ints(nodes["pid"])
    tid = ints(nodes["tid"])
    thread = row_codes(pid, tid)[0]
    kernels = launched_kernels(rows) if kernels is None else kernels
    gpu = np.zeros(n, np.int64)
    count = np.zeros(n, np.int64)
    if kernels.n and n:
        level = innermost_holding(nodes, kernels.calls)
        spent = kernels.end - kernels.ts
        while (held := level >= 0).any():  # the holder and each of its ancestors
            np.add.at(gpu, level[held], spent[held])
            np.add.at(count, level[held], 1)
            level = np.where(held, parent[np.maximum(level, 0)], -1)
    children: list[list[int]] = [[] for _ in range(n)]
    for i in np.lexsort((np.arange(n), ts)).tolist():
        if parent[i] >= 0:
            children[int(parent[i])].append(i)
    return CallTree(names, parent, ts, thread, dur, gpu, count, children)


@dataclass(frozen=True)
class Matching:
    """Which nodes of tree A and tree B are counterparts, and which have none."""

    pairs: list[tuple[int, int]]
    only_a: list[int]  # the top of each subtree without a counterpart
    only_b: list[int]


def match_trees(a: CallTree, b: CallTree, roots_a: list[int], roots_b: list[int]) -> Matching:
    """Align two forests from the top, sibling list by sibling list, by name."""
    pairs: list[tuple[int, int]] = []
    only_a: list[int] = []
    only_b: list[int] = []
    todo = [(roots_a, roots_b)]
    while todo:
        xs, ys = todo.pop()
        matched = aligned([a.name[i] for i in xs], [b.name[j] for j in ys])
        taken_x = {x for x, _ in matched}
        taken_y = {y for _, y in matched}
        only_a += [i for k, i in enumerate(xs) if k not in taken_x]
        only_b += [j for k, j in enumerate(ys) if k not in taken_y]
        for x, y in matched:
            i, j = xs[x], ys[y]
            pairs.append((i, j))
            if a.children[i] or b.children[j]:
                todo.append((a.children[i], b.children[j]))
    return Matching(pairs, only_a, only_b)


MAX_LCS_CELLS = 8_000_000  # a table of at most 32 MB; larger lists are split (Hirschberg)


def aligned(xs: list[str], ys: list[str]) -> list[tuple[int, int]]:
    """Positions (x, y) of a longest common subsequence of `xs` and `ys`, in order."""
    codes: dict[str, int] = {}
    code_x = np.array([codes.setdefault(s, len(codes)) for s in xs], np.int64)
    code_y = np.array([codes.get(s, -1) for s in ys], np.int64)
    out: list[tuple[int, int]] = []
    _lcs(code_x, code_y, 0, 0, out)
    return out


def _lcs(x: np.ndarray, y: np.ndarray, dx: int, dy: int, out: list[tuple[int, int]]) -> None:
    """Append a longest common subsequence of x and y (offset by dx, dy), in order: from the
    whole table where it fits in MAX_LCS_CELLS, else split at x's middle where the best
    prefix and suffix lengths meet (Hirschberg: linear space, the same length)."""
    n, m = len(x), len(y)
    if not n or not m:
        return
    if n * m <= MAX_LCS_CELLS or n < 2:  # one row of x: its table is one row too
        out += [(dx + i, dy + j) for i, j in _from_table(x, y)]
        return
    half = n // 2
    before = _last_row(x[:half], y)
    after = _last_row(x[half:][::-1], y[::-1])[::-1]
    k = int(np.argmax(before + after))
    _lcs(x[:half], y[:k], dx, dy, out)
    _lcs(x[half:], y[k:], dx + half, dy + k, out)


def _rows(x: np.ndarray, y: np.ndarray) -> Iterator[np.ndarray]:
    """Each row of the LCS table of x against y (row i: the lengths for x[:i] and y[:j]), a
    row from the one above with a running maximum: one numpy sweep each."""
    row = np.zeros(len(y) + 1, np.int32)
    yield row
    for code in x.tolist():
        diagonal = row[:-1] + (y == code)
        row = np.concatenate(([0], np.maximum.accumulate(np.maximum(row[1:], diagonal))))
        yield row.astype(np.int32)


def _last_row(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    last = np.zeros(len(y) + 1, np.int32)
    for last in _rows(x, y):  # noqa: B007 - the last row is the answer
        continue
    return last


def _from_table(x: np.ndarray, y: np.ndarray) -> list[tuple[int, int]]:
    table = np.stack(list(_rows(x, y)))
    out: list[tuple[int, int]] = []
    i, j = len(x), len(y)
    while i and j:
        if x[i - 1] == y[j - 1] and table[i, j] == table[i - 1, j - 1] + 1:
            out.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif table[i - 1, j] == table[i, j]:
            i -= 1
        else:
            j -= 1
    return out[::-1]


@dataclass(frozen=True)
class StructureDiff:
    """The `structure` table and what was compared and matched."""

    rows: pa.Table
    summary: dict[str, object]


STRUCTURE_SCHEMA = pa.schema(
    [("path", pa.string()), ("depth", pa.int64()), ("status", pa.string()),
     ("a_calls", pa.int64()), ("b_calls", pa.int64()),
     ("a_cpu_us", pa.float64()), ("b_cpu_us", pa.float64()),
     ("a_gpu_us", pa.float64()), ("b_gpu_us", pa.float64()),
     ("a_kernels", pa.int64()), ("b_kernels", pa.int64()),
     ("delta_self_cpu_us", pa.float64()), ("delta_self_gpu_us", pa.float64())]
)  # fmt: skip


def structure_diff(
    a: CallTree,
    b: CallTree,
    windows_a: list[StepWindow],
    windows_b: list[StepWindow],
) -> StructureDiff:
    """Rank A's tree against rank B's, step i of A with step i of B (the whole traces where
    either has no steps), rows summed over the steps."""
    steps = min(len(windows_a), len(windows_b))
    if not steps:  # the whole traces, as one step
        windows_a, windows_b = [], []
    home_a, home_b = a.homes(windows_a[:steps]), b.homes(windows_b[:steps])
    # per (path, status): A's figures then B's, each `_FIGURES`
    figures: dict[tuple[str, str], np.ndarray] = defaultdict(lambda: np.zeros(12, np.int64))
    path_a = ancestor_paths(a.name, a.parent, SEPARATOR)
    path_b = ancestor_paths(b.name, b.parent, SEPARATOR)
    of_a, of_b = _node_figures(a), _node_figures(b)
    totals = dict.fromkeys(("a_nodes", "b_nodes", "matched", "only_a", "only_b"), 0)
    gpu_totals = dict.fromkeys(("a", "b", "a_matched", "b_matched"), 0)
    for step in range(max(steps, 1)):
        roots_a, roots_b = a.roots(home_a, step), b.roots(home_b, step)
        matching = match_trees(a, b, roots_a, roots_b)
        for i, j in matching.pairs:
            both = figures[(path_a[i], BOTH)]
            both[:6] += of_a[i]
            both[6:] += of_b[j]
        only_a = _subtrees(a, matching.only_a)
        only_b = _subtrees(b, matching.only_b)
        for i in only_a:
            figures[(path_a[i], ONLY_A)][:6] += of_a[i]
        for j in only_b:
            figures[(path_b[j], ONLY_B)][6:] += of_b[j]
        in_a, in_b = _subtrees(a, roots_a), _subtrees(b, roots_b)
        # every node of either step is matched once or reported once without a counterpart
        assert len(in_a) == len(matching.pairs) + len(only_a), (len(in_a), len(only_a))
        assert len(in_b) == len(matching.pairs) + len(only_b), (len(in_b), len(only_b))
        totals["a_nodes"] += len(in_a)
        totals["b_nodes"] += len(in_b)
        totals["matched"] += len(matching.pairs)
        totals["only_a"] += len(only_a)
        totals["only_b"] += len(only_b)
        gpu_totals["a"] += int(a.gpu_ns[roots_a].sum())
        gpu_totals["b"] += int(b.gpu_ns[roots_b].sum())
        tops = set(roots_a)
        top_pairs = [(i, j) for i, j in matching.pairs if i in tops]
        gpu_totals["a_matched"] += int(sum(int(a.gpu_ns[i]) for i, _ in top_pairs))
        gpu_totals["b_matched"] += int(sum(int(b.gpu_ns[j]) for _, j in top_pairs))
    rows = [_row(path, status, f.tolist()) for (path, status), f in figures.items()]
    rows.sort(key=lambda r: (-max(abs(r["delta_self_gpu_us"]), abs(r["delta_self_cpu_us"])),
                             r["path"], r["status"]))  # fmt: skip
    summary: dict[str, object] = {
        "steps": steps,
        "steps_a": len(windows_a),
        "steps_b": len(windows_b),
        **totals,
        "a_gpu_us": gpu_totals["a"] / 1e3,
        "b_gpu_us": gpu_totals["b"] / 1e3,
        "a_gpu_matched_us": gpu_totals["a_matched"] / 1e3,
        "b_gpu_matched_us": gpu_totals["b_matched"] / 1e3,
    }
    return StructureDiff(pa.Table.from_pylist(rows, schema=STRUCTURE_SCHEMA), summary)


_FIGURES = ("calls", "cpu", "gpu", "self_cpu", "self_gpu", "kernels")


def _node_figures(tree: CallTree) -> np.ndarray:
    """Per node, `_FIGURES` (calls: 1)."""
    n = len(tree.name)
    return np.stack(
        [np.ones(n, np.int64), tree.cpu_ns, tree.gpu_ns, tree.self_ns(tree.cpu_ns),
         tree.self_ns(tree.gpu_ns), tree.kernels], axis=1,
    ).astype(np.int64)  # fmt: skip


def _row(path: str, status: str, figures: list[int]) -> dict[str, object]:
    a = dict(zip(_FIGURES, figures[:6], strict=True))
    b = dict(zip(_FIGURES, figures[6:], strict=True))
    return {
        "path": path,
        "depth": path.count(SEPARATOR),
        "status": status,
        "a_calls": a["calls"],
        "b_calls": b["calls"],
        "a_cpu_us": a["cpu"] / 1e3,
        "b_cpu_us": b["cpu"] / 1e3,
        "a_gpu_us": a["gpu"] / 1e3,
        "b_gpu_us": b["gpu"] / 1e3,
        "a_kernels": a["kernels"],
        "b_kernels": b["kernels"],
        "delta_self_cpu_us": (b["self_cpu"] - a["self_cpu"]) / 1e3,
        "delta_self_gpu_us": (b["self_gpu"] - a["self_gpu"]) / 1e3,
    }


def _subtrees(tree: CallTree, tops: list[int]) -> list[int]:
    """`tops` and every node below them."""
    out: list[int] = []
    todo = list(tops)
    while todo:
        i = todo.pop()
        out.append(i)
        todo += tree.children[i]
    return out
