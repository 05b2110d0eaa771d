"""The native builder's options: one frozen object, recorded on the EdgeSet node.

Heuristics that differ between HTA releases are explicit fields; `emulate(version)` sets every
field as that release behaves, so `native:<version>` reproduces `<version>`'s edge set exactly.

Fields (0.5.0 / 0.6.1 / plain native):

- `kernel_gap_cutoff_ns`: no kernel→kernel edge across an idle gap this long on a stream
  (None / 1.5 ms / None). HTA 0.6.1's `KERNEL_KERNEL_DELAY_THRESHOLD_US`.
- `merge_backward_thread`: the one thread with "autograd" ops is renumbered as the one thread with
  "forward" ops, so the backward pass joins the forward call stack (off / on / off).
- `runtime_lock`: cudaHostAlloc, cudaLaunchKernel and cudaMemcpyAsync serialize on the CUDA runtime
  lock across threads; each span keeps its full weight, so a blocking cudaMemcpyAsync is no longer
  zero-weighted (off / on / off). HTA 0.6.1's `_construct_graph_from_cuda_runtime_events`.
- `hta_times`: HTA's µs times, ns-resolution timestamps rounded inward (on / on / off: exact ns).
- `hta_quirks`: the release whose frame rules apply: last ProfilerStep dropped, its sort ties,
  its launch-call list, streams from `args.stream` only, its node categories (0.5.0 / 0.6.1 /
  None: tracegraph's rules).
- `infer_syncs`: sync edges inferred from runtime sync calls where a trace has no cuda_sync events
  (off / off / on).
- `cross_rank`: the job's path per step through the collectives, where a collective ends on every
  rank no earlier than its last participant arrives (off / off / on).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

from ...errors import TracegraphError

KERNEL_GAP_CUTOFF_061_NS = 1_500_000
VERSIONS = ("hta-0.5.0", "traceinsight-0.6.1")
_ALIASES = {
    "hta-0.5.0": "hta-0.5.0",
    "holistictraceanalysis==0.5.0": "hta-0.5.0",
    "0.5.0": "hta-0.5.0",
    "traceinsight-0.6.1": "traceinsight-0.6.1",
    "traceinsight==0.6.1": "traceinsight-0.6.1",
    "0.6.1": "traceinsight-0.6.1",
}


class OptionsError(TracegraphError, ValueError):
    """Options that cannot be used together, or an unknown version."""


@dataclass(frozen=True)
class NativeOptions:
    """How the native edge set is built (see the module docstring for each field).

    `hta_quirks` names the HTA release whose frame quirks apply (None: tracegraph's own rules).
    """

    kernel_gap_cutoff_ns: int | None = None
    merge_backward_thread: bool = False
    runtime_lock: bool = False
    hta_times: bool = False
    hta_quirks: str | None = None
    infer_syncs: bool = True
    cross_rank: bool = True

    def __post_init__(self) -> None:
        if self.kernel_gap_cutoff_ns is not None and self.kernel_gap_cutoff_ns <= 0:
            raise OptionsError("kernel gap cutoff must be positive")
        if self.hta_quirks is not None and self.hta_quirks not in VERSIONS:
            raise OptionsError(f"unknown HTA version {self.hta_quirks!r} (known: {VERSIONS})")

    @property
    def emulating(self) -> str | None:
        """The HTA release these options reproduce exactly, if any."""
        if self.hta_quirks is not None and self == emulate(self.hta_quirks):
            return self.hta_quirks
        return None

    @property
    def edge_set_name(self) -> str:
        """`native:<version>` when emulating a release exactly, else `native`."""
        return f"native:{self.emulating}" if self.emulating else "native"

    def with_changes(self, **changes: object) -> NativeOptions:
        return replace(self, **changes)  # type: ignore[arg-type]

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "emulating": self.emulating}, sort_keys=True)


def version_name(version: str) -> str:
    """`hta-0.5.0` / `traceinsight-0.6.1` from any accepted spelling."""
    key = version.strip().lower()
    if key not in _ALIASES:
        raise OptionsError(f"cannot emulate {version!r}; known: {', '.join(VERSIONS)}")
    return _ALIASES[key]


def emulate(version: str) -> NativeOptions:
    """The options under which the native builder reproduces that HTA release exactly."""
    name = version_name(version)
    newer = name == "traceinsight-0.6.1"
    return NativeOptions(
        kernel_gap_cutoff_ns=KERNEL_GAP_CUTOFF_061_NS if newer else None,
        merge_backward_thread=newer,
        runtime_lock=newer,
        hta_times=True,
        hta_quirks=name,
        infer_syncs=False,
        cross_rank=False,
    )
