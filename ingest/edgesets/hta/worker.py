"""Export HTA's critical-path graph, one rank at a time, as Parquet (run inside an HTA env).

Run by file path with the HTA environment's python: `python -I worker.py REQUEST.json`.
It imports only the standard library, `hta` and `pyarrow`, never tracegraph.

REQUEST.json: {"output_dir": DIR, "distribution": NAME,
               "ranks": [{"rank": R, "file": PATH, "annotation": A, "instance_id": N | null}]}
(annotation "" is the whole trace). For each rank it writes `rank-R.parquet` (every CPGraph edge)
and `rank-R.json` (status); a rank HTA fails on gets status "failed" with HTA's message and the
other ranks go on. Progress lines on stderr start with PROGRESS_PREFIX.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import re
import sys
import time
import traceback
import warnings
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

PROGRESS_PREFIX = "tracegraph-worker:"
EDGE_COLUMNS = (
    "src_ev_idx",
    "src_boundary",
    "dst_ev_idx",
    "dst_boundary",
    "type",
    "weight_ns",
    "on_critical_path",
    "path_order",
)
_WINDOW = re.compile(r"Looking up events within the window \(([^,]+), ([^)]+)\)")


class _Captured(logging.Handler):
    """Keeps HTA's log records of one analysis: its window, and its last error message."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.window: tuple[str, str] | None = None
        self.last_error: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        match = _WINDOW.search(message)
        if match:
            self.window = (match.group(1), match.group(2))
        if record.levelno >= logging.ERROR:
            self.last_error = " ".join(message.split())[:500]


def _to_ns(micros: Any) -> int:
    """Exact ns of an HTA µs value (ints stay exact; fractional µs round to the nearest ns)."""
    if isinstance(micros, int) or float(micros).is_integer():
        return int(micros) * 1000
    return round(float(micros) * 1000)


def _edge_table(graph: Any) -> tuple[Any, int, int]:
    """Every edge of the CPGraph as an Arrow table, its path length (ns) and clamped count."""
    import pyarrow as pa

    path = list(graph.critical_path_nodes)
    order = {(path[i], path[i + 1]): i for i in range(len(path) - 1)}
    cols: dict[str, list[Any]] = {name: [] for name in EDGE_COLUMNS}
    clamped = 0
    for u, v, data in graph.edges(data=True):
        edge, src, dst = data["object"], graph.node_list[u], graph.node_list[v]
        cols["src_ev_idx"].append(int(src.ev_idx))
        cols["src_boundary"].append("start" if src.is_start else "end")
        cols["dst_ev_idx"].append(int(dst.ev_idx))
        cols["dst_boundary"].append("start" if dst.is_start else "end")
        cols["type"].append(edge.type.name.lower())
        # data["weight"] is what the longest path used (HTA clamps negative weights to 0 there).
        cols["weight_ns"].append(_to_ns(data["weight"]))
        clamped += data["weight"] != edge.weight
        position = order.get((u, v), -1)
        cols["on_critical_path"].append(position >= 0)
        cols["path_order"].append(position)
    length = sum(_to_ns(graph.edges[u, v]["weight"]) for u, v in order)
    types = [pa.int64(), pa.string(), pa.int64(), pa.string(), pa.string(), pa.int64()]
    types += [pa.bool_(), pa.int64()]
    schema = pa.schema(list(zip(EDGE_COLUMNS, types, strict=True)))
    return pa.table(cols, schema=schema), length, clamped


def _window(captured: _Captured, analysis: Any, rank: int, whole: bool) -> dict[str, int] | None:
    """The analysis window in absolute trace ns; HTA logs it on its aligned µs timeline.

    For the whole trace HTA's logged end is `max(end)`, a column it does not align (so it only
    widens the clip); the window reported is then the rank's first start to last end.
    """
    try:
        bounds: tuple[Any, Any] | None = captured.window
        if whole:
            df = analysis.t.get_trace(rank)
            bounds = (df["ts"].min(), (df["ts"] + df["dur"]).max())
        if bounds is None:
            return None
        offset = Decimal(str(analysis.t.min_ts))
        start, end = (Decimal(str(v).strip()) + offset for v in bounds)
    except (InvalidOperation, KeyError, AttributeError, TypeError):
        return None  # the window is a description; never fail a rank over it
    return {"start_ns": int(round(start * 1000)), "end_ns": int(round(end * 1000))}


