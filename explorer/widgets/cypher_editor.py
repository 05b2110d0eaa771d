"""A Cypher editor: TextArea with history and inline completion of labels, properties, keywords.

After `:` it completes node and relationship labels; after `var.` the properties of the label
that `var` was bound to in the text (all properties when unknown); elsewhere keywords and labels.
The completion shows as a dimmed suggestion; Tab or → accepts it.
"""

from __future__ import annotations

import re

from textual.binding import Binding
from textual.widgets import TextArea

from tracegraph.queries.vocabulary import KEYWORDS, node_labels, properties, rel_labels

from ..history import load_history, save_history

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
_BINDING = re.compile(r"[(\[]\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*([A-Za-z_][A-Za-z0-9_]*)")


def completions(text_before_cursor: str, full_text: str) -> list[str]:
    """Candidate completions (whole words) for the word being typed at the end of the text."""
    match = _WORD.search(text_before_cursor)
    prefix = match.group(0) if match else ""
    head = text_before_cursor[: len(text_before_cursor) - len(prefix)]
    if head.endswith(":"):
        pool = node_labels() + rel_labels()
    elif head.endswith("."):
        var = _WORD.search(head[:-1])
        bound = dict(_BINDING.findall(full_text))
        label = bound.get(var.group(0)) if var else None
        pool = properties(label) or properties()
    else:
        if not prefix:
            return []
        pool = list(KEYWORDS) + node_labels()
    lower = prefix.lower()
    return [w for w in pool if w.lower().startswith(lower) and len(w) > len(prefix)]


class CypherEditor(TextArea):
    """TextArea for Cypher with inline completion and a query history."""

    BINDINGS = [Binding("tab", "accept_suggestion", "Complete", show=False)]

    def __init__(self, text: str = "", keep_history: bool = True, **kwargs: object) -> None:
        """`keep_history`: read and write the history file (explorer/history.py); without it
        the history starts empty and lives as long as the editor (a served explorer: a browser
        client neither reads the server user's queries nor writes their file)."""
        super().__init__(text, tab_behavior="focus", soft_wrap=True, **kwargs)  # type: ignore[arg-type]
        self.keep_history = keep_history
        self.query_history: list[str] = load_history() if keep_history else []
        self._history_at: int | None = None

    def update_suggestion(self) -> None:
        row, col = self.cursor_location
        line = self.document.get_line(row)
        if col != len(line.rstrip()) or self.selection.start != self.selection.end:
            self.suggestion = ""
            return
        before = self.get_text_range((0, 0), self.cursor_location)
        found = completions(before, self.text)
        match = _WORD.search(before)
        typed = match.group(0) if match else ""
        self.suggestion = found[0][len(typed) :] if found else ""

    def action_accept_suggestion(self) -> None:
        if self.suggestion:
            self.insert(self.suggestion)
            self.suggestion = ""
        else:
            self.app.action_focus_next()

    def remember(self, cypher: str) -> None:
        """Add a query to the history (most recent last, no consecutive duplicates)."""
        cypher = cypher.strip()
        if cypher and (not self.query_history or self.query_history[-1] != cypher):
            self.query_history.append(cypher)
            if self.keep_history:
                save_history(self.query_history)
        self._history_at = None

    def history_step(self, delta: int) -> None:
        """Replace the text with an older (-1) or newer (+1) query from the history."""
        if not self.query_history:
            return
        at = len(self.query_history) if self._history_at is None else self._history_at
        if self._history_at is None and self.text.strip() == self.query_history[-1]:
            at -= 1  # the text is the latest query: "previous" means the one before it
        at = min(max(at + delta, 0), len(self.query_history))
        self._history_at = at
        self.load_text(self.query_history[at] if at < len(self.query_history) else "")
        self.move_cursor(self.document.end)
