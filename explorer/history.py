"""The console's query history, kept between sessions in one small JSON file per user
(`$TRACEGRAPH_HISTORY`, else `$XDG_STATE_HOME/tracegraph/console_history.json`, else under
`~/.local/state`). Reading or writing it never fails the console: a file that cannot be used
is a history that starts empty."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tracegraph.ingest import outputs

KEEP = 500  # the most recent queries kept


def history_file() -> Path:
    if os.environ.get("TRACEGRAPH_HISTORY"):
        return Path(os.environ["TRACEGRAPH_HISTORY"])
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "tracegraph" / "console_history.json"


def load_history() -> list[str]:
    try:
        data = json.loads(history_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [q for q in data if isinstance(q, str)][-KEEP:] if isinstance(data, list) else []


def save_history(queries: list[str]) -> None:
    path = history_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        outputs.write_text(path, json.dumps(queries[-KEEP:], indent=0))
    except OSError:
        pass