def _file_rank(analysis: Any, rank: int) -> int | None:
    """The rank the file's own distributedInfo names (HTA was told `rank`; they may differ)."""
    meta = getattr(analysis.t, "meta_data", {}).get(rank)
    info = meta.get("distributedInfo") if isinstance(meta, dict) else None
    value = info.get("rank") if isinstance(info, dict) else None
    return value if isinstance(value, int) else None


def _hta_frame(exc: BaseException) -> str:
    """Where in HTA an exception was raised: the innermost frame inside the `hta` package."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/hta/" in f.filename]
    if not frames:
        return ""
    last = frames[-1]
    return f"hta/{last.filename.rsplit('/hta/', 1)[1]}:{last.lineno} {last.name}"


def _analyze(item: dict[str, Any], out_dir: Path, version: str) -> dict[str, Any]:
    """One rank: load its file alone (no rank detection), analyze, write Parquet; a status dict."""
    import pyarrow.parquet as pq
    from hta.trace_analysis import TraceAnalysis

    rank = int(item["rank"])
    status: dict[str, Any] = {"rank": rank, "status": "failed", "hta_version": version}
    timings: dict[str, float] = {}
    status["seconds"] = timings
    captured = _Captured()
    hta_logger = logging.getLogger("hta")
    hta_logger.addHandler(captured)
    start = time.perf_counter()
    try:
        _quiet_hta(captured)
        analysis = TraceAnalysis(trace_files={rank: str(item["file"])})
        _quiet_hta(captured)
        timings["load"] = round(time.perf_counter() - start, 3)
        loaded = sorted(analysis.t.get_ranks())
        if loaded != [rank]:
            status["message"] = f"HTA loaded rank(s) {loaded}, not rank {rank}"
            return status
        status["file_rank"] = _file_rank(analysis, rank)
        began = time.perf_counter()
        result = analysis.critical_path_analysis(
            rank=rank, annotation=item["annotation"], instance_id=item.get("instance_id")
        )
        timings["analysis"] = round(time.perf_counter() - began, 3)
        if result is None:
            status["message"] = captured.last_error or "HTA returned no result"
            return status
        graph, ok = result
        status["window"] = _window(captured, analysis, rank, item["annotation"] == "")
        if not ok:
            status["message"] = captured.last_error or "HTA found no valid critical path"
            return status
        began = time.perf_counter()
        table, length, clamped = _edge_table(graph)
        pq.write_table(table, out_dir / f"rank-{rank}.parquet")
        timings["export"] = round(time.perf_counter() - began, 3)
        status.update(
            status="ok",
            message="",
            path_length_ns=length,
            edges=table.num_rows,
            critical_path_edges=len(graph.critical_path_edges_set),
            clamped_negative_weights=int(clamped),
        )
        return status
    except Exception as exc:  # noqa: BLE001 - any HTA failure is this rank's status
        status["message"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:500]
        status["where"] = _hta_frame(exc)
        return status
    finally:
        timings["total"] = round(time.perf_counter() - start, 3)
        hta_logger.removeHandler(captured)


def _quiet_hta(keep: logging.Handler) -> None:
    """Let INFO records reach `keep` but no other handler (HTA sets some up as it runs)."""
    logging.getLogger("hta").setLevel(logging.INFO)
    for logger in (logging.getLogger(), logging.getLogger("hta")):
        for handler in logger.handlers:
            if handler is not keep:
                handler.setLevel(logging.WARNING)


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[1]).read_text())
    out_dir = Path(request["output_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    # A root handler of our own, so a later implicit basicConfig() adds none at INFO.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s:%(name)s:%(message)s")
    logging.getLogger().handlers[0].setLevel(logging.WARNING)
    import hta.trace_analysis  # noqa: F401 - imported once, before the per-rank timings

    warnings.filterwarnings("ignore")
    version = importlib.metadata.version(request["distribution"])
    imported = round(time.perf_counter() - began, 3)
    items = request["ranks"]
    for i, item in enumerate(items):
        print(
            f"{PROGRESS_PREFIX} {i} {len(items)} rank {item['rank']}", file=sys.stderr, flush=True
        )
        status = _analyze(item, out_dir, version)
        status["seconds"]["import"] = imported
        (out_dir / f"rank-{item['rank']}.json").write_text(json.dumps(status, sort_keys=True))
    print(f"{PROGRESS_PREFIX} {len(items)} {len(items)} done", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
