"""Write docs/tui.md: a plain-text capture of each explorer screen (100x30) and the key bindings.

    python -m tests.explorer.make_docs docs/tui.md

Uses the test databases (tests/explorer/dbs.py: the synthetic 2-rank run with two fake edge
sets), so the captures are reproducible; the clock in the header is hidden.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from textual.widgets import DataTable, Input, OptionList

import tracegraph
from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.explorer import keymap
from tracegraph.explorer.app import TraceExplorer, open_store, screen_text
from tracegraph.explorer.screens.dialogs import ParamsDialog
from tracegraph.explorer.widgets.paged_table import PagedTable
from tracegraph.explorer.widgets.timeline import TimelineStrip
from tracegraph.queries import diff as diff_queries

from .conftest import settle
from .dbs import with_edges_db

SIZE = (100, 30)
LATE = SyntheticConfig(ranks=2, steps=2, layers=4, late_rank=1, late_us=5_000,
                       straggler_factor=1.0, stall_every=0)  # fmt: skip
# queries/diff.py matches an unlabeled (a)-[d:DEP]->(b), for which Kuzu returns ids that do not
# identify events; label it here until it is fixed there (a no-op once it is).
diff_queries._EDGES = diff_queries._EDGES.replace(
    "MATCH (a)-[d:DEP]->(b)", "MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(b:Op:Runtime:Kernel)"
)


async def captures(db: Path) -> dict[str, str]:
    app = TraceExplorer(db, open_store(db), warm_up=False)
    out: dict[str, str] = {}
    async with app.run_test(size=SIZE) as pilot:
        app.sub_title = db.name

        async def shot(name: str) -> None:
            await settle(pilot)
            await pilot.pause(0.2)  # past the 50 ms update delay of a mode switch
            out[name] = screen_text(app)

        await shot("overview")
        app.screen.query_one("#steps", DataTable).focus()
        await pilot.press("down", "enter")
        await settle(pilot)
        await pilot.press("e")  # fake-b: the stream-7 chain and the syncs
        await settle(pilot)
        strip = app.screen.query_one(TimelineStrip)
        strip.focus()
        await pilot.press("down", "down", "plus", "right", "right")
        await shot("step")
        await pilot.press("f9")
        await shot("help")
        await pilot.press("escape")
        path = app.screen.query_one("#path", PagedTable)
        path.focus()
        await pilot.press("down", "down", "enter")
        await shot("inspector")
        await pilot.press("4")
        await settle(pilot)
        await pilot.press("c")
        await shot("diff")
        await pilot.press("f")
        await pilot.pause()
        app.screen.query_one("#rank-filter", Input).value = "1"
        app.screen.query_one("#edges", PagedTable).focus()
        await shot("diff-edges")
        await pilot.press("5")
        await settle(pilot)
        await pilot.press("ctrl+o")
        await pilot.pause()
        picker = app.screen
        picker.query_one(OptionList).highlighted = list(picker.queries).index("top-kernels")
        await pilot.press("enter")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, ParamsDialog)
        dialog.query_one("#param-rank", Input).value = "1"
        await shot("console-params")
        dialog.query_one("#param-rank", Input).focus()
        await pilot.pause()
        await pilot.press("enter")
        await shot("console")
        app.switch_mode("report")  # the console's editor would take the key "6" as text
        await settle(pilot)
        await shot("report")
    return {k: _hide_clock(v) for k, v in out.items()}


async def segment_captures(db: Path) -> dict[str, str]:
    """The Step screen on a native edge set: a late rank's step across ranks, in segments."""
    app = TraceExplorer(db, open_store(db), warm_up=False, mode="step")
    out: dict[str, str] = {}
    async with app.run_test(size=SIZE) as pilot:
        app.sub_title = db.name
        app.update_focus(run="late", rank=0, edge_set="native")
        await settle(pilot)
        app.screen.query_one("#path", PagedTable).focus()
        await pilot.press("a")
        await settle(pilot)
        await pilot.pause(0.2)
        out["segments"] = screen_text(app)
    return {k: _hide_clock(v) for k, v in out.items()}


