"""How long each TUI screen takes to show its first rows on a 64-rank synthetic run (>= 5 M events).

The run (64 ranks x 4 steps x 600 layers: 5.08 M event nodes) is generated and ingested once into
`$TRACEGRAPH_BENCH_CACHE` (default /tmp/tg-bench); a copy gets two fake edge sets (every
kernel→kernel stream edge, ~1.15 M DEP edges each; the stream-7 chain on the critical path) so the
step screen's critical path and the diff screen have data. Each screen is opened headless with
Textual's Pilot in a fresh app, from the console mode, and timed from the key press until its
first rows are in its widgets ("first rows") and until all of its loads finished ("complete"):
once on a first visit (Textual builds the screen's widgets), once after the app's warm-up built
them, and for one interaction on the loaded screen ("next": reload, next step, follow an edge,
run the query again).
Median of 3 (plus the first, cold run). Then the read-side functions behind them, headless.
Goal: every screen shows its first rows in < 300 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from _common import CACHE, cached_per_rank, generator_tag, note, print_table
from textual.css.query import NoMatches

from tracegraph.examples.synthetic import SyntheticConfig
from tracegraph.explorer.app import TraceExplorer, open_store
from tracegraph.explorer.screens.console import ConsoleScreen
from tracegraph.explorer.screens.diff import DiffScreen
from tracegraph.explorer.screens.inspector import InspectorScreen
from tracegraph.explorer.screens.overview import OverviewScreen
from tracegraph.explorer.screens.step import StepScreen
from tracegraph.explorer.widgets.cypher_editor import CypherEditor
from tracegraph.explorer.widgets.timeline import TimelineStrip
from tracegraph.ingest import schema
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore, write_transaction
from tracegraph.queries.diff import diff_edge_sets
from tracegraph.queries.neighbours import event_detail
from tracegraph.queries.overview import gpu_busy, step_times
from tracegraph.queries.runs import list_runs
from tracegraph.queries.step import critical_path, edge_set_names, step_windows
from tracegraph.queries.timeline import rank_timeline

RUN = "bench64"
RANK = 37
GOAL_MS = 300.0
POLL_S = 0.005
SIZE = (100, 30)


def bench_config(layers: int = 600) -> SyntheticConfig:
    return SyntheticConfig(ranks=64, steps=4, layers=layers)


def cached_db(config: SyntheticConfig) -> Path:
    """The ingested database of `config`, built once (the traces are cached too)."""
    shape = f"r{config.ranks}-s{config.steps}-l{config.layers}-seed{config.seed}"
    db = CACHE / f"tui-{shape}-{generator_tag()}.kuzu"
    if not db.exists():
        files = cached_per_rank(config)
        note(f"ingesting {len(files)} files into {db} (minutes)")
        partial = db.with_name(f".{db.name}.partial")
        partial.unlink(missing_ok=True)
        ingest(files, partial, IngestOptions(run=RUN))
        partial.rename(db)
    return db


def cached_edges_db(db: Path) -> Path:
    """A copy of `db` with two fake edge sets made of every NEXT_ON_STREAM edge."""
    out = db.with_name(db.name.replace(".kuzu", "-edges.kuzu"))
    if out.exists():
        return out
    note(f"writing fake edge sets into {out}")
    with GraphStore(db) as store:
        edges = store.run(
            "MATCH (a:Kernel)-[r:NEXT_ON_STREAM]->(b:Kernel) RETURN a.id AS from_id, "
            "b.id AS to_id, a.rank AS rank, a.ts AS ts, a.stream AS stream, r.gap_ns AS gap"
        ).table.sort_by([("rank", "ascending"), ("ts", "ascending")])
    partial = out.with_name(f".{out.name}.partial")
    shutil.copyfile(db, partial)
    with write_transaction(partial) as store:
        for name, extra in (("fake-a", 0), ("fake-b", 1)):
            table = _fake_dep(edges, name, extra)
            store.copy("DEP", schema.conform(table, schema.DEP), ("Kernel", "Kernel"))
            ranks = {str(r): {"status": "ok", "path_length_ns": 0} for r in range(64)}
            row = {
                "id": f"{RUN}/{name}",
                "run": RUN,
                "name": name,
                "producer": "bench",
                "version": "0",
                "options": "{}",
                "window": "{}",
                "ranks": json.dumps(ranks),
                "created_at": "",
                "copy_hash": None,
            }
            store.copy("EdgeSet", schema.conform(pa.Table.from_pylist([row]), schema.EDGE_SET))
    partial.rename(out)
    return out


def _fake_dep(edges: pa.Table, name: str, extra: int) -> pa.Table:
    n = edges.num_rows
    critical = pc.equal(edges["stream"], 7)
    ranks = edges["rank"].to_numpy()
    order = pc.if_else(critical, pa.array(range(n), pa.int64()), -1)
    del ranks
    return pa.table(
        {
            "from_id": edges["from_id"],
            "to_id": edges["to_id"],
            "edge_set": pa.array([name] * n),
            "type": pa.array(["kernel_kernel_delay"] * n),
            "src_boundary": pa.array(["end"] * n),
            "dst_boundary": pa.array(["start"] * n),
            "weight_ns": pc.add(pc.max_element_wise(edges["gap"], 0), extra),
            "on_critical_path": critical,
            "path_order": order,
        }
    )


# ---- screens through Pilot ---------------------------------------------------------------------
Ready = Callable[[TraceExplorer], bool]


def _overview_rows(app: TraceExplorer) -> bool:
    s = app.screen
    return isinstance(s, OverviewScreen) and s.query_one("#ranks").row_count > 0


def _step_times(app: TraceExplorer) -> bool:
    s = app.screen
    return isinstance(s, OverviewScreen) and s.loaded is not None


def _step_rows(app: TraceExplorer) -> bool:
    s = app.screen
    return (
        isinstance(s, StepScreen)
        and s.path is not None
        or (isinstance(s, StepScreen) and "No edge set" in str(s.query_one("#path-note").render()))
    )


def _timeline_rows(app: TraceExplorer) -> bool:
    s = app.screen
    return isinstance(s, StepScreen) and s.query_one(TimelineStrip).timeline is not None


def _inspector_rows(app: TraceExplorer) -> bool:
    s = app.screen
    return isinstance(s, InspectorScreen) and s.detail is not None


def _diff_listed(app: TraceExplorer) -> bool:
    s = app.screen
    return isinstance(s, DiffScreen) and s.listed


def _diff_rows(app: TraceExplorer) -> bool:
    s = app.screen
    return isinstance(s, DiffScreen) and s.edges is not None


def _console_rows(app: TraceExplorer) -> bool:
    s = app.screen
    return isinstance(s, ConsoleScreen) and s.result is not None


async def _time_screen(case: Case, warm: bool) -> dict[str, float]:
    """ms from pressing the case's keys until each mark holds, and until all workers finished;
    then the same for the case's in-screen interaction ("next")."""
    app = TraceExplorer(case.db, open_store(case.db), mode="console", warm_up=warm)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        while warm and not app.warmed:
            await pilot.pause()  # let the warm-up build every screen first
        await app.workers.wait_for_complete()
        app.update_focus(**case.focus)
        if case.before:
            case.before(app)
        out = await _timed(pilot, case.keys, case.marks, "")
        if case.next_keys:
            if case.before_next:
                case.before_next(app)
            marks = {"first rows": case.next_ready}
            out.update(await _timed(pilot, case.next_keys, marks, "next "))
    return out


