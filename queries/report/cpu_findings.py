"""The CPU side of the fault catalog: rules over one rank's CPU events (and its GPU busy time
where it has a GPU). Each rule's threshold is with it; costs are per step (the rank's
ProfilerSteps, or its whole trace as one step where it has none).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tracegraph.ingest.intervals import exclusive_shares, merged, subtract, union_length

from .activity import GpuActivity
from .allocations import NONE as NO_ALLOCATIONS
from .allocations import LargeAllocations
from .analyses import gpu_idle_causes
from .cpu import CpuEvents
from .findings import EVIDENCE_ROWS, HOST_WAIT_SHARE, Finding, Ids, listing
from .steps import StepWindow

INPUT_BOUND_SHARE = 0.10  # data loading with the GPU idle (CPU-only: at all), of the step time
STALL_SHARE = 0.10  # time inside steps with no op or runtime call on any thread
STALL_MIN_NS = 1_000_000  # gaps shorter than this are the loop's own overhead
COLLECTIVE_RANGES = ("gloo:", "nccl:", "c10d::", "record_param_comms")
CASTS = ("aten::to", "aten::_to_copy", "aten::type_as")
CAST_PAIRS_PER_STEP = 4  # dtype-changing casts, per step
SMALL_OP_NS = 50_000
SMALL_OPS_PER_STEP = 200  # top-level aten ops under 50 µs, per step (the catalog's "hundreds")
SMALL_OP_GPU_SHARE = 0.5  # on a GPU rank, also launch-bound: see _launch_bound
OPTIMIZER_SHARE = 0.20  # Optimizer.step ranges, of the step time
OPTIMIZER_OPS_PER_STEP = 24  # small top-level ops inside them, per step: a per-parameter loop
ALLOCATIONS = ("cudaMalloc", "cudaFree", "cudaMallocHost", "cudaFreeHost", "hipMalloc",
               "hipFree", "hipMallocHost", "hipFreeHost", "cudaMallocAsync",
               "cudaFreeAsync")  # fmt: skip
FORWARD_OPS = ("aten::linear", "aten::conv1d", "aten::conv2d", "aten::conv3d",
               "aten::convolution", "aten::layer_norm", "aten::batch_norm", "aten::group_norm",
               "aten::embedding", "aten::scaled_dot_product_attention", "aten::gelu",
               "aten::silu")  # fmt: skip
SCHEDULE_RATIO = 1.5  # the first step this much longer (or shorter) than the others' median


@dataclass(frozen=True)
class RankEvents:
    """What the CPU rules read of one rank."""

    rank: int
    cpu: CpuEvents
    gpu: GpuActivity | None  # None: HTA's reading, or no GPU
    windows: list[StepWindow]
    ids: Ids
    dtype_casts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    allocations: LargeAllocations = NO_ALLOCATIONS

    @property
    def steps(self) -> int:
        return max(len(self.windows), 1)

    def step_time(self) -> int:
        if self.windows:
            return sum(w.dur for w in self.windows)
        return int(self.cpu.end.max() - self.cpu.ts.min()) if len(self.cpu.ts) else 0

    def in_steps(self) -> tuple[np.ndarray, np.ndarray]:
        """The steps' annotation spans (the whole trace where there are none)."""
        if self.windows:
            return (np.array([w.ts for w in self.windows]),
                    np.array([w.ts + w.dur for w in self.windows]))  # fmt: skip
        return np.array([self.cpu.ts.min()]), np.array([self.cpu.end.max()])


def cpu_findings(r: RankEvents) -> list[Finding]:
    if len(r.cpu.ts) == 0 or r.step_time() <= 0:
        return []
    return [
        *_input_bound(r),
        *_stall(r),
        *_implicit_casts(r),
        *_small_op_storm(r),
        *_optimizer_dominance(r),
        *_memory_churn(r),
        *_recompute(r),
        *_schedule_distortion(r),
    ]


def _evidence(r: RankEvents, rows: np.ndarray, weight: np.ndarray) -> tuple[int, ...]:
    order = np.lexsort((r.cpu.ev_idx[rows], -weight))[:EVIDENCE_ROWS]
    return r.ids.of(r.cpu.ev_idx[rows][order])


def _op_listing(evidence: tuple[int, ...]) -> str:
    return listing("(o:Op)", evidence, "o.id AS op, o.name AS name, o.ts AS ts, o.dur AS dur")


def _data_loading(r: RankEvents) -> np.ndarray:
    return r.cpu.data_loading()


