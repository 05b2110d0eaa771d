"""Build an HTA edge set: HTA's critical-path graph of every rank of a run, loaded as `DEP` edges.

HTA runs in its own cached environment (`env.py`), in a subprocess running `worker.py`;
edges come back as Parquet and are keyed to our nodes by (run, rank, ev_idx). A rank HTA fails
on is recorded on the `EdgeSet` node with HTA's message; the command still succeeds.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..errors import EdgeSetError
from ..records import RankOutcome, RunSource, edge_set_row, refuse_empty, write_edge_sets
from . import worker as hta_worker
from .env import HtaEnv, Progress, ensure_env, parse_spec
from .inputs import RankInput, rank_inputs, read_run, require_gpu_kernels
from .load import RankEdges, rank_edges

WORKER = Path(hta_worker.__file__).resolve()


@dataclass(frozen=True)
class EdgeSetResult:
    """One built edge set: its name (e.g. `hta-0.5.0`), run, window and per-rank outcome."""

    name: str
    run: str
    spec: str
    version: str
    annotation: str
    instance: int | None
    ranks: tuple[RankOutcome, ...]
    edges_loaded: int
    worker_seconds: float


def build_hta_edge_set(
    db: Path,
    spec: str,
    *,
    run: str | None,
    annotation: str,
    instance: int | None,
    cache_root: Path,
    progress: Progress | None = None,
    allow_empty: bool = False,
) -> EdgeSetResult:
    """Run HTA `spec` on every rank of `run` and (re)place its edge set.

    `annotation` "" analyzes the whole trace; `instance` None is HTA's default (the first).
    """
    report = progress or (lambda stage, done, total: None)
    parsed = parse_spec(spec)
    nodes = read_run(Path(db), run)
    if not nodes.files:
        raise EdgeSetError(f"{db}: run '{nodes.run}' has no ranks")
    require_gpu_kernels(Path(db), nodes.run)
    env = ensure_env(parsed, Path(cache_root), report)
    _remove_stale_work_dirs()
    with tempfile.TemporaryDirectory(prefix=f"{WORK_PREFIX}{os.getpid()}-") as tmp:
        work = Path(tmp)
        report("preparing rank files for HTA", 0, 1)
        inputs = rank_inputs(nodes, work)
        report("preparing rank files for HTA", 1, 1)
        began = time.perf_counter()
        statuses = _run_worker(env, inputs, annotation, instance, work / "out", report)
        worker_seconds = time.perf_counter() - began
        report(f"loading {parsed.name} edges", 0, 1)
        per_rank = {
            i.rank: rank_edges(work / "out" / f"rank-{i.rank}.parquet", i, nodes, parsed.name)
            for i in inputs
            if statuses[i.rank].get("status") == "ok"
        }
    ranks = tuple(
        _outcome(i, statuses[i.rank], per_rank.get(i.rank), annotation, instance) for i in inputs
    )
    row = edge_set_row(
        nodes.run,
        parsed.name,
        "hta",
        parsed.version,
        _options(env, annotation, instance),
        _window(annotation, instance, ranks),
        {str(r.rank): r.to_json() for r in ranks},
    )
    tables = [e.table for e in per_rank.values()]
    edges = pa.concat_tables(tables) if tables else _empty_edges()
    counts = [(r.rank, sum(r.edges_by_type.values()), r.message) for r in ranks]
    refuse_empty(db, parsed.name, counts, allow_empty)
    source = RunSource(nodes.run, nodes.run_idx, nodes.files, nodes.event_counts, nodes.ingested_at)
    loaded = write_edge_sets(Path(db), source, [(row, edges)])
    report(f"loading {parsed.name} edges", 1, 1)
    return EdgeSetResult(
        parsed.name,
        nodes.run,
        parsed.requirement,
        parsed.version,
        annotation,
        instance,
        ranks,
        loaded,
        worker_seconds,
    )


def _run_worker(
    env: HtaEnv,
    inputs: list[RankInput],
    annotation: str,
    instance: int | None,
    out_dir: Path,
    report: Progress,
) -> dict[int, dict[str, Any]]:
    """Run the worker in the HTA env; the status dict of every rank (a crash fails the build)."""
    out_dir.mkdir()
    request = {
        "output_dir": str(out_dir),
        "distribution": env.spec.distribution,
        "ranks": [
            {"rank": i.rank, "file": str(i.file), "annotation": annotation, "instance_id": instance}
            for i in inputs
        ],
    }
    request_file = out_dir.parent / "request.json"
    request_file.write_text(json.dumps(request))
    stage = f"running {env.spec.name} critical-path analysis"
    report(stage, 0, len(inputs))
    tail: deque[str] = deque(maxlen=5)
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    command = [str(env.python), "-I", str(WORKER), str(request_file)]
    with subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=clean,
        preexec_fn=_die_with_parent,
    ) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith(hta_worker.PROGRESS_PREFIX):
                done, total = line.split()[1:3]
                report(stage, int(done), int(total))
            elif line.strip():
                tail.append(line.strip())
        code = proc.wait()
    if code != 0:
        why = tail[-1] if tail else "no output"
        raise EdgeSetError(f"HTA worker ({env.spec.name}) exited with code {code}: {why}"[:500])
    statuses = {}
    for item in inputs:
        path = out_dir / f"rank-{item.rank}.json"
        if not path.exists():
            raise EdgeSetError(f"HTA worker ({env.spec.name}) wrote no status for rank {item.rank}")
        statuses[item.rank] = json.loads(path.read_text())
    return statuses


WORK_PREFIX = "tracegraph-hta-"


def _die_with_parent() -> None:
    """In the worker, before it runs: Linux kills it when the tracegraph process dies, so a
    killed `edges --hta` leaves no worker behind (elsewhere this does nothing)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


