"""HTA's own critical-path graph of a run, per HTA release, as an edge set: HTA runs in its own
cached environment (`env`), in a worker process (`worker`) fed per-rank inputs (`inputs`),
and its edges come back as Parquet (`load`); `edge_set` runs them."""

from .edge_set import EdgeSetResult, build_hta_edge_set

__all__ = ["EdgeSetResult", "build_hta_edge_set"]
