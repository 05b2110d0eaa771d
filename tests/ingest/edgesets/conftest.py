"""Session fixtures for HTA edge sets: both HTA environments, one database, HTA's own answers.

The environments are cached in the user's tracegraph cache (what the CLI uses), or in
$TRACEGRAPH_TEST_HTA_CACHE, so only the first session pays for building them (~1 min each).
Without PyPI the tests skip, saying so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tracegraph.ingest.edgesets.errors import EdgeSetError, HtaEnvError
from tracegraph.ingest.edgesets.hta.edge_set import EdgeSetResult, build_hta_edge_set
from tracegraph.ingest.edgesets.hta.env import HtaEnv, ensure_env
from tracegraph.ingest.parse_options import ParseOptions
from tracegraph.ingest.pipeline import IngestOptions, ingest

from ..merge import UNLABELLED_PID, write_merged

TRACES = (Path(__file__).resolve().parents[3] / ".." / "shared" / "traces").resolve()
ORACLE = Path(__file__).with_name("hta_oracle.py")
SPECS = {"hta-0.5.0": "HolisticTraceAnalysis==0.5.0", "traceinsight-0.6.1": "traceinsight==0.6.1"}
ALEXNET = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"


@dataclass(frozen=True)
class Case:
    """One run: where its traces are, and the window HTA analyzes."""

    run: str
    folder: str
    annotation: str
    instance: int | None


CASES = (
    Case("alexnet", "hta/critical_path/alexnet", ALEXNET, 1),
    Case("event_sync", "hta/critical_path/cuda_event_sync", "ProfilerStep", 0),
    Case("multi_stream", "hta/critical_path/cuda_event_sync_multi_stream", "", None),
    Case("trace_filter", "hta/trace_filter", "", None),
    Case("cpu_only", "hta/cpu_only", "", None),
)
MERGED = Case("trace_filter_merged", "hta/trace_filter", "", None)

needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason=f"real traces not at {TRACES}")


def cache_root() -> Path:
    if os.environ.get("TRACEGRAPH_TEST_HTA_CACHE"):
        return Path(os.environ["TRACEGRAPH_TEST_HTA_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tracegraph" / "hta"


@pytest.fixture(scope="session")
def hta_envs() -> dict[str, HtaEnv]:
    """Both environments, built once (the time each took is printed with -s)."""
    envs = {}
    for name, spec in SPECS.items():
        began = time.perf_counter()
        try:
            envs[name] = ensure_env(spec, cache_root())
        except HtaEnvError as exc:
            if "installing" in str(exc):
                pytest.skip(f"HTA environment not installable here (PyPI unreachable?): {exc}")
            raise
        print(f"\nHTA env {name}: {time.perf_counter() - began:.1f} s")
    return envs


@dataclass(frozen=True)
class EdgeDb:
    db: Path
    results: dict[tuple[str, str], EdgeSetResult | EdgeSetError]  # (run, edge set) → its build
    oracle: dict[str, dict[str, dict]]  # edge set → folder → rank → HTA's answer


@pytest.fixture(scope="session")
def edge_db(hta_envs: dict[str, HtaEnv], tmp_path_factory: pytest.TempPathFactory) -> EdgeDb:
    """Every case ingested as a run, both edge sets built on each, and HTA's own answers.

    Each case is ingested from a copy of its traces, removed before the edge sets are built:
    HTA is given the bytes the run's archive kept."""
    if not TRACES.is_dir():
        pytest.skip(f"real traces not at {TRACES}")
    tmp = tmp_path_factory.mktemp("edgesets")
    db = tmp / "edges.kuzu"
    for case in CASES:
        copy = tmp / "ingested" / case.run
        shutil.copytree(TRACES / case.folder, copy)
        ingest([copy], db, IngestOptions(run=case.run))
    merged = write_merged(
        sorted((TRACES / MERGED.folder).glob("*.json.gz")), tmp / "merged.json", [UNLABELLED_PID]
    )
    options = IngestOptions(run=MERGED.run, parse=ParseOptions(rank_of_pid={UNLABELLED_PID: 1}))
    ingest([merged], db, options)
    shutil.rmtree(tmp / "ingested")
    merged.unlink()
    oracles = {name: _start_oracle(env, tmp / f"oracle-{name}") for name, env in hta_envs.items()}
    results = {}
    for name, spec in SPECS.items():
        for case in (*CASES, MERGED):
            try:
                results[(case.run, name)] = build_hta_edge_set(
                    db,
                    spec,
                    run=case.run,
                    annotation=case.annotation,
                    instance=case.instance,
                    cache_root=cache_root(),
                )
            except EdgeSetError as refused:  # the CPU-only case: refused before HTA runs
                results[(case.run, name)] = refused
    return EdgeDb(db, results, {name: _answers(*started) for name, started in oracles.items()})


def _start_oracle(env: HtaEnv, work: Path) -> tuple[subprocess.Popen, Path]:
    """HTA's answers for every case, from one process of that environment (runs meanwhile)."""
    work.mkdir()
    jobs = [
        {
            "key": c.folder,
            "trace_dir": str(TRACES / c.folder),
            "annotation": c.annotation,
            "instance_id": c.instance,
        }
        for c in CASES
    ]
    (work / "jobs.json").write_text(json.dumps(jobs))
    command = [str(env.python), "-I", str(ORACLE), str(work / "jobs.json"), str(work / "out.json")]
    log = (work / "oracle.log").open("w")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT), work / "out.json"


def _answers(process: subprocess.Popen, out: Path) -> dict[str, dict]:
    assert process.wait() == 0, (out.parent / "oracle.log").read_text()[-2000:]
    return json.loads(out.read_text())