PR_SET_PDEATHSIG = 1


def _remove_stale_work_dirs() -> None:
    """Work folders of builds whose process is gone (a killed `edges --hta`)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{WORK_PREFIX}*-*"):
        pid = folder.name[len(WORK_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _outcome(
    item: RankInput,
    status: dict[str, Any],
    edges: RankEdges | None,
    annotation: str,
    instance: int | None,
) -> RankOutcome:
    ok = status.get("status") == "ok"
    length = status.get("path_length_ns")
    window: dict[str, object] = {
        "annotation": annotation,
        "instance": instance,
        "step": None,
        "status": "ok" if ok else "failed",
        "message": status.get("message", ""),
        **(status.get("window") or {}),
    }
    if ok:
        window["path_length_ns"] = length
    details: dict[str, object] = {
        "where": status.get("where", ""),
        "source": item.source,
        "split_from_merged_file": item.split,
        "file_rank": status.get("file_rank"),
        "hta_version": status.get("hta_version"),
    }
    if edges is not None:
        details["skipped_on_critical_path"] = edges.skipped_on_path
        details["skipped_ev_idx_sample"] = edges.skipped_ev_idx
        details["clamped_negative_weights"] = status.get("clamped_negative_weights", 0)
    return RankOutcome(
        item.rank,
        "ok" if ok else "failed",
        status.get("message", ""),
        length if ok else None,
        (window,),
        edges.by_type if edges else {},
        edges.on_path_by_type if edges else {},
        edges.skipped if edges else 0,
        status.get("seconds", {}),
        details=details,
    )


def _options(env: HtaEnv, annotation: str, instance: int | None) -> dict[str, object]:
    return {
        "spec": env.spec.requirement,
        "distribution": env.spec.distribution,
        "annotation": annotation,
        "instance": instance,
        "python": env.python_version,
        "packages": env.packages,
    }


def _window(
    annotation: str, instance: int | None, ranks: tuple[RankOutcome, ...]
) -> dict[str, object]:
    return {
        "annotation": annotation,
        "instance": instance,
        "whole_trace": annotation == "",
        "ranks": {str(r.rank): list(r.windows) for r in ranks},
    }


def _empty_edges() -> pa.Table:
    from ... import schema

    fields = list(schema.arrow_schema(schema.DEP))
    fields += [pa.field("from_label", pa.string()), pa.field("to_label", pa.string())]
    return pa.schema(fields).empty_table()
