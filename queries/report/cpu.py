"""One rank's CPU events as columns, and the nesting questions the findings ask of them, by
whole-array passes per thread (nesting is by time on the same pid and tid, as the ingest's
CALLS edges are)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.arrays import ints
from tracegraph.ingest.edgesets.native.frame import Strings
from tracegraph.ingest.intervals import Intervals, merged
from tracegraph.ingest.row_codes import row_codes

# ranges whose names say data loading, as torch and users name them (input_bound's)
DATA_LOADING = re.compile(r"enumerate\(DataLoader\)|dataloader|data[_ ]?load|_next_data|"
                          r"DataLoaderIter|get_batch|next_batch", re.I)  # fmt: skip


@dataclass(frozen=True)
class CpuEvents:
    """The rank's Op and Runtime events: ev_idx, label, cat, name, thread, start, end."""

    ev_idx: np.ndarray
    is_runtime: np.ndarray
    cat: Strings
    name: Strings
    thread: np.ndarray  # one number per (pid, tid)
    ts: np.ndarray
    end: np.ndarray

    @property
    def dur(self) -> np.ndarray:
        return self.end - self.ts

    @staticmethod
    def of(rows: pa.Table) -> CpuEvents:
        cpu = rows.filter(pc.is_in(rows["label"], pa.array(["Op", "Runtime"])))

        pid, tid = ints(cpu["pid"]), ints(cpu["tid"])
        thread = row_codes(pid, tid)[0]
        ts = ints(cpu["ts"])
        return CpuEvents(
            ints(cpu["ev_idx"]),
            np.asarray(pc.equal(cpu["label"], "Runtime").to_numpy(zero_copy_only=False), bool),
            Strings.of(pc.fill_null(cpu["cat"], "")),
            Strings.of(pc.fill_null(cpu["name"], "")),
            thread,
            ts,
            ts + np.maximum(ints(cpu["dur"]), 0),
        )

    def names_where(self, test: Callable[[str], bool]) -> np.ndarray:
        """Rows whose name passes `test` (asked once per distinct name)."""
        table = np.array([test(v or "") for v in self.name.values] + [False], bool)
        return table[self.name.codes]

    def named(self, prefixes: tuple[str, ...]) -> np.ndarray:
        return self.names_where(lambda n: n.startswith(prefixes))

    def name_in(self, names: tuple[str, ...]) -> np.ndarray:
        return self.name.isin(names)

    def cat_is(self, cat: str) -> np.ndarray:
        return self.cat.isin((cat,))

    def data_loading(self) -> np.ndarray:
        """The ranges (ops, not runtime calls) whose names say data loading (a copy of
        `_data_loading`, which three findings read)."""
        return self._data_loading.copy()

    @cached_property
    def _data_loading(self) -> np.ndarray:
        return ~self.is_runtime & self.names_where(lambda n: bool(DATA_LOADING.search(n)))

    def intervals(self, rows: np.ndarray) -> Intervals:
        """[ts, end) of the rows (a mask or positions)."""
        return self.ts[rows], self.end[rows]

    def top_level(self, among: np.ndarray) -> np.ndarray:
        """Of the events in `among`, those no other event in `among` on their thread encloses."""
        rows = np.nonzero(among)[0]
        out = np.zeros(len(self.ts), bool)
        if len(rows) == 0:
            return out
        order = rows[np.lexsort((-self.end[rows], self.ts[rows], self.thread[rows]))]
        thread, ts, end = self.thread[order], self.ts[order], self.end[order]
        new = np.concatenate(([True], thread[1:] != thread[:-1]))
        # the latest end of the earlier events of the same thread
        reach = np.empty(len(order), np.int64)
        for lo, hi in _runs(new):
            reach[lo:hi] = np.maximum.accumulate(end[lo:hi])
        before = np.concatenate(([np.iinfo(np.int64).min], reach[:-1]))
        out[order] = new | (ts >= before)
        return out

    def inside(self, inner: np.ndarray, outer: np.ndarray) -> np.ndarray:
        """Which `inner` events lie within some `outer` event of their thread."""
        out = np.zeros(len(self.ts), bool)
        for t in np.unique(self.thread[inner]):
            lo, hi = merged(
                self.ts[outer & (self.thread == t)], self.end[outer & (self.thread == t)]
            )
            rows = np.nonzero(inner & (self.thread == t))[0]
            if len(lo) == 0:
                continue
            at = np.searchsorted(lo, self.ts[rows], side="right") - 1
            ok = at >= 0
            ok[ok] &= self.end[rows[ok]] <= hi[at[ok]]
            out[rows] = ok
        return out


def _runs(starts: np.ndarray) -> list[tuple[int, int]]:
    edges = [*np.nonzero(starts)[0].tolist(), len(starts)]
    return list(zip(edges[:-1], edges[1:], strict=True))