async def _timed(
    pilot: object, keys: list[str], marks: dict[str, Ready], prefix: str
) -> dict[str, float]:
    """Keys go in as events (Pilot.press would wait for the process to go idle, up to 2 s per
    key while a worker thread queries); the marks are polled every 5 ms."""
    app = pilot.app  # type: ignore[attr-defined]
    start = time.perf_counter()
    for key in keys:
        app.simulate_key(key)
    pending = dict(marks)
    out: dict[str, float] = {}
    while pending and time.perf_counter() < start + 180:
        await asyncio.sleep(POLL_S)
        for name, ready in list(pending.items()):
            if _holds(ready, app):
                out[prefix + name] = (time.perf_counter() - start) * 1000
                del pending[name]
    while any(not w.is_finished for w in app.workers):
        await asyncio.sleep(POLL_S)
    out[prefix + "complete"] = (time.perf_counter() - start) * 1000
    await pilot.pause()  # type: ignore[attr-defined]
    return out


def _holds(ready: Ready, app: TraceExplorer) -> bool:
    try:
        return ready(app)
    except NoMatches:  # the screen is still being built
        return False


@dataclass
class Case:
    name: str
    db: Path
    focus: dict[str, object]
    keys: list[str]
    marks: dict[str, Ready]
    before: Callable[[TraceExplorer], None] | None = None
    next_keys: list[str] = field(default_factory=list)
    next_ready: Ready = lambda app: True  # noqa: E731
    before_next: Callable[[TraceExplorer], None] | None = None


