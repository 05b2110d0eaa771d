"""Session databases for the query tests.

- `synthetic_store`: the explorer's small synthetic database, for the headless read-side tests;
- `canned_db`: real traces from ../shared/traces and a synthetic run, several runs in one
  database with native edge sets, for checking the canned queries by value (only the synthetic
  run where the traces are absent).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tracegraph.examples.synthetic import SyntheticConfig
from tracegraph.ingest.edgesets.native.edge_set import build_native_edge_set
from tracegraph.ingest.edgesets.native.options import emulate
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore

from ..conftest import TRACES
from ..explorer import dbs
from ..synthetic_traces import synthetic_rank_files


@pytest.fixture(scope="session")
def synthetic_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GraphStore]:
    with GraphStore(dbs.synthetic_db(tmp_path_factory.mktemp("reads"))) as store:
        yield store


# The runs of `canned_db`: run name -> its trace files (one per rank), relative to TRACES.
CANNED_RUNS: dict[str, tuple[str, ...]] = {
    # 1 rank (3 of 8), 6 ProfilerSteps, NCCL kernels, no cuda_sync events (syncs get inferred)
    "control": ("hta/trace_diff/control/control.json.gz",),
    # 1 rank, cuda_sync events (Stream Sync, Context Sync, Stream Wait Event)
    "alexnet": ("hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",),
    # 2 ranks on CPU, gloo collectives, ns timestamps
    "ddp": ("cpu_ddp_2r/rank0.step5.pt.trace.json.gz", "cpu_ddp_2r/rank1.step5.pt.trace.json.gz"),
    # 2 ranks of a 128-rank job, NCCL SendRecv kernels, 2 ProfilerSteps
    "tf": ("hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz"),
    # cudaEventSynchronize / cudaEventQuery / cudaStreamWaitEvent with cuda_sync events
    "evsync": ("hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",),
    "multi": ("hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz",),
    # the 2021 format (category Operator), ProfilerStep#5 .. #10
    "resnet": ("kineto/samples/resnet50_num_workers_0/worker0.pt.trace.json.gz",),
    # synthetic (absolute paths; needs no ../shared): 3 ranks, rank 2 late, python stacks,
    # nested annotations, every cuda_sync kind
    "syn": tuple(
        str(p)
        for p in synthetic_rank_files(
            "canned",
            SyntheticConfig(
                ranks=3,
                steps=3,
                layers=2,
                python_stacks=True,
                annotate=True,
                late_rank=2,
                late_us=1_500,
                sync_kinds=True,
            ),  # fmt: skip
        )
    ),
}
SYNTHETIC_RUNS = ("syn",)
# Edge sets built on them: HTA 0.5.0's semantics (one whole-trace window per rank) ...
CANNED_HTA_050 = ("control", "alexnet", "tf", "evsync", "multi", "syn")
# ... and tracegraph's own, one window per ProfilerStep, with cross-rank paths ("native" and
# "native:cross-rank") and sync edges inferred where a rank has no cuda_sync events.
CANNED_NATIVE_ALL_STEPS = ("ddp", "tf", "control", "syn")


@dataclass(frozen=True)
class CannedDb:
    """The database, and each run's trace files (absolute, in the order given)."""

    path: Path
    runs: dict[str, tuple[Path, ...]]


@pytest.fixture(scope="session")
def canned_db(tmp_path_factory: pytest.TempPathFactory) -> CannedDb:
    """One database holding every run of CANNED_RUNS and the edge sets above (~15 s); only
    the synthetic runs where ../shared is absent."""
    runs = {
        run: tuple(TRACES / f for f in files)
        for run, files in CANNED_RUNS.items()
        if run in SYNTHETIC_RUNS or TRACES.is_dir()
    }
    missing = [str(p) for files in runs.values() for p in files if not p.is_file()]
    if missing:
        pytest.skip(f"traces missing: {', '.join(missing)}")
    db = tmp_path_factory.mktemp("canned") / "canned.kuzu"
    for run, files in runs.items():
        ingest(list(files), db, IngestOptions(run=run))
    for run in (r for r in CANNED_HTA_050 if r in runs):
        build_native_edge_set(db, run=run, options=emulate("hta-0.5.0"))
    for run in (r for r in CANNED_NATIVE_ALL_STEPS if r in runs):
        build_native_edge_set(db, run=run, all_steps=True)
    return CannedDb(db, runs)


@pytest.fixture(scope="session")
def canned_store(canned_db: CannedDb) -> Iterator[GraphStore]:
    with GraphStore(canned_db.path) as store:
        yield store
