"""One rank's GPU activity and kernel launches as the report reads them, from the run archive.

Two readings of the same archived rows:

- exact (tracegraph's): GPU activity is every kernel, memcpy and memset event (by category),
  times in ns as the trace has them, nothing dropped; a stream is (device, stream id); a kernel's
  launch is the runtime call with its correlation id (cuda_runtime before cuda_driver, then the
  first), as the ingest links LAUNCHES.
- HTA 0.5.0's (`hta_compatible`): the rows HTA's `TraceAnalysis` loads (whole µs, sub-µs
  timestamps rounded inward; the last ProfilerStep dropped where a trace names two or more),
  GPU activity every row with a `stream` arg, whatever its category, and a kernel's launch time
  from `index_correlation`, borrowing the first event's start where the launch is missing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracegraph.ingest.arrays import ints
from tracegraph.ingest.edgesets.native.frame import Frame, FrameSource, Strings, rank_frame
from tracegraph.ingest.link import one_call_per_correlation

NO_LAUNCH = np.iinfo(np.int64).min
TYPES = ("COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER")
COMPUTATION, COMMUNICATION, MEMORY, OTHER = range(4)
# HTA's kernel types (hta/utils/utils.py get_kernel_type), by the full name, in this order
_COMMUNICATION = re.compile(r"^nccl.*Kernel")
_MEMORY = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTATION = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
# the categories HTA's idle-time breakdown reads (breakdown_analysis.py)
IDLE_CATEGORIES = ("kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy",
                   "mtia_ccp_events")  # fmt: skip
# the runtime calls HTA's launch statistics pair with their kernels (cuda_kernel_analysis.py)
HTA_LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC",
                    "runFunction - job_prep_and_submit_for_execution")  # fmt: skip
HTA_MEMORY_CALLS = ("cudaMemcpyAsync", "cudaMemsetAsync")


def kernel_type(name: str) -> int:
    """HTA's type of a GPU activity, by its name."""
    if _COMMUNICATION.match(name):
        return COMMUNICATION
    if _MEMORY.match(name):
        return MEMORY
    if not _NOT_COMPUTATION.match(name):
        return COMPUTATION
    return OTHER


@dataclass(frozen=True)
class GpuActivity:
    """One rank's GPU rows (times in `unit_ns` ns) and the launches paired with them."""

    rank: int
    hta: bool  # HTA 0.5.0's reading (else the exact one)
    unit_ns: int
    ev_idx: np.ndarray  # each row's event: its position in the rank's traceEvents
    ts: np.ndarray
    dur: np.ndarray
    stream: np.ndarray  # the stream id the trace gives (-1: none)
    lane: np.ndarray  # per-stream analyses group by this: (device, stream) exact, stream HTA
    name: Strings
    kernel_type: np.ndarray  # index into TYPES
    idle_row: np.ndarray  # rows the idle-time breakdown reads
    launch_ts: np.ndarray  # start of the launching call (NO_LAUNCH: none known)
    launches: pa.Table  # call_ts, call_dur, gpu_ts, gpu_dur (launch statistics' pairs), row

    @property
    def end(self) -> np.ndarray:
        return self.ts + self.dur

    def anchor(self) -> np.ndarray:
        """The time that places each row in a step: its launch call's start, else its own."""
        return np.where(self.launch_ts != NO_LAUNCH, self.launch_ts, self.ts)

    def take(self, rows: np.ndarray) -> GpuActivity:
        """These rows only (positions), with their launch pairs."""
        arrays = {f: getattr(self, f)[rows] for f in _ROW_FIELDS}
        pairs = self.launches
        kept = pairs.filter(pc.is_in(pairs["row"], pa.array(rows, pa.int64())))
        renumber = np.full(self.n + 1, -1, np.int64)
        renumber[rows] = np.arange(len(rows))
        kept = kept.set_column(
            kept.schema.get_field_index("row"), "row", pa.array(renumber[kept["row"].to_numpy()])
        )
        return replace(self, name=self.name.take(rows), launches=kept, **arrays)

    @property
    def n(self) -> int:
        return len(self.ts)


_ROW_FIELDS = ("ev_idx", "ts", "dur", "stream", "lane", "kernel_type", "idle_row", "launch_ts")


def exact_activity(source: FrameSource) -> GpuActivity:
    """tracegraph's reading: every kernel/memcpy/memset event, exact ns."""
    rows = source.rows
    label = rows["label"]
    gpu_rows = rows.filter(pc.equal(label, "Kernel"))
    ts = ints(gpu_rows["ts"], 0)
    dur = ints(gpu_rows["dur"], 0)
    stream = ints(pc.coalesce(gpu_rows["stream"], gpu_rows["tid"]))
    device = ints(gpu_rows["pid"])
    lane = np.unique(device * (1 << 32) + (stream & 0xFFFFFFFF), return_inverse=True)[1]
    name = Strings.of(gpu_rows["name"])
    calls = rows.filter(pc.equal(label, "Runtime")).select(
        ["ev_idx", "cat", "correlation", "ts", "dur"]
    )
    owner = one_call_per_correlation(
        calls.select(["ev_idx", "cat", "correlation", "ts"]).rename_columns(
            ["id", "cat", "correlation", "ts"]
        )
    )
    launch_ts, call_dur = _launch_of(gpu_rows, calls, owner)
    has = launch_ts != NO_LAUNCH
    launches = pa.table(
        {
            "call_ts": launch_ts[has],
            "call_dur": call_dur[has],
            "gpu_ts": ts[has],
            "gpu_dur": dur[has],
            "row": np.nonzero(has)[0].astype(np.int64),
        }
    )
    return GpuActivity(
        source.rank,
        False,
        1,
        ints(gpu_rows["ev_idx"]),
        ts,
        dur,
        stream,
        np.asarray(lane, np.int64).ravel(),
        name,
        _types(name),
        np.ones(len(ts), bool),
        launch_ts,
        launches,
    )


