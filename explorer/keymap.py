"""Every key binding of the explorer as data: scope → action → key → description.

Screens build their `BINDINGS` from here, the help screen and the docs print it, and the command
palette offers each entry as "namespace: verb". Users override keys by binding id
("<scope>.<action name>") with a JSON file: `{"app.console": "f5", "console.run_query": "ctrl+j"}`.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path

from textual.binding import Binding, BindingType

from tracegraph.ingest.errors import TracegraphError

MAX_KEYMAP_BYTES = 1 << 20  # a keymap is a few hundred bytes; more is not a keymap


@dataclass(frozen=True)
class KeySpec:
    action: str  # Textual action, run on the screen (or the app for scope "app")
    key: str  # Textual key string; several keys separated by commas
    description: str  # shown in the footer and the help screen
    command: str  # command palette title, "namespace: verb"
    show: bool = True
    name: str = ""  # binding id suffix; defaults to the action's name
    priority: bool = False  # checked before the focused widget, also above dialogs (quit keys)
    palette: bool = True  # offered in the command palette

    @property
    def binding_name(self) -> str:
        return self.name or self.action.split("(")[0].removeprefix("app.")


def _screen_keys(*screens: tuple[str, str, str, str]) -> tuple[KeySpec, ...]:
    """Each screen's digit (typed text where a text field has focus: the Console's editor) and
    its F-key, which switches from every screen, the Console's editor included."""
    out: list[KeySpec] = []
    for name, digit, description, command in screens:
        action = f"switch_mode('{name}')"
        out.append(KeySpec(action, digit, description, command, name=name))
        out.append(
            KeySpec(
                action,
                f"f{digit}",
                description,
                f"{command} (F{digit})",
                show=False,
                name=f"{name}_f{digit}",
                priority=True,
                palette=False,
            )  # fmt: skip
        )
    return tuple(out)


KEYMAP: dict[str, tuple[KeySpec, ...]] = {
    "app": (
        *_screen_keys(
            ("overview", "1", "Overview", "screen: overview"),
            ("step", "2", "Step", "screen: step"),
            ("inspector", "3", "Inspect", "screen: inspector"),
            ("diff", "4", "Diff", "screen: edge-set diff"),
            ("console", "5", "Console", "screen: query console"),
            ("report", "6", "Report", "screen: report"),
        ),
        KeySpec("help", "question_mark", "Help", "app: help"),
        # F9 works while typing too (checked before the focused widget), as the F-keys above
        KeySpec(
            "help",
            "f9",
            "Help",
            "app: help (F9)",
            show=False,
            name="help_f9",
            priority=True,
            palette=False,
        ),  # fmt: skip
        # quitting works from every screen and dialog: Ctrl+C / Ctrl+Q even while typing, `q`
        # wherever it is not typed text (TraceExplorer.action_quit_unless_typing)
        KeySpec("quit", "ctrl+q,ctrl+c", "Quit", "app: quit", show=False, priority=True),
        KeySpec(
            "quit_unless_typing",
            "q",
            "Quit",
            "app: quit (q, not in a text field)",
            show=False,
            name="quit_q",
            priority=True,
            palette=False,
        ),
    ),
    "overview": (
        KeySpec("open_step", "enter", "Open step", "overview: open step"),
        KeySpec("next_run", "r", "Next run", "overview: next run"),
        KeySpec("reload", "ctrl+l", "Reload", "overview: reload", show=False),
        KeySpec(
            "load_full_ranks",
            "f",
            "Full ranks",
            "overview: load the events of the ranks a summary points at",
            show=False,
        ),
    ),
    "step": (
        KeySpec("previous_step", "comma", "Prev step", "step: previous step"),
        KeySpec("next_step", "full_stop", "Next step", "step: next step"),
        KeySpec("choose_rank", "r", "Rank", "step: choose rank"),
        KeySpec("next_edge_set", "e", "Edge set", "step: next edge set"),
        KeySpec("inspect", "enter", "Inspect", "step: inspect event"),
        KeySpec("toggle_edges", "t", "Edges", "step: segments / edges of the path"),
        KeySpec("sort_by_weight", "w", "By time", "step: segments by path time / in order"),
        KeySpec("toggle_across", "a", "Across", "step: across ranks / this rank's path"),
        KeySpec("zoom_in", "plus,equals_sign", "Zoom in", "timeline: zoom in", show=False),
        KeySpec("zoom_out", "minus", "Zoom out", "timeline: zoom out", show=False),
        KeySpec("pan_left", "left_square_bracket", "Pan left", "timeline: pan left", show=False),
        KeySpec(
            "pan_right", "right_square_bracket", "Pan right", "timeline: pan right", show=False
        ),
        KeySpec("reset_zoom", "0", "Whole step", "timeline: whole step", show=False),
    ),
    "inspector": (
        KeySpec("follow", "enter", "Follow", "inspector: follow edge"),
        KeySpec("back", "backspace,b", "Back", "inspector: back"),
        KeySpec("goto", "g", "Go to", "inspector: go to event"),
    ),
    "diff": (
        KeySpec("compare", "c", "Compare", "diff: compare edge sets"),
        KeySpec("open_source", "enter", "Open src", "diff: open source event"),
        KeySpec("open_target", "t", "Open dst", "diff: open destination event"),
        KeySpec("filter", "f", "Filter", "diff: filter edges"),
    ),
    "report": (
        KeySpec("open_evidence", "enter", "Evidence", "report: open the finding's evidence"),
        KeySpec("reload", "ctrl+l", "Reload", "report: reload", show=False),
    ),
    "console": (
        KeySpec("run_query", "ctrl+r", "Run", "query: run"),
        # listed in the console's status line (the footer keeps room for the screens' keys)
        KeySpec(
            "example", "ctrl+t", "Example", "query: an example query in the editor", show=False
        ),  # fmt: skip
        KeySpec("clear", "ctrl+l", "Clear", "query: clear the editor", show=False),
        KeySpec("interrupt", "escape", "Interrupt", "query: interrupt"),
        KeySpec("canned", "ctrl+o", "Canned", "query: canned queries"),
        KeySpec(
            "history_previous",
            "ctrl+up,alt+up",
            "History ↑",
            "query: previous in history",
            show=False,
        ),
        KeySpec(
            "history_next", "ctrl+down,alt+down", "History ↓", "query: next in history", show=False
        ),
        KeySpec("next_page", "ctrl+n", "Next page", "results: next page"),
        KeySpec("previous_page", "ctrl+b", "Prev page", "results: previous page", show=False),
        KeySpec("export_csv", "ctrl+s", "Export CSV", "results: export CSV"),
        KeySpec(
            "inspect_row", "ctrl+g", "Inspect row", "results: inspect the row's event", show=False
        ),
    ),
    # the timeline strip's own keys, active while it has focus (on the step screen)
    "timeline": (
        KeySpec("zoom_in", "plus,equals_sign", "Zoom in", "timeline: zoom in"),
        KeySpec("zoom_out", "minus", "Zoom out", "timeline: zoom out"),
        KeySpec("pan_left", "left,h", "Pan", "timeline: pan left"),
        KeySpec("pan_right", "right,l", "Pan", "timeline: pan right", show=False),
        KeySpec("lane_up", "up,k", "Lane", "timeline: lane up"),
        KeySpec("lane_down", "down,j", "Lane", "timeline: lane down", show=False),
        KeySpec("reset_zoom", "0", "Whole step", "timeline: whole step"),
        KeySpec("inspect", "enter", "Inspect", "timeline: inspect event at the cursor"),
    ),
}


