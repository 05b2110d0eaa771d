"""Whether a database can be read, said in words before any query runs.

A path that is no Kuzu database (missing, a folder, 0 bytes, another file) or a Kuzu database
without tracegraph's tables or runs gets one line that says so and what to do, instead of Kuzu's
"Binder exception: Table Run does not exist". The CLI's readers and the explorer both ask here.
"""

from __future__ import annotations

from pathlib import Path

from tracegraph.ingest.outputs import KUZU_MAGIC
from tracegraph.ingest.store import GraphStore, recovery_problem

from .runs import RunRef, list_runs


def ingest_hint(db: Path) -> str:
    return f"ingest a trace with `tracegraph ingest TRACE --db {db}`"


def file_problem(db: Path) -> str | None:
    """Why the file `db` is no Kuzu database, in one line; None when it looks like one.

    Reads at most the first 4 bytes and writes nothing; what Kuzu then says of it is its own.
    """
    path = Path(db)
    if not path.exists():
        return f"{db}: no such database"
    if path.is_dir():
        return f"{db}: a directory, not a Kuzu database file"
    if not path.is_file():
        return f"{db}: not a regular file, so not a Kuzu database"
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            head = handle.read(len(KUZU_MAGIC))
    except OSError as exc:
        return f"{db}: cannot read it ({exc.strerror or exc})"
    if size == 0:
        return f"{db}: not a Kuzu database (0 bytes); {ingest_hint(db)}"
    if head != KUZU_MAGIC:
        return f"{db}: not a Kuzu database ({size:,} bytes, without Kuzu's header)"
    return recovery_problem(path)


def store_problem(db: Path, store: GraphStore) -> tuple[str | None, list[RunRef]]:
    """Why the open database `db` cannot be explored, in words (None: it can), and its runs."""
    tables = store.run("CALL show_tables() RETURN name").table.column("name").to_pylist()
    if "Run" not in tables or "Rank" not in tables:
        if problem := file_problem(db):
            return problem, []
        if not tables:
            return f"{db} is empty: it holds no tracegraph tables; {ingest_hint(db)}", []
        shown = ", ".join(sorted(tables)[:8]) + (", …" if len(tables) > 8 else "")
        return f"{db} is not a tracegraph database: its tables ({shown}) lack Run and Rank", []
    runs = list_runs(store)
    if not runs:
        return f"{db} holds no runs yet: {ingest_hint(db)}", []
    return None, runs