def late_db(base: Path) -> Path:
    """A 2-rank synthetic run whose rank 1 stalls 5 ms in its data loader, with a native set."""
    db = base / "late.kuzu"
    g = tracegraph.open(db)
    g.ingest(*write_per_rank(LATE, base / "late-traces"), run="late")
    g.edges("native", all_steps=True)
    return db


def _hide_clock(text: str) -> str:
    lines = text.splitlines()
    if lines:
        lines[0] = lines[0][:90].rstrip()
    return "\n".join(lines)


INTRO = """# The explorer's screens and keys (`tracegraph explore DB`)

A keyboard-first terminal app over one database, opened read-only ([explorer.md](explorer.md):
how to run it, in a terminal or a browser). Six screens (modes), each a
module under `explorer/screens/`; every database call runs in a worker thread, so the app stays
responsive while Kuzu works, and a failing query opens an error dialog instead of ending the app.
Keys are listed in the footer of every screen and by `?`; `Ctrl+P` opens the command palette,
whose entries read "namespace: verb" (`screen: step`, `query: run`, `timeline: zoom in`).
The captures below are plain text at 100x30 (colours dropped: in the terminal the slowest rank
of each step and the critical-path segments of the timeline are red), made by
`python -m tests.explorer.make_docs docs/tui.md` from the test databases: the synthetic 2-rank
run and two fake edge sets built from its structural edges.
"""

SECTIONS = {
    "overview": """## Overview (`1`)

Runs and ranks; per rank the time of every `ProfilerStep#N` and the GPU busy share (the union of
its kernels' intervals over the step, so overlapping streams count once); per step the spread
across ranks (min, median, max, (max − min) / median, a histogram of the ranks' times) and the
slowest rank, also highlighted in the rank table. A run without ProfilerStep annotations shows
one "whole trace" step per rank. Enter on a step opens its slowest rank; Enter on a cell of the
rank table opens that rank and step; `r` cycles through the runs of the database. A run ingested
with `--summary` shows its ranks' step times without their events (the header counts its
summary ranks); `f` loads the events of the ranks its report points at and a typical one (as
`ingest --full-ranks auto`; not from a served explorer, which writes nothing) and shows the run
again.""",
    "step": """## Step (`2`)

One rank's step. The critical path of the chosen edge set (`e` cycles through the run's edge
sets) as an ordered list: path order, edge type, weight, share of the step, from and to
(`O`p/`R`untime/`K`ernel, name, boundary). Without edge sets the screen says so and shows only
the timeline. The timeline strip has one row per CPU thread and GPU stream: CPU rows show the
nesting depth as block height, GPU rows busy time, events on the critical path in red. `+`/`-`
zoom, `[`/`]` pan; with the strip focused (Tab), ←/→ pan, ↑/↓ pick a row and Enter inspects the
event under the cursor (the middle column, named on the last line). `,`/`.` move to the
previous/next step, `r` asks for a rank.""",
    "segments": """With a native edge set the path shows in segments first: consecutive
path time of one rank under one range (a `record_function` range, an `nn.Module`, an op; time
with no range is `communication`, `GPU idle`, the python frame over it, or `(no op)`), their
parts indented beneath, at most 15 lines a level (runs of small ones fold into one line), each
with its share of the path and what fixing it would save (the path again with that work taking
no time). `a` shows the step's path across ranks, joined at the collectives (here rank 1's
5 ms data-loader stall bounds the step; rank 0 only waited), `w` orders the segments by path
time, `t` shows the path's edges one by one, as with any edge set. The same segments are what
`tracegraph path DB` prints.""",
    "help": """`?` (or F9 where a text field has the focus) lists the keys of the screen:""",
    "inspector": """## Event inspector (`3`)

An event's fields and its `args` (left), and its neighbours by edge type (right): CALLS parent and
children, LAUNCHES (the launching call / the kernels launched), NEXT_ON_STREAM previous and next
(with the gap), SYNCS (what a sync waits for / who waits on a kernel), PART_OF (the collective
and its peers on other ranks), and the DEP edges of every edge set, to and from, critical ones
marked. Enter follows the edge under the cursor; Backspace (or `b`) goes back; `g` opens an event
by id or by `rank/ev_idx` in the current run.""",
    "diff": """## Edge-set diff (`4`)

Pick edge sets A and B of the run and press `c`: counts by rank and type (only in A, only in B,
in both, critical-path flag changed), the critical path length per rank, and the Chakra view
(sync edges in the whole graph vs on the critical path).""",
    "diff-edges": """The Edges tab (`f` jumps to its filters) lists the differing edges with
the reason where the data shows one, filtered by type and rank; Enter opens the source event in
the inspector, `t` the destination.""",
    "console-params": """## Query console (`5`)

A Cypher editor, empty at first (`Ctrl+T` puts an example in it, `Ctrl+L` clears it), with
completion (labels after `:`, the properties of a variable's label after `var.`, keywords; Tab
or → accepts) and a history (Ctrl+↑/Ctrl+↓). Digits are text here; the F-keys (`F1`–`F6`)
switch screens from the editor too. `Ctrl+R` runs the query;
`$parameters` are asked for in a dialog, prefilled with the run and rank in focus. `Ctrl+O`
picks a canned query and asks for its typed parameters:""",
    "console": """Results are shown by pages of 100 rows (`Ctrl+N`/`Ctrl+B`; at most 200,000
rows are kept). `Esc` interrupts a running query; the database's timeout (30 s by default)
stops runaways. `Ctrl+S` exports the result to CSV. Enter on a row that has an `id` column (or
`x.id`, `*_id`) opens that event in the inspector.""",
    "report": """## Report (`6`)

`tracegraph report` of the run in focus: the findings, what fixing each saves first (then what it
costs), the highlighted one's detail, fix and evidence query below them;
Enter opens its first evidence event in the inspector (a finding without one, a notice). The
other tabs hold the per-step, temporal and kernel tables, the operators by recorded shape, their
roofline and the nn.Module tree (as an outline, each module under its parent), the idle,
collective and straggler tables, and the allocator's per step (Memory).""",
}

