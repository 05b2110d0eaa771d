"""tracegraph's own dependency graph of a run (HTA's semantics of a version, exactly, or its own
rules beyond HTA), built from the run's archive: `build_native_edge_set`. The modules follow the
data: sources → frame → lookups, kernels, syncs, callstack, stacks → graph → invariants →
crossrank → report → store; `edge_set` runs them."""

from .edge_set import NativeEdgeSetResult, build_native_edge_set

__all__ = ["NativeEdgeSetResult", "build_native_edge_set"]