def binding_id(scope: str, spec: KeySpec) -> str:
    return f"{scope}.{spec.binding_name}"


def bindings(scope: str) -> list[BindingType]:
    """Textual bindings of one scope, each with its id, so that user keymaps can rebind it."""
    return [
        Binding(
            s.key,
            s.action,
            s.description,
            show=s.show,
            priority=s.priority,
            id=binding_id(scope, s),
        )
        for s in KEYMAP[scope]
    ]


def load_keymap(path: Path) -> dict[str, str]:
    """User overrides {binding id: keys} from a JSON or TOML file
    (`"console.run_query" = "ctrl+j"`); an unreadable file, one that is not a regular file or
    is over MAX_KEYMAP_BYTES, or an unknown id is a one-line error naming the file."""
    text = _read_keymap_text(Path(path))
    try:
        if Path(path).suffix == ".toml":
            data: object = tomllib.loads(text)
        else:
            data = json.loads(text)
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise KeymapError(f"{path}: cannot read the keymap ({exc})") from exc
    if not isinstance(data, dict):
        raise KeymapError(f"{path}: a keymap is an object of binding id → keys")
    known = {binding_id(scope, s) for scope, specs in KEYMAP.items() for s in specs}
    unknown = sorted(set(data) - known)
    if unknown:
        raise KeymapError(f"{path}: unknown binding ids {unknown}; known: {sorted(known)}")
    return {str(k): str(v) for k, v in data.items()}


def _read_keymap_text(path: Path) -> str:
    """The file's text, read only if it is a regular file of at most MAX_KEYMAP_BYTES: a device
    (/dev/zero) would be read without end and a FIFO would block. Opened without blocking and
    checked on the open file, so nothing can swap it in between."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise KeymapError(f"{path}: cannot read the keymap ({exc.strerror})") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise KeymapError(f"{path}: not a regular file; a keymap is a JSON or TOML file")
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(MAX_KEYMAP_BYTES + 1)
        except OSError as exc:
            raise KeymapError(f"{path}: cannot read the keymap ({exc.strerror})") from exc
    if len(data) > MAX_KEYMAP_BYTES:
        raise KeymapError(f"{path}: over {MAX_KEYMAP_BYTES:,} bytes, too large for a keymap")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KeymapError(f"{path}: cannot read the keymap (not UTF-8 text: {exc})") from exc


class KeymapError(TracegraphError, ValueError):
    """A keymap file that cannot be used."""


def key_label(key: str) -> str:
    """Keys as a person types them: 'question_mark,f9' → '? / F9'."""
    names = {
        "question_mark": "?",
        "comma": ",",
        "full_stop": ".",
        "plus": "+",
        "minus": "-",
        "equals_sign": "=",
        "left_square_bracket": "[",
        "right_square_bracket": "]",
        "escape": "Esc",
        "enter": "Enter",
        "backspace": "Backspace",
        "left": "←",
        "right": "→",
        "up": "↑",
        "down": "↓",
    }
    modifiers = {"ctrl": "Ctrl", "alt": "Alt", "shift": "Shift"}

    def part(p: str) -> str:
        if p in modifiers:
            return modifiers[p]
        if p[:1] == "f" and p[1:].isdigit():
            return p.upper()
        return names.get(p, p)

    return " / ".join("+".join(part(p) for p in k.split("+")) for k in key.split(","))


def markdown_table() -> str:
    """The key bindings as a Markdown table (docs/tui.md)."""
    lines = ["| screen | key | action | palette command |", "|---|---|---|---|"]
    where = {"app": "everywhere", "timeline": "step, timeline focused"}
    for scope, specs in KEYMAP.items():
        for s in specs:
            lines.append(
                f"| {where.get(scope, scope)} | `{key_label(s.key)}` | {s.description} "
                f"| {s.command} |"
            )
    return "\n".join(lines)