def _input_bound(r: RankEvents) -> list[Finding]:
    loading = _data_loading(r)
    if not loading.any():
        return []
    lo, hi = merged(r.cpu.ts[loading], r.cpu.end[loading])
    if r.gpu is not None and r.gpu.n:
        shares = exclusive_shares([(lo, hi), (r.gpu.ts, r.gpu.end)])
        starved = int(shares.get(1, 0))  # loading while no GPU work runs
        what = "while the GPU was idle"
    else:
        starved = int((hi - lo).sum())
        what = "(no GPU: the step waited on it)"
    total = r.step_time()
    if starved < INPUT_BOUND_SHARE * total:
        return []
    rows = np.nonzero(loading)[0]
    evidence = _evidence(r, rows, r.cpu.dur[rows])
    return [
        Finding(
            "input_bound", r.rank, "Steps wait for input data", starved // r.steps, len(rows),
            f"data loading ran {starved / 1e3:,.0f} µs {what}, {starved / total:.1%} of the "
            f"steps' time (ranges named like {r.cpu.name.at(int(rows[0]))!r})",
            evidence, _op_listing(evidence),
            "load ahead: DataLoader(num_workers > 0, pin_memory=True, prefetch_factor), move "
            "decoding/augmentation off the training process, or cache the dataset",
            work=((r.rank, tuple(r.cpu.ev_idx[rows].tolist())),),
        )
    ]  # fmt: skip


def _stall(r: RankEvents) -> list[Finding]:
    cpu = r.cpu
    # work that shows the process running: ops and runtime calls, and collectives' ranges; not
    # the ranges that only enclose phases (ProfilerStep#, forward, ...), python frames or data
    # loading (input_bound's)
    phase = cpu.cat_is("user_annotation") & ~cpu.named(COLLECTIVE_RANGES)
    loading = _data_loading(r)
    busy = ~phase & ~cpu.cat_is("python_function") & ~loading
    step_lo, step_hi = r.in_steps()
    others = [cpu.intervals(busy), cpu.intervals(loading)]
    if r.gpu is not None and r.gpu.n:  # the GPU working through a gap is no stall of the step
        others.append((r.gpu.ts, r.gpu.end))
    g_lo, g_hi = subtract((step_lo, step_hi), others)
    keep = g_hi - g_lo >= STALL_MIN_NS
    g_lo, g_hi = g_lo[keep], g_hi[keep]
    stalled = int((g_hi - g_lo).sum())
    no_gpu = " and no GPU work" if r.gpu is not None and r.gpu.n else ""
    total = r.step_time()
    if stalled < STALL_SHARE * total:
        return []
    # python frames inside the gaps say what ran (gc.collect: a GC pass)
    frames = np.nonzero(cpu.cat_is("python_function"))[0]
    k = np.searchsorted(g_lo, cpu.ts[frames], side="right") - 1  # the gaps are sorted, disjoint
    within = frames[(k >= 0) & (cpu.end[frames] <= g_hi[np.maximum(k, 0)])]
    rows = cpu.top_level(np.isin(np.arange(len(cpu.ts)), within))
    rows = np.nonzero(rows)[0]
    gc = [i for i in rows.tolist() if "collect" in cpu.name.at(i)]
    if len(rows):
        heaviest = rows[np.argsort(-cpu.dur[rows], kind="stable")[:2]]
        cause = ", ".join(f"{cpu.name.at(i)} {cpu.dur[i] / 1e3:,.0f} µs" for i in heaviest)
        cause = ("a GC pass (gc.collect) and Python: " if gc else "Python: ") + cause
    else:
        cause = (
            "nothing the profiler recorded (GC, the GIL or host work; with_stack=True "
            "shows what; evidence: what ran last before the longest gaps)"
        )
    if len(rows):
        evidence = _evidence(r, rows, cpu.dur[rows])
    else:  # what ran last before the longest gaps
        before, gap_after = _last_before(cpu.end, np.nonzero(busy)[0], g_lo, g_hi - g_lo)
        evidence = _evidence(r, before, gap_after)
    return [
        Finding(
            "gc_stall", r.rank, "The process stalls inside steps (GC/GIL)", stalled // r.steps,
            len(g_lo),
            f"{len(g_lo):,} {'gap' if len(g_lo) == 1 else 'gaps'} of at least "
            f"{STALL_MIN_NS / 1e6:.0f} ms with no op, runtime "
            f"call or data loading on any thread{no_gpu}: "
            f"{stalled / 1e3:,.0f} µs, {stalled / total:.1%} of the steps' time; in them ran "
            f"{cause}",
            evidence,
            listing("(o:Op:Runtime)", evidence, "o.id AS event, o.name AS name, o.ts AS ts, "
                    "o.dur AS dur"),
            "find what holds the interpreter: gc.freeze() after setup or gc.disable() with "
            "periodic collection between steps, fewer cyclic objects per step, no Python-heavy "
            "work (logging, metrics) inside the step",
            times=((r.rank, tuple(zip(g_lo.tolist(), g_hi.tolist(), strict=True))),),
            work_kind="times",
        )
    ]  # fmt: skip


