"""Modal dialogs: each is a ModalScreen[T] that dismisses with a typed result.

None of them binds the quit keys: the app's priority bindings (explorer/keymap.py) quit from every
dialog, Ctrl+C / Ctrl+Q also while an Input has the focus, `q` wherever it is not typed text.
"""

from __future__ import annotations

from rich.markup import escape
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from tracegraph.queries.catalog import CannedQuery

from .. import keymap


class ErrorDialog(ModalScreen[None]):
    """An error message, scrollable and selectable (`c` or the Copy button copies it), closed
    with Esc/Enter."""

    BINDINGS = [Binding("escape,enter", "close", "Close"), Binding("c", "copy", "Copy")]

    def __init__(self, title: str, message: str) -> None:
        super().__init__()
        self.title_text = title
        self.message = message

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="error"):
            yield Label(self.title_text, id="dialog-title")
            yield TextArea(self.message, read_only=True, soft_wrap=True, id="error-text")
            with Horizontal(classes="buttons"):
                yield Button("Copy", id="copy")
                yield Button("Close", variant="primary", id="close")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "copy":
            self.action_copy()
        else:
            self.dismiss(None)

    def action_copy(self) -> None:
        self.app.copy_to_clipboard(self.message)
        self.notify("error copied to the clipboard")

    def action_close(self) -> None:
        self.dismiss(None)


class PromptDialog(ModalScreen[str | None]):
    """One line of text (None when cancelled)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, value: str = "", placeholder: str = "") -> None:
        super().__init__()
        self.title_text, self.value, self.placeholder = title, value, placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.title_text, id="dialog-title")
            yield Input(self.value, placeholder=self.placeholder, id="prompt")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


class ParamsDialog(ModalScreen[dict[str, str] | None]):
    """Values for a query's `$parameters` (strings; the caller types them)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, params: dict[str, str], defaults: dict[str, str]) -> None:
        super().__init__()
        self.title_text, self.params, self.defaults = title, params, defaults

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):
            yield Label(self.title_text, id="dialog-title")
            for name, kind in self.params.items():
                yield Label(f"${name} ({kind})")
                yield Input(self.defaults.get(name, ""), id=f"param-{name}")
            with Horizontal(classes="buttons"):
                yield Button("Run", variant="primary", id="run")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        # the first value, not the scrolling frame: typed keys (`q` too) go into the field
        for field in self.query(Input).results():
            field.focus()
            break

    def on_input_submitted(self, event: Input.Submitted) -> None:
        inputs = list(self.query(Input))
        at = inputs.index(event.input)
        if at + 1 < len(inputs):
            inputs[at + 1].focus()
        else:
            self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "run":
            self._submit()
        else:
            self.dismiss(None)

    def _submit(self) -> None:
        self.dismiss({name: self.query_one(f"#param-{name}", Input).value for name in self.params})

    def action_cancel(self) -> None:
        self.dismiss(None)


class CannedPicker(ModalScreen[CannedQuery | None]):
    """Pick one of the canned queries (name, description, parameters)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, queries: dict[str, CannedQuery]) -> None:
        super().__init__()
        self.queries = queries

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Canned queries", id="dialog-title")
            options = []
            for name, q in self.queries.items():
                params = ", ".join(f"${p}" for p in q.params) or "no parameters"
                options.append(Option(f"[b]{name}[/b]  {q.description}\n  {params}", id=name))
            yield OptionList(*options, id="canned-list")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.queries[str(event.option.id)])

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """The keys of the current screen and the global ones."""

    BINDINGS = [Binding("escape,question_mark", "close", "Close")]

    def __init__(self, scope: str) -> None:
        super().__init__()
        self.scope = scope

    def compose(self) -> ComposeResult:
        scopes = [s for s in (self.scope, "timeline" if self.scope == "step" else "", "app") if s]
        lines = []
        for scope in scopes:
            title = {"app": "everywhere", "timeline": "timeline (focused)"}.get(scope, scope)
            lines.append(f"[b]{title}[/b]")
            for spec in keymap.KEYMAP.get(scope, ()):
                lines.append(f"  {escape(keymap.key_label(spec.key)):<22} {escape(spec.command)}")
        lines.append("")
        lines.append("Ctrl+P opens the command palette; Tab moves between panes; Esc closes this.")
        lines.append("q quits, except in a text field; Ctrl+C and Ctrl+Q quit everywhere.")
        with VerticalScroll(id="dialog"):
            yield Label("Keys", id="dialog-title")
            yield Static("\n".join(lines), id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)


class UnusableDatabaseDialog(ModalScreen[bool]):
    """Why the database cannot be explored (not Kuzu, no tracegraph tables, no runs), in words.

    Shown once per app: True (Enter on Quit, the default) quits, False (Esc, Close) leaves the
    app open to look around; closing it never brings it back.
    """

    BINDINGS = [Binding("escape", "close", "Close")]

    def __init__(self, problem: str) -> None:
        super().__init__()
        self.problem = problem

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="error"):
            yield Label("Nothing to explore", id="dialog-title")
            yield Static(Text(self.problem), id="unusable-text")
            yield Static(
                "Enter or q quits (so do Ctrl+C and Ctrl+Q); Esc closes this message.",
                classes="note",
            )
            with Horizontal(classes="buttons"):
                yield Button("Quit", variant="primary", id="quit")
                yield Button("Close", id="close")

    def on_mount(self) -> None:
        self.query_one("#quit", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "quit")

    def action_close(self) -> None:
        self.dismiss(False)