def _console_query(cypher: str) -> Callable[[TraceExplorer], None]:
    def load(app: TraceExplorer) -> None:
        app.screen.query_one(CypherEditor).load_text(cypher)

    return load


def _changed(attr: str) -> Callable[[TraceExplorer], None]:
    """Before an interaction: forget the screen's current `attr`, so readiness means new data."""

    def forget(app: TraceExplorer) -> None:
        setattr(app.screen, attr, None)

    return forget


_shown: dict[str, int | None] = {"event": None}


def _remember_event(app: TraceExplorer) -> None:
    detail = getattr(app.screen, "detail", None)
    _shown["event"] = detail.id if detail else None


def _inspector_moved(app: TraceExplorer) -> bool:
    s = app.screen
    return (
        isinstance(s, InspectorScreen) and s.detail is not None and (s.detail.id != _shown["event"])
    )


def _path_reloaded(app: TraceExplorer) -> bool:
    s = app.screen
    return isinstance(s, StepScreen) and s.query_one(TimelineStrip).timeline is not None


def _forget_timeline(app: TraceExplorer) -> None:
    app.screen.query_one(TimelineStrip).timeline = None


def screen_cases(db: Path, edges_db: Path, kernel_id: int) -> list[Case]:
    step_focus = {"run": RUN, "rank": RANK, "step": 1}
    top = (
        f"MATCH (k:Kernel) WHERE k.run = '{RUN}' AND k.rank = {RANK} RETURN k.name AS name, "
        "count(*) AS n, sum(k.dur) AS total ORDER BY total DESC LIMIT 25"
    )
    return [
        Case(
            "overview",
            db,
            {},
            ["f1"],
            {"first rows": _overview_rows, "step times": _step_times},
            next_keys=["ctrl+l"],
            next_ready=_step_times,
            before_next=_changed("loaded"),
        ),
        Case(
            "step (no edge set)",
            db,
            step_focus,
            ["f2"],
            {"first rows": _step_rows, "timeline": _timeline_rows},
            next_keys=["full_stop"],
            next_ready=_path_reloaded,
            before_next=_forget_timeline,
        ),
        Case(
            "step (critical path)",
            edges_db,
            dict(step_focus, edge_set="fake-a"),
            ["f2"],
            {"first rows": _step_rows, "timeline": _timeline_rows},
            next_keys=["full_stop"],
            next_ready=_path_reloaded,
            before_next=_forget_timeline,
        ),
        Case(
            "inspector",
            db,
            {"run": RUN, "event_id": kernel_id},
            ["f3"],
            {"first rows": _inspector_rows},
            next_keys=["enter"],
            next_ready=_inspector_moved,
            before_next=_remember_event,
        ),
        Case(
            "diff",
            edges_db,
            {"run": RUN},
            ["f4"],
            {"first rows": _diff_listed},  # comparing is timed headless (minutes: see below)
        ),
        Case(
            "console",
            db,
            {"run": RUN},
            ["ctrl+r"],
            {"first rows": _console_rows},
            before=_console_query(top),
            next_keys=["ctrl+r"],
            next_ready=_console_rows,
            before_next=_changed("result"),
        ),
    ]