def _last_before(
    end: np.ndarray, rows: np.ndarray, gap_lo: np.ndarray, gap_ns: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per gap, the row of `rows` that ended last at or before it began (gaps with none are
    left out), and that gap's length: (rows, gap ns), each row once."""
    by_end = rows[np.argsort(end[rows], kind="stable")]
    k = np.searchsorted(end[by_end], gap_lo, side="right") - 1
    found = k >= 0
    last, ns = by_end[k[found]], gap_ns[found]
    order = np.lexsort((-ns, last))  # one row before several gaps: named once, by its longest
    last, ns = last[order], ns[order]
    first = np.r_[True, last[1:] != last[:-1]][: len(last)]
    return last[first], ns[first]


def _top_aten(r: RankEvents) -> np.ndarray:
    aten = ~r.cpu.is_runtime & r.cpu.named(("aten::",))
    return r.cpu.top_level(aten)


def _implicit_casts(r: RankEvents) -> list[Finding]:
    """Casts: the outermost `aten::to`/`_to_copy`/`type_as` around each `_to_copy` whose
    recorded arguments show a dtype change (a device copy is none); their own CPU time."""
    cpu = r.cpu
    changing = np.isin(cpu.ev_idx, r.dtype_casts)
    if not changing.any():
        return []
    cast_ops = ~cpu.is_runtime & cpu.name_in(CASTS)
    around = np.zeros(len(cpu.ts), bool)
    for t in np.unique(cpu.thread[changing]).tolist():
        mine = np.nonzero(changing & (cpu.thread == t))[0]
        starts = np.sort(cpu.ts[mine])
        ops = np.nonzero(cast_ops & (cpu.thread == t))[0]
        first = np.searchsorted(starts, cpu.ts[ops], side="left")
        inside = (first < len(starts)) & (
            starts[np.minimum(first, len(starts) - 1)] <= cpu.end[ops]
        )
        around[ops[inside]] = True
    rows = np.nonzero(cpu.top_level(around | changing))[0]
    if len(rows) < CAST_PAIRS_PER_STEP * r.steps:
        return []
    spent = int(cpu.dur[rows].sum())
    evidence = _evidence(r, rows, cpu.dur[rows])
    return [
        Finding(
            "implicit_casts", r.rank, "Tensors cast to another dtype inside the steps",
            spent // r.steps, len(rows),
            f"{len(rows):,} casts ({len(rows) / r.steps:.0f} per step) whose recorded "
            f"arguments change the dtype took {spent / 1e3:,.0f} µs of CPU time",
            evidence, _op_listing(evidence),
            "keep activations and weights in one dtype (autocast for mixed precision, the "
            "model and inputs cast once), not per layer",
            work=((r.rank, tuple(cpu.ev_idx[rows].tolist())),),
        )
    ]  # fmt: skip


def _small_op_storm(r: RankEvents) -> list[Finding]:
    cpu = r.cpu
    small = _top_aten(r) & (cpu.dur < SMALL_OP_NS)
    rows = np.nonzero(small)[0]
    if len(rows) < SMALL_OPS_PER_STEP * r.steps:
        return []
    spent = int(cpu.dur[rows].sum())
    if r.gpu is not None and r.gpu.n and not _launch_bound(r.gpu, spent):
        return []
    evidence = _evidence(r, rows, cpu.dur[rows])
    return [
        Finding(
            "small_op_storm", r.rank, "Many tiny eager ops", spent // r.steps, len(rows),
            f"{len(rows) / r.steps:,.0f} top-level ops under {SMALL_OP_NS / 1e3:.0f} µs per step, "
            f"{spent / 1e3:,.0f} µs of CPU time in all",
            evidence, _op_listing(evidence),
            "fuse them: torch.compile, foreach/fused kernels, fewer Python-level elementwise ops",
            work=((r.rank, tuple(cpu.ev_idx[rows].tolist())),),
        )
    ]  # fmt: skip


def _launch_bound(gpu: GpuActivity, spent: int) -> bool:
    """Whether a GPU rank waits on its launches: the tiny ops' CPU time is at least half the
    GPU's busy time, or the GPU idles for late launches at least HOST_WAIT_SHARE of its span."""
    busy = union_length(gpu.ts, gpu.end)
    span = int(gpu.end.max() - gpu.ts.min())
    return spent >= SMALL_OP_GPU_SHARE * busy or (
        gpu_idle_causes(gpu)["host_wait"] >= HOST_WAIT_SHARE * span
    )


def _optimizer_dominance(r: RankEvents) -> list[Finding]:
    """A per-parameter optimizer, told by its shape whatever its share of the step: inside
    Optimizer.step, many small top-level ops of a few kinds (`mul_`, `add_`, `addcdiv_`: one
    of each per parameter), as `foreach=False` runs them; or an optimizer step that takes
    OPTIMIZER_SHARE of the step time whatever it runs."""
    cpu = r.cpu
    step = ~cpu.is_runtime & cpu.named(("Optimizer.step#",))
    if not step.any():
        return []
    spent = union_length(cpu.ts[step], cpu.end[step])
    inner = cpu.inside(~cpu.is_runtime & cpu.named(("aten::",)), step)
    ops = np.nonzero(cpu.top_level(inner))[0]
    count, kinds = len(ops), len(set(cpu.name.codes[ops].tolist()))
    small = count and float(cpu.dur[ops].mean()) < SMALL_OP_NS
    per_parameter = count >= OPTIMIZER_OPS_PER_STEP * r.steps and small and kinds <= 8
    total = r.step_time()
    if not (per_parameter or spent >= OPTIMIZER_SHARE * total):
        return []
    rows = np.nonzero(step)[0]
    evidence = _evidence(r, rows, cpu.dur[rows])
    names = ", ".join(sorted({cpu.name.at(int(i)) for i in ops[:200]}))
    shape = (
        f"{count / r.steps:,.0f} small ops per step ({names}): one per parameter, as a "
        "for-loop (foreach=False) optimizer runs"
        if per_parameter
        else f"{count / r.steps:,.0f} ops per step"
    )
    return [
        Finding(
            "optimizer_dominance", r.rank,
            "The optimizer runs one small op per parameter" if per_parameter
            else "The optimizer step dominates",
            int(spent) // r.steps, count,
            f"Optimizer.step took {spent / 1e3:,.0f} µs ({spent / total:.1%} of the steps' "
            f"time) running {shape}",
            evidence, _op_listing(evidence),
            "use the foreach or fused optimizer (foreach=True / fused=True), or a fused "
            "optimizer from apex/torchao",
            work=((r.rank, tuple(cpu.ev_idx[rows].tolist())),),
        )
    ]  # fmt: skip


def _memory_churn(r: RankEvents) -> list[Finding]:
    return _device_churn(r) or _host_churn(r)


def _device_churn(r: RankEvents) -> list[Finding]:
    cpu = r.cpu
    calls = cpu.is_runtime & cpu.name_in(ALLOCATIONS)
    lo, hi = r.in_steps()
    at = np.searchsorted(lo, cpu.ts, side="right") - 1
    in_step = (at >= 0) & (cpu.ts < hi[np.maximum(at, 0)])
    rows = np.nonzero(calls & in_step)[0]
    if len(rows) < r.steps:  # at least one per step
        return []
    spent = int(cpu.dur[rows].sum())
    evidence = _evidence(r, rows, cpu.dur[rows])
    return [
        Finding(
            "memory_churn", r.rank, "Device memory allocated and freed inside steps",
            spent // r.steps, len(rows),
            f"{len(rows):,} cudaMalloc/cudaFree-like calls in the steps, {spent / 1e3:,.0f} µs",
            evidence,
            listing("(r:Runtime)", evidence, "r.id AS runtime, r.name AS name, r.dur AS dur"),
            "let the caching allocator keep memory: stable shapes, no torch.cuda.empty_cache() "
            "in the loop, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            work=((r.rank, tuple(cpu.ev_idx[rows].tolist())),),
        )
    ]  # fmt: skip


def _host_churn(r: RankEvents) -> list[Finding]:
    """Host buffers of megabytes made anew every step (allocations.py): the allocations and the
    first writes to them, which fault their pages in. Only on a rank without GPU work: a
    factory's recorded arguments do not say its device, and on a GPU rank most are the
    caching allocator's (`_device_churn` reads its cudaMalloc calls instead)."""
    if r.gpu is not None and r.gpu.n:
        return []
    cpu, found = r.cpu, r.allocations
    lo, hi = r.in_steps()
    rows = np.nonzero(np.isin(cpu.ev_idx, np.concatenate([found.allocations, found.first_touch])))[
        0
    ]
    at = np.searchsorted(lo, cpu.ts[rows], side="right") - 1
    rows = rows[(at >= 0) & (cpu.ts[rows] < hi[np.maximum(at, 0)])]
    made = np.isin(cpu.ev_idx[rows], found.allocations)
    if int(made.sum()) < r.steps:  # at least one per step
        return []
    spent = int(cpu.dur[rows].sum())
    sizes = found.bytes[np.isin(found.allocations, cpu.ev_idx[rows[made]])]
    evidence = _evidence(r, rows, cpu.dur[rows])
    return [
        Finding(
            "memory_churn", r.rank, "Large host buffers made anew inside steps",
            spent // r.steps, len(rows),
            f"{int(made.sum()) / r.steps:,.0f} allocations per step of "
            f"{sizes.min() / 2**20:,.1f}–{sizes.max() / 2**20:,.1f} MiB "
            f"({sizes.sum() / r.steps / 2**20:,.0f} MiB per step); they and the first writes to "
            f"them (page faults on fresh memory) took {spent / 1e3:,.0f} µs",
            evidence, _op_listing(evidence),
            "allocate such buffers once and reuse them (or keep a pool), and make them outside "
            "the step",
            work=((r.rank, tuple(cpu.ev_idx[rows].tolist())),),
        )
    ]  # fmt: skip


def _recompute(r: RankEvents) -> list[Finding]:
    """Activation checkpointing: forward ops (a linear, a conv, a norm, an attention) run again
    inside an autograd node of the backward pass, where its saved activations are unpacked."""
    cpu = r.cpu
    nodes = ~cpu.is_runtime & cpu.named(("autograd::engine::evaluate_function:",))
    forward = ~cpu.is_runtime & cpu.name_in(FORWARD_OPS)
    if not (nodes.any() and forward.any()):
        return []
    rows = np.nonzero(cpu.top_level(cpu.inside(forward, nodes)))[0]
    if len(rows) < r.steps:  # at least one per step
        return []
    spent = int(cpu.dur[rows].sum())
    names = ", ".join(sorted({cpu.name.at(int(i)) for i in rows[:200]}))
    evidence = _evidence(r, rows, cpu.dur[rows])
    return [
        Finding(
            "activation_recompute", r.rank, "Activation checkpointing runs forward ops again "
            "in backward", spent // r.steps, len(rows),
            f"{len(rows) / r.steps:,.0f} forward ops per step ({names}) ran inside the "
            f"backward's autograd nodes, {spent / 1e3:,.0f} µs in all",
            evidence, _op_listing(evidence),
            "checkpointing trades this compute for memory: checkpoint fewer layers (selective "
            "activation checkpointing) where memory allows, or keep it and know its price",
            work=((r.rank, tuple(cpu.ev_idx[rows].tolist())),),
        )
    ]  # fmt: skip


def _schedule_distortion(r: RankEvents) -> list[Finding]:
    if len(r.windows) < 3:
        return []
    durs = np.array([w.dur for w in r.windows], np.int64)
    rest = float(np.median(durs[1:]))
    first = int(durs[0])
    if rest <= 0 or 1 / SCHEDULE_RATIO < first / rest < SCHEDULE_RATIO:
        return []
    w = r.windows[0]
    evidence = r.ids.of(np.array([_step_event(r, w)]))
    return [
        Finding(
            "schedule_distortion", r.rank, "The first profiled step is unlike the others",
            abs(first - int(rest)) // r.steps, 1,
            f"ProfilerStep#{w.step} took {first / 1e3:,.0f} µs, the others' median "
            f"{rest / 1e3:,.0f} µs: averages over all steps mislead",
            evidence, _op_listing(evidence),
            "profile with a warm-up (schedule(wait=1, warmup=1+, active=N)) and leave the "
            "first active step out of comparisons",
        )
    ]  # fmt: skip


def _step_event(r: RankEvents, w: StepWindow) -> int:
    hit = np.nonzero((r.cpu.ts == w.ts) & r.cpu.name_in((w.name,)))[0]
    return int(r.cpu.ev_idx[hit[0]]) if len(hit) else -1