PERFORMANCE = """## Responsiveness

Every database call runs in a worker thread, so the app keeps handling keys while Kuzu works.
`python benchmarks/tui_responsiveness.py` times every screen headless with Pilot on a 64-rank run
of 5 M events, from the key press until the screen's first rows are in its widgets; the goal is
300 ms for every screen, and the measured figures are in
[benchmarks/README.md](../benchmarks/README.md#explorer). Comparing two edge sets reads their
Parquet copies in the run archive where they have them
([scale.md](scale.md#diffs-of-millions-of-edges)).
"""

OUTRO = """## Keymap

Every binding is data in `explorer/keymap.py` (scope → action → key → description); the
footer, this table, the help screen and the command palette are built from it. A JSON file of
`{"binding id": "keys"}` rebinds keys, e.g. `{"app.console": "f7", "console.run_query": "ctrl+j"}`
(`run_app(db, keymap_file=...)`); binding ids are `<scope>.<action>`.

{table}
"""


def render(shots: dict[str, str]) -> str:
    parts = [INTRO]
    for name, text in SECTIONS.items():
        parts.append(text + "\n\n```text\n" + shots[name] + "\n```\n")
    parts.append(PERFORMANCE)
    parts.append(OUTRO.replace("{table}", keymap.markdown_table()))
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else Path("docs/tui.md")
    with tempfile.TemporaryDirectory(prefix="tracegraph-docs-") as tmp:
        db = with_edges_db(Path(tmp))
        shots = asyncio.run(captures(db))
        shots |= asyncio.run(segment_captures(late_db(Path(tmp))))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render(shots), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