def run_screens(db: Path, edges_db: Path, repeat: int) -> list[list[object]]:
    store = open_store(db)
    kernel_id = (
        store.run(
            f"MATCH (k:Kernel) WHERE k.rank = {RANK} AND k.stream = 21 RETURN k.id AS id LIMIT 1"
        )
        .table["id"][0]
        .as_py()
    )
    rows = []
    for case in screen_cases(db, edges_db, kernel_id):
        for warm in (False, True):
            runs = []
            for _ in range(repeat):
                runs.append(asyncio.run(_time_screen(case, warm)))
                note(f"{case.name} ({'warmed' if warm else 'first visit'}): {runs[-1]}")
            marks = [m for m in runs[0] if warm or not m.startswith("next ")]
            for mark in marks:
                values = [r.get(mark, float("nan")) for r in runs]
                median = statistics.median(values)
                verdict = (
                    "" if mark.endswith("complete") else ("ok" if median < GOAL_MS else "SLOW")
                )
                label = (
                    mark
                    if mark.startswith("next ")
                    else (f"{mark} ({'warmed' if warm else 'first visit'})")
                )
                rows.append([case.name, label, values[0], median, verdict])
    return rows


# ---- the read side, headless --------------------------------------------------------------------
def run_reads(db: Path, edges_db: Path, repeat: int, with_diff: bool) -> list[list[object]]:
    store, edges_store = open_store(db), open_store(edges_db)
    run = list_runs(store)[0]
    times = step_times(store, run)
    window = step_windows(store, run, RANK)[1]
    kernel = int(rank_timeline(store, run.run_idx, RANK, window.ts, window.end).lanes[-1].ids[5])
    cases: list[tuple[str, Callable[[], object]]] = [
        ("list_runs", lambda: list_runs(store)),
        ("step_times (ProfilerStep scan)", lambda: step_times(store, run)),
        ("gpu_busy (all kernels)", lambda: gpu_busy(store, run, times)),
        ("step_windows (one rank)", lambda: step_windows(store, run, RANK)),
        ("edge_set_names", lambda: edge_set_names(edges_store, RUN)),
        ("critical_path (one rank)", lambda: critical_path(edges_store, window, "fake-a")),
        (
            "rank_timeline (one step)",
            lambda: rank_timeline(store, run.run_idx, RANK, window.ts, window.end),
        ),
        ("event_detail (kernel)", lambda: event_detail(store, kernel)),
        ("event_detail (step annotation)", lambda: event_detail(store, int(window.id or 0))),
    ]
    if with_diff:
        cases.append(
            (
                "diff_edge_sets (one rank)",
                lambda: diff_edge_sets(edges_store, "fake-a", "fake-b", rank=RANK),
            )
        )
    rows = []
    for name, call in cases:
        values = []
        for _ in range(repeat):
            began = time.perf_counter()
            call()
            values.append((time.perf_counter() - began) * 1000)
        rows.append([name, values[0], statistics.median(values)])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--prepare-only", action="store_true")
    parser.add_argument(
        "--diff", action="store_true", help="also time diff_edge_sets on one rank (~1 min each)"
    )
    args = parser.parse_args(argv)
    db = cached_db(bench_config(args.layers))
    edges_db = cached_edges_db(db)
    if args.prepare_only:
        print(db, edges_db)
        return 0
    events = sum(r.events for r in list_runs(open_store(db)))
    print(f"database: {db} ({events:,} events, 64 ranks); edge sets in {edges_db.name}")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"machine: {os.cpu_count()} CPUs, load average {load} (other work inflates times)")
    print(f"screens (ms from key press; first = cold run, median of {args.repeat}):")
    print_table(
        ["screen", "until", "first ms", "median ms", f"< {GOAL_MS:.0f}"],
        run_screens(db, edges_db, args.repeat),
    )
    print(f"\nread side, headless (ms; median of {args.repeat}):")
    reads = run_reads(db, edges_db, args.repeat, args.diff)
    print_table(["function", "first ms", "median ms"], reads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