def _launch_of(
    gpu_rows: pa.Table, calls: pa.Table, owner: pa.Table
) -> tuple[np.ndarray, np.ndarray]:
    """Each GPU row's launching call: its start and duration (NO_LAUNCH, 0 where none)."""
    at = launching_calls(gpu_rows, calls, owner)
    found = at >= 0
    launch_ts = np.full(gpu_rows.num_rows, NO_LAUNCH, np.int64)
    call_dur = np.zeros(gpu_rows.num_rows, np.int64)
    launch_ts[found] = ints(calls["ts"], 0)[at[found]]
    call_dur[found] = ints(calls["dur"], 0)[at[found]]
    return launch_ts, call_dur


def launching_calls(kernels: pa.Table, calls: pa.Table, owner: pa.Table) -> np.ndarray:
    """Each kernel's launching call: its position in `calls` (the rank's runtime calls in file
    order, as the archive keeps them), by correlation through `owner`
    (`link.one_call_per_correlation` of those calls); -1 where none is known."""
    out = np.full(kernels.num_rows, -1, np.int64)
    if owner.num_rows == 0 or kernels.num_rows == 0:
        return out
    corr = ints(kernels["correlation"])
    keys = owner["correlation"].to_numpy()
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    at = np.minimum(np.searchsorted(keys, corr), len(keys) - 1)
    found = (keys[at] == corr) & (corr >= 0)
    call_ev = owner["from_id"].to_numpy()[order][at]
    call_ev_all = ints(calls["ev_idx"])  # file order: sorted
    position = np.minimum(np.searchsorted(call_ev_all, call_ev), len(call_ev_all) - 1)
    found &= call_ev_all[position] == call_ev
    out[found] = position[found]
    return out


def hta_activity(source: FrameSource) -> GpuActivity:
    """HTA 0.5.0's reading of the same rows (see the module docstring)."""
    frame = rank_frame(source, hta_times=True, hta_quirks=True)
    gpu = np.nonzero(frame.stream != -1)[0]
    ts, dur = frame.ts[gpu], frame.dur[gpu]
    name = frame.name.take(gpu)
    label = frame.index_correlation[gpu]
    position = frame.position_of(np.where(label >= 0, label, -1))
    known = (label >= 0) & (position >= 0)
    launch_ts = np.where(known, frame.ts[np.maximum(position, 0)], NO_LAUNCH)
    return GpuActivity(
        frame.rank,
        True,
        frame.unit_ns,
        frame.ev_idx[gpu],
        ts,
        dur,
        frame.stream[gpu],
        frame.stream[gpu],
        name,
        _types(name),
        frame.cat.take(gpu).isin(IDLE_CATEGORIES),
        launch_ts,
        _hta_launches(frame, gpu),
    )


def _hta_launches(frame: Frame, gpu_rows: np.ndarray) -> pa.Table:
    """HTA's launch pairs: calls (no stream) and GPU rows (a stream) of the same correlation,
    the calls being CUDA kernel launches, memcpy and memset (none on ROCm)."""
    calls_named = frame.name.isin(HTA_LAUNCH_CALLS + HTA_MEMORY_CALLS)
    wanted = np.unique(frame.correlation[calls_named])
    cpu = np.nonzero((frame.stream == -1) & np.isin(frame.correlation, wanted))[0]
    gpu = np.nonzero((frame.stream != -1) & np.isin(frame.correlation, wanted))[0]
    left = pa.table({"correlation": frame.correlation[cpu], "row": np.arange(len(cpu)),
                     "call_ts": frame.ts[cpu], "call_dur": frame.dur[cpu]})  # fmt: skip
    right = pa.table({"correlation": frame.correlation[gpu], "gpu_ts": frame.ts[gpu],
                      "gpu_dur": frame.dur[gpu],
                      "gpu_row": np.searchsorted(gpu_rows, gpu)})  # fmt: skip
    joined = left.join(right, "correlation", join_type="inner").sort_by("row")
    return joined.select(["call_ts", "call_dur", "gpu_ts", "gpu_dur", "gpu_row"]).rename_columns(
        ["call_ts", "call_dur", "gpu_ts", "gpu_dur", "row"]
    )


def _types(name: Strings) -> np.ndarray:
    table = np.array([kernel_type(v or "") for v in name.values] + [OTHER], np.int8)
    return table[name.codes]
