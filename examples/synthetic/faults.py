"""Faults injected into a rank's steps: the report catalog's (`INJECTABLE_FAULTS`: a GC stall,
implicit casts, a small-op storm, a per-parameter optimizer, memory churn, a slow first step)
and the job's own pathologies (a data-loader stall, a late rank, a GC pause, a GPU idle gap).
The straggler's slower CPU, the slow GPU's GEMMs (`RankEvents`) and unmatched collectives
(`training`, `simulate`) are woven into the normal work."""

from __future__ import annotations

from .config import COMPUTE_STREAM
from .events import CPU_OP, RankEvents
from .model import GC_FRAME, K_CAST, K_TINY, SLEEP_FRAME, quote

# a float → bfloat16 cast's arguments as record_shapes=True records them (c10 ScalarType 15)
CAST_TO_ARGS = (
    ', "Concrete Inputs": ["", "15", "False", "False", ""], '
    '"Input type": ["float", "Scalar", "Scalar", "Scalar", ""], '
    '"Input Dims": [[64, 256], [], [], [], []]'
)
CAST_TO_COPY_ARGS = (
    ', "Concrete Inputs": ["", "15", "", "", "", "False", ""], '
    '"Input type": ["float", "Scalar", "", "", "", "Scalar", ""], '
    '"Input Dims": [[64, 256], [], [], [], [], [], []]'
)
FAULT_PAUSE_NS = 8_000_000  # a GC pause; a slow first step's extra host work
STORM_OPS = 250
OPTIMIZER_PARAM_OPS = 300
CBID_MALLOC, CBID_FREE = 20, 16


class FaultInjection(RankEvents):
    """A rank that can inject faults into its steps."""

    def warm_up_pause(self) -> None:
        """schedule_distortion: a warm-up step's host work before anything is launched."""
        self.t += FAULT_PAUSE_NS

    def dataloader_delay(self, i: int) -> None:
        """Inside the data loader's range: the stall of step `i` if this rank's, and the late
        rank's `time.sleep`."""
        if self.cfg.stall_rank(i) == self.rank:
            self.t += self.cfg.stall_us * 1000
        if self.cfg.late_rank == self.rank and self.cfg.late_us:
            sleep_ts = self.t
            self.t += self.cfg.late_us * 1000
            self.python_event(SLEEP_FRAME, sleep_ts, self.t)

    def idle_gap(self) -> None:
        """A GPU idle gap: host-side work while the GPU drains and idles."""
        self.t = max(self.t, self.free[COMPUTE_STREAM]) + self.cfg.slow_gap_us * 1000

    def cast(self) -> None:
        """x.to(torch.bfloat16) around a matmul: aten::to > aten::_to_copy > a copy kernel,
        with the arguments record_shapes=True records (a float source, target dtype 15)."""
        self.gap()
        self.open_op(CPU_OP, quote("aten::to"), CAST_TO_ARGS)
        self.gap()
        self.leaf(quote("aten::_to_copy"), K_CAST, CAST_TO_COPY_ARGS, scaled=False)
        self.close_op()

    def memory_churn(self) -> None:
        """A cudaMalloc and a cudaFree inside the step (the caching allocator gave memory back)."""
        self.gap()
        self.runtime("cudaMalloc", CBID_MALLOC, self.cpu(40_000))
        self.gap()
        self.runtime("cudaFree", CBID_FREE, self.cpu(30_000))

    def gc_pause(self, pause_ns: int = FAULT_PAUSE_NS) -> None:
        """gc.collect() in the loop: the interpreter runs no op on any thread meanwhile."""
        self.gap()
        ts = self.t
        self.t += pause_ns
        if self.cfg.python_stacks:
            self.python_event(GC_FRAME, ts, self.t)

    def small_op_storm(self) -> None:
        """small_op_storm: e.g. a Python loop of tiny elementwise updates, launched one by one."""
        for _ in range(STORM_OPS):
            self.gap()
            self.leaf(quote("aten::add"), K_TINY, scaled=False)

    def per_parameter_updates(self) -> tuple[int, int]:
        """optimizer_dominance (foreach=False): a few tiny ops per parameter instead of the fused
        kernel; returns (first kernel's start, last kernel's end)."""
        first = last = 0
        for j in range(OPTIMIZER_PARAM_OPS):
            self.gap()
            name = ("aten::mul_", "aten::add_", "aten::addcdiv_")[j % 3]
            start, last = self.leaf(quote(name), K_TINY, scaled=False)
            first = first or start
        return first, last
