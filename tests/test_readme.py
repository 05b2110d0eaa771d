"""The README and docs/ run as written: their shell blocks, command by command, in a scratch
checkout.

Every ```bash block of README.md, then of each docs/*.md page in the order `EXPECTED_BLOCKS`
lists them, is run top to bottom unless the line right before its fence is a marker saying
otherwise:

    <!-- readme-test: skip (why) -->             not run (e.g. it needs the reader's own files)
    <!-- readme-test: tracegraph-only (why) -->  of each `a && b && c` line only the `tracegraph`
                                                 commands run (installs and the suite itself not)

`EXPECTED_BLOCKS` pins, per file, which blocks exist and how each is treated, so adding,
dropping or re-marking a block (or adding a page) fails here until the list is updated with
it. The files share one scratch folder and run in that order: a page's examples may use the
database the README's tour and the pages before it made (each page says which).

How a block becomes commands: bash itself decides where a command ends. Lines are gathered
until the text neither ends in a continuation backslash nor fails `bash -n` (bash's own
parser, so an open "..." across lines, `\\$run`, `'` inside "...", and `#` inside a word are
read exactly as bash reads them; shlex differs on the last: `ProfilerStep#1010` would lose its
tail as a comment). Each command then runs on its own under `bash -euo pipefail -c`, so a
failure names its file and line and comes with its own stderr. The blocks use no `cd` and no
shell variables, so nothing is lost by not sharing one shell between commands.

The scratch folder mirrors the checkout: `tmp/repo` is the working directory and
`tmp/shared` links to the shared folder, so `../shared/traces/...` resolves as it does from
the repository root; `tracegraph` comes from this interpreter's bin directory.

Slow: the commands take about 2-3 minutes in all (HTA's own critical-path analysis is ~10-20 s
per `edges --hta` line); they run in the normal suite because the README is the front door and
docs/ the reference a user follows.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import tracegraph
from tracegraph.explorer.keymap import load_keymap

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCS = REPO_ROOT / "docs"
SHARED = REPO_ROOT / ".." / "shared"
TRACES = SHARED / "traces"

INGEST = "Ingest: trace files into a database"
GRAPH = "The graph: what you query"
SCALE = "Scale: many ranks, many files, many edges"
EDGE_SETS = "Edge sets: HTA's graph per release, tracegraph's own, and the diff"
CROSS_RANK = "What bound a step: the cross-rank path, waits, segments and savings"
# Per file (README.md, then every docs/*.md page, in the order they run: later pages use the
# runs and edge sets earlier ones made), its blocks in file order as (heading of the section
# holding the block, how it is treated). A page without shell blocks is listed with none.
EXPECTED_BLOCKS: dict[str, list[tuple[str, str]]] = {
    "README.md": [
        ("Set up and run", "tracegraph-only"),
        ("A tour", "run"),
        ("A tour", "skip"),
    ],
    "docs/ingest.md": [(INGEST, "run"), (INGEST, "skip")],
    "docs/graph.md": [(GRAPH, "run"), (GRAPH, "skip")],
    "docs/edge-sets.md": [(EDGE_SETS, "run")],
    "docs/cross-rank.md": [(CROSS_RANK, "run")],
    "docs/report.md": [("The report: HTA's analyses, exact, and findings", "run")],
    "docs/scale.md": [(SCALE, "run"), (SCALE, "skip")],
    "docs/explorer.md": [("The explorer: a terminal app over the database", "skip")],
    "docs/api.md": [],
    "docs/architecture.md": [],
    "docs/hta-edge-sets.md": [],
    "docs/native-edge-sets.md": [],
    "docs/tui.md": [],
}
MODES = ("run", "skip", "tracegraph-only")
SHELL_LANGUAGES = ("bash", "sh", "shell", "console")
MARKER = re.compile(r"^<!--\s*readme-test:\s*(?P<mode>[\w-]+)\s*(?:\((?P<why>.*)\))?\s*-->\s*$")
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")
COMMAND_TIMEOUT_S = 900

needs_traces = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"real traces not at {TRACES.resolve()}"
)


@dataclass(frozen=True)
class Block:
    """One fenced shell block: where it is, and how the test treats it."""

    heading: str
    mode: str
    first_line: int  # line number, in its file, of the block's first content line
    lines: tuple[str, ...]
    file: str = "README.md"  # relative to the repository root


@dataclass(frozen=True)
class Command:
    """One command as bash reads it (continued and quoted lines joined by their newlines)."""

    line: int  # line in its file where it starts
    text: str
    file: str = "README.md"

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class CommandRun:
    """What one command did."""

    command: Command
    returncode: int
    stdout: str
    stderr: str
    elapsed_s: float


@dataclass
class ReadmeRun:
    """The commands run so far (README.md's, then docs/'s), in order, and the scratch working
    directory."""

    cwd: Path
    runs: list[CommandRun] = field(default_factory=list)


def documented_files() -> list[str]:
    """README.md and every docs/*.md page, relative to the repository root, in the order the
    commands run (`EXPECTED_BLOCKS`'s); a page missing from it comes last, to fail the listing."""
    found = ["README.md", *(f"docs/{p.name}" for p in sorted(DOCS.glob("*.md")))]
    listed = [f for f in EXPECTED_BLOCKS if f in found]
    return listed + [f for f in found if f not in EXPECTED_BLOCKS]


def shell_blocks(text: str, name: str = "README.md") -> list[Block]:
    """Every shell-language fenced block of file `name`, with its section heading and marker
    mode."""
    lines = text.splitlines()
    blocks: list[Block] = []
    heading, inside, lang, start = "", False, "", 0
    for number, line in enumerate(lines, 1):
        fence = FENCE.match(line)
        if inside:
            if line.strip() == "```":
                inside = False
                if lang in SHELL_LANGUAGES:
                    mode = _marker_mode(lines, start - 1, name)
                    body = tuple(lines[start : number - 1])
                    blocks.append(Block(heading, mode, start + 1, body, name))
        elif fence:
            inside, lang, start = True, fence.group("lang"), number
        elif line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif MARKER.match(line):
            after = FENCE.match(lines[number]) if number < len(lines) else None
            assert after and after.group("lang") in SHELL_LANGUAGES, (
                f"{name}:{number}: a readme-test marker not right before a shell fence"
            )
    assert not inside, f"{name}:{start}: a fence that never closes"
    return blocks


def file_blocks(name: str) -> list[Block]:
    """The shell blocks of a file named relative to the repository root."""
    return shell_blocks((REPO_ROOT / name).read_text(encoding="utf-8"), name)


def _marker_mode(lines: list[str], fence_index: int, name: str) -> str:
    """The mode the marker right before the fence gives (0-based index), else "run"."""
    marker = MARKER.match(lines[fence_index - 1]) if fence_index > 0 else None
    if marker is None:
        return "run"
    mode = marker.group("mode")
    assert mode in MODES, f"{name}:{fence_index}: unknown readme-test mode {mode!r} ({MODES})"
    assert marker.group("why"), f"{name}:{fence_index}: say why in the marker: {mode} (why)"
    return mode


def _is_complete(text: str) -> bool:
    """Whether bash parses `text` as whole commands (no open quote, no dangling operator)."""
    if re.search(r"(?<!\\)(\\\\)*\\$", text):  # an odd number of trailing backslashes continues
        return False
    return subprocess.run(["bash", "-n", "-c", text], capture_output=True).returncode == 0


def commands_of(block: Block) -> Iterator[Command]:
    """The block's commands in order; comment-only and blank lines between them are dropped."""
    pending: list[str] = []
    start = block.first_line
    for number, line in enumerate(block.lines, block.first_line):
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            start = number
        pending.append(line)
        if _is_complete("\n".join(pending)):
            yield Command(start, "\n".join(pending), block.file)
            pending = []
    assert not pending, f"{block.file}:{start}: this command never ends for bash: {pending[0]}"


def runnable(block: Block) -> list[Command]:
    """The commands of a block that the test runs, by its mode."""
    if block.mode == "skip":
        return []
    commands = list(commands_of(block))
    if block.mode == "run":
        return commands
    kept = []
    for command in commands:
        parts = [part.strip() for part in re.split(r"\s&&\s", command.text)]
        # the split is textual: an `&&` inside quotes would leave a part bash cannot parse
        assert all(_is_complete(part) for part in parts), (
            f"{command.where}: tracegraph-only takes plain `a && b` chains: {command.text}"
        )
        kept += [
            Command(command.line, p, command.file) for p in parts if p.split()[0] == "tracegraph"
        ]
    return kept


def all_blocks() -> list[Block]:
    """Every shell block of README.md and docs/, in the order their commands run."""
    return [b for name in documented_files() for b in file_blocks(name)]


def test_every_shell_block_is_listed_with_how_it_is_run() -> None:
    """An edit of README.md or docs/ that adds, drops or re-marks a shell block, or adds a page,
    must update EXPECTED_BLOCKS."""
    files = documented_files()
    assert files == list(EXPECTED_BLOCKS), "every docs/*.md page is listed, and only those"
    for name in files:
        blocks = file_blocks(name)
        assert [(b.heading, b.mode) for b in blocks] == EXPECTED_BLOCKS[name], name
    setup = runnable(file_blocks("README.md")[0])
    assert [c.text for c in setup] == ["tracegraph demo --no-tui"], "the setup block's demo runs"
    blocks = all_blocks()
    assert all(runnable(b) for b in blocks if b.mode == "run")
    # each command runs in a shell of its own, so nothing may rely on state a line leaves behind
    stateful = [
        f"{c.where}: {c.text}"
        for b in blocks
        for c in runnable(b)
        if re.match(r"(cd|pushd|export|source|\.)\s|\w+=", c.text)
    ]
    assert not stateful, "a command that changes the shell's state: " + "; ".join(stateful)


def test_markers_are_read_only_right_before_a_shell_fence() -> None:
    """A marker sets its block's mode; a stray, unknown or unexplained one is an error."""
    fence = ["```bash", "tracegraph runs run.kuzu", "```"]
    readme = ["## A", *fence, "", "## B", "<!-- readme-test: skip (needs your files) -->", *fence]
    assert [(b.heading, b.mode, b.first_line) for b in shell_blocks("\n".join(readme))] == [
        ("A", "run", 3),
        ("B", "skip", 9),
    ]
    for bad, message in (
        (["<!-- readme-test: skip (why) -->", "", *fence], "not right before a shell fence"),
        (["<!-- readme-test: sometimes (why) -->", *fence], "unknown readme-test mode"),
        (["<!-- readme-test: skip -->", *fence], "say why"),
    ):
        with pytest.raises(AssertionError, match=message):
            shell_blocks("\n".join(bad))
    with pytest.raises(AssertionError, match="docs/x.md:1: a fence that never closes"):
        shell_blocks("```bash\ntracegraph runs run.kuzu", "docs/x.md")


def test_commands_split_the_way_bash_reads_them() -> None:
    """Quoted newlines, continuations, `\\$`, `#` inside a word and trailing comments."""
    block = Block(
        "h",
        "run",
        10,
        (
            "# a comment with an apostrophe: it's",
            "tracegraph query run.kuzu \"MATCH (o:Op) WHERE o.run = \\$run AND o.name = 'x'",
            '  RETURN o.rank" --param run=ddp',
            "",
            "tracegraph report run.kuzu --step ProfilerStep#1010 --format json",
            "tracegraph edges run.kuzu --native \\",
            "  --run control   # a trailing comment",
        ),
    )
    assert [(c.line, c.text.count("\n")) for c in commands_of(block)] == [(11, 1), (14, 0), (15, 1)]
    with pytest.raises(AssertionError, match="docs/x.md:10: this command never ends"):
        list(commands_of(Block("h", "run", 10, ('tracegraph query x "MATCH',), "docs/x.md")))


def _scratch_env(root: Path) -> dict[str, str]:
    """This interpreter's `tracegraph` first on PATH; a cache of the scratch's own (traces named
    without --db are ingested there) that sees the HTA environments where the CLI looks."""
    from tracegraph.ingest.edgesets.hta.env import default_cache_root

    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    hta = default_cache_root()
    env["XDG_CACHE_HOME"] = str(root / "cache")
    (root / "cache" / "tracegraph").mkdir(parents=True)
    if hta.is_dir():
        (root / "cache" / "tracegraph" / hta.name).symlink_to(hta, target_is_directory=True)
    return env


def _ensure_hta_envs(commands: list[Command]) -> None:
    """Build (or find) the HTA environments the `--hta SPEC` lines use, where the CLI looks.

    Done before the commands so a first build (~1 min each, needs PyPI) is not charged to one
    documented line, and so a machine without PyPI skips as the HTA tests do.
    """
    from tracegraph.ingest.edgesets.errors import HtaEnvError
    from tracegraph.ingest.edgesets.hta.env import default_cache_root, ensure_env

    specs = sorted({m for c in commands for m in re.findall(r"--hta\s+(\S+)", c.text)})
    for spec in specs:
        try:
            ensure_env(spec, default_cache_root())
        except HtaEnvError as exc:
            if "installing" in str(exc):
                pytest.skip(f"HTA environment not installable here (PyPI unreachable?): {exc}")
            raise


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory: pytest.TempPathFactory) -> ReadmeRun:
    """Run the runnable commands of README.md and docs/ in order in a scratch checkout; stop at
    a failure (later lines build on earlier ones)."""
    if not TRACES.is_dir():
        pytest.skip(f"real traces not at {TRACES.resolve()}")
    commands = [c for b in all_blocks() for c in runnable(b)]
    _ensure_hta_envs(commands)
    root = tmp_path_factory.mktemp("readme")
    (root / "repo").mkdir()
    (root / "shared").symlink_to(SHARED.resolve(), target_is_directory=True)
    result = ReadmeRun(root / "repo")
    env = _scratch_env(root)
    for command in commands:
        began = time.perf_counter()
        try:
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", command.text],
                cwd=result.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
            )
            returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as exc:
            returncode, stdout, stderr = -1, _text(exc.stdout), _text(exc.stderr)
            stderr += f"\n(timed out after {COMMAND_TIMEOUT_S} s)"
        elapsed = time.perf_counter() - began
        result.runs.append(CommandRun(command, returncode, stdout, stderr, elapsed))
        print(f"{command.where}: {elapsed:6.1f} s  {command.text.splitlines()[0]}")
        if returncode != 0:
            break
    return result


def _text(output: bytes | str | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def _tail(text: str, chars: int = 4000) -> str:
    return text if len(text) <= chars else "…" + text[-chars:]


@needs_traces
def test_readme_commands_run_as_written(readme_run: ReadmeRun) -> None:
    """Slow (~2-3 min, see the module docstring): every runnable line of README.md and docs/
    exits 0, prints no traceback, and no worked query comes back empty."""
    failed = [r for r in readme_run.runs if r.returncode != 0]
    assert not failed, "\n".join(
        f"{r.command.where}: exited {r.returncode}: {r.command.text}\n"
        f"--- stderr ---\n{_tail(r.stderr)}\n--- stdout ---\n{_tail(r.stdout, 1500)}"
        for r in failed
    )
    surprises = []
    for r in readme_run.runs:
        if "Traceback (most recent call last)" in r.stderr:
            surprises.append(f"{r.command.where}: a traceback\n{_tail(r.stderr)}")
        words = r.command.text.split()
        # a worked example that prints an empty table shows the reader nothing
        if words[1:2] == ["query"] and re.search(r"^0 row\(s\)", r.stderr, re.MULTILINE):
            surprises.append(f"{r.command.where}: no rows: {r.command.text}")
    assert not surprises, "\n".join(surprises)


def _printed_step_table(stdout: str) -> set[tuple[int, str]]:
    """(rank, step) rows of the demo's "step times" table."""
    section = stdout.split("\nstep times (", 1)[1].split("\ncollectives (", 1)[0]
    return {(int(r), s) for r, s in re.findall(r"^\s+(\d+)\s+(ProfilerStep#\d+)\s", section, re.M)}


@needs_traces
def test_the_demo_prints_every_step(readme_run: ReadmeRun) -> None:
    """The demo's step table lists every step of every rank, and its cross-rank section every
    step: checked against the Step nodes it wrote and the size it says it generated."""
    demos = [r for r in readme_run.runs if r.command.text.startswith("tracegraph demo")]
    assert demos, "no `tracegraph demo` line ran"
    rows = tracegraph.open(readme_run.cwd / "tracegraph-demo.kuzu").query(
        "MATCH (s:Step) WHERE s.run = $run RETURN s.rank AS rank, s.name AS name", run="demo"
    )
    stored = set(zip(rows["rank"].to_pylist(), rows["name"].to_pylist(), strict=True))
    for demo in demos:
        where = demo.command.where
        size = re.search(r"synthetic traces of (\d+) ranks x (\d+) steps", demo.stdout)
        assert size, f"{where}: the demo no longer says its size\n{_tail(demo.stdout)}"
        assert len(stored) == int(size[1]) * int(size[2])
        printed = _printed_step_table(demo.stdout)
        assert printed == stored, (
            f"{where}: the step table lists {len(printed)} of {len(stored)} (rank, step) rows; "
            f"missing {sorted(stored - printed)}"
        )
        verdicts = set(re.findall(r"^\s+(ProfilerStep#\d+): across ranks", demo.stdout, re.M))
        assert verdicts == {name for _, name in stored}, f"{where}: cross-rank steps {verdicts}"


def test_every_binding_id_the_docs_show_is_accepted(tmp_path: Path) -> None:
    """The keymap examples of README.md and docs/ (`"console.run_query" = "ctrl+j"`, or as JSON)
    load as a TOML keymap, each file's on its own."""
    shown = 0
    for name in documented_files():
        text = (REPO_ROOT / name).read_text(encoding="utf-8")
        examples = re.findall(r'"(\w+\.\w+)"\s*[=:]\s*"([^"]+)"', text)
        if not examples:
            continue
        keys = tmp_path / f"{Path(name).stem}.toml"
        keys.write_text("".join(f'"{binding}" = "{key}"\n' for binding, key in examples))
        assert load_keymap(keys) == dict(examples), name
        shown += len(examples)
    assert shown, "neither README.md nor docs/ shows a keymap example"
