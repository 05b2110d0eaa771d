"""The run archive is checked against the content hashes its writers recorded in the database:
a rank's Parquet, an archived source trace or an edge set's copy swapped with another's valid
file, or truncated, is a one-line error naming it (exit 2) in every reader, never an answer
from other data; a deleted one is an error, or for an edge set's copy (which only speeds the
diff up) the database's answer. The hashes are taken as the files are written, in the write
that records them, serially and by workers; a database an older tracegraph made has none: its
runs ask to be ingested again, and a new ingest adds the properties."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tracegraph.explorer.cli import main
from tracegraph.ingest import archive
from tracegraph.ingest.edgesets import copies
from tracegraph.ingest.edgesets.hta.inputs import rank_inputs, read_run
from tracegraph.ingest.edgesets.native.edge_set import build_native_edge_set
from tracegraph.ingest.errors import TracegraphError
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore

from ..conftest import TRACES, needs_traces

DDP = TRACES / "cpu_ddp_2r"  # two ranks, a file each
PLAIN = TRACES / "hta/call_stack/backward_thread.json"  # a plain JSON file: kept zstd-compressed
SETS = ("native", "native:cross-rank")  # what `edges --native` writes of a 2-rank run

pytestmark = needs_traces


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("archive") / "ddp.kuzu"
    ingest([DDP], db, IngestOptions(run="ddp"))
    build_native_edge_set(db)
    return db


def copied(db: Path, to: Path) -> tuple[Path, Path]:
    """A copy of the database with its archive, and the copy's run folder."""
    to.mkdir(exist_ok=True)
    new = to / db.name
    shutil.copyfile(db, new)
    shutil.copytree(archive.archive_root(db), archive.archive_root(new))
    (folder,) = [p for p in archive.archive_root(new).iterdir() if p.name.startswith("run-")]
    return new, folder


def tamper(path: Path, how: str, other: Path) -> None:
    if how == "swapped":  # another file of the same kind, valid in itself
        shutil.copyfile(other, path)
    elif how == "truncated":
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size // 2)
    else:
        path.unlink()


def cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


COMMANDS: dict[str, Callable[[Path], list[object]]] = {
    "report": lambda db: ["report", db],
    "diff": lambda db: ["diff", db, *SETS],
    "export": lambda db: ["export", db, "--perfetto", db.with_name("trace.json")],
    "edges --native": lambda db: ["edges", db, "--native"],
}


def assert_one_error(code: int, err: str, *parts: str) -> None:
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("tracegraph: error: "), err
    for part in parts:
        assert part in err, (part, err)


CHANGED = "does not match what ingest recorded (changed since ingest); re-ingest the run"


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("how", ["swapped", "truncated"])
def test_a_changed_rank_file_is_an_error_in_every_reader(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str, command: str
) -> None:
    db, folder = copied(built, tmp_path)
    tamper(folder / "rank-0.parquet", how, folder / "rank-1.parquet")
    code, _, err = cli(capsys, *COMMANDS[command](db))
    assert_one_error(code, err, f"{folder / 'rank-0.parquet'}: {CHANGED}")


@pytest.mark.parametrize("command", ["report", "export", "edges --native"])
def test_a_deleted_rank_file_is_an_error(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    db, folder = copied(built, tmp_path)
    tamper(folder / "rank-0.parquet", "deleted", folder / "rank-1.parquet")
    code, _, err = cli(capsys, *COMMANDS[command](db))
    assert_one_error(code, err, str(folder), "lacks rank", "0")


def test_the_diff_without_a_rank_file_describes_edges_from_the_database(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """(A CPU-only run's node table without kernels made this a traceback.)"""
    db, folder = copied(built, tmp_path)
    code, want, _ = cli(capsys, *COMMANDS["diff"](db))
    assert code == 0 and want.strip(), want
    tamper(folder / "rank-0.parquet", "deleted", folder / "rank-1.parquet")
    code, got, err = cli(capsys, *COMMANDS["diff"](db))
    assert (code, got) == (0, want), err


def copy_file(db: Path, folder: Path, name: str) -> Path:
    """The Parquet copy of edge set `name`, by the key its EdgeSet row gives."""
    with GraphStore(db) as store:
        at = store.run(
            "MATCH (e:EdgeSet) WHERE e.name = $name RETURN e.created_at AS at", {"name": name}
        ).table["at"][0]
    return copies.copy_path(folder, copies.copy_key(0, name, at.as_py()))


@pytest.mark.parametrize("how", ["swapped", "truncated"])
def test_a_changed_edge_set_copy_is_an_error_in_the_diff(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    db, folder = copied(built, tmp_path)
    first, other = (copy_file(db, folder, name) for name in SETS)
    assert first.is_file() and other.is_file()
    tamper(first, how, other)
    code, _, err = cli(capsys, *COMMANDS["diff"](db))
    assert_one_error(
        code, err, f"{first}: does not match what its edge set's build recorded", "tracegraph edges"
    )


def test_a_deleted_edge_set_copy_gives_the_databases_diff(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, folder = copied(built, tmp_path)
    code, want, _ = cli(capsys, *COMMANDS["diff"](db))
    for name in SETS:
        copy_file(db, folder, name).unlink()
    code, got, err = cli(capsys, *COMMANDS["diff"](db))
    assert (code, got) == (0, want), err


@pytest.mark.parametrize("how", ["swapped", "truncated", "deleted", "listed the other way"])
def test_a_changed_source_copy_is_an_error_before_hta_reads_it(
    built: Path, tmp_path: Path, how: str
) -> None:
    """`edges --hta` hands HTA the archived bytes of each trace (`rank_inputs`): a copy or a
    list of copies changed since the ingest stops the build, naming the file."""
    db, folder = copied(built, tmp_path / "db")
    sources, manifest = folder / archive.SOURCES, folder / archive.MANIFEST
    if how == "listed the other way":
        listed = json.loads(manifest.read_text())
        manifest.write_text(json.dumps(dict(zip(listed, reversed(listed.values()), strict=True))))
        changed, problem = manifest, CHANGED
    else:
        changed = sources / "0.json.gz"
        tamper(changed, how, sources / "1.json.gz")
        problem = "is gone; re-ingest the run" if how == "deleted" else CHANGED
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(TracegraphError) as raised:
        rank_inputs(read_run(db, None), work)
    assert str(raised.value).startswith(f"{changed}: ") and problem in str(raised.value)
    assert "\n" not in str(raised.value)


def test_unchanged_archives_read_as_before(built: Path, tmp_path: Path) -> None:
    db, folder = copied(built, tmp_path / "db")
    work = tmp_path / "work"
    work.mkdir()
    inputs = rank_inputs(read_run(db, None), work)
    assert [i.file.read_bytes() for i in inputs] == [
        (folder / archive.SOURCES / f"{r}.json.gz").read_bytes() for r in (0, 1)
    ]


def recorded(db: Path) -> tuple[Path, dict[str, str] | None]:
    with GraphStore(db) as store:
        kept = archive.run_archive(db, store, 0)
    assert kept is not None
    return kept.folder, None if kept.hashes is None else dict(kept.hashes)


def files_of(folder: Path) -> dict[str, str]:
    """Each file of a run folder but the edge-set copies, by name there: its sha256."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.parent.name != copies.FOLDER
    }


@pytest.mark.parametrize(
    ("traces", "jobs", "sources"),
    [(DDP, 1, ["0.json.gz", "1.json.gz"]), (DDP, 2, ["0.json.gz", "1.json.gz"]),
     (PLAIN, 1, ["0.json.zst"])],
    ids=["in-process", "workers", "plain-json"],
)  # fmt: skip
def test_ingest_records_the_hash_of_every_archive_file(
    tmp_path: Path, traces: Path, jobs: int, sources: list[str]
) -> None:
    """Written in this process or by workers (`--jobs 2`: each writes its ranks' files), a
    gzipped source kept as it is, a plain one compressed."""
    db = tmp_path / "run.kuzu"
    ingest([traces], db, IngestOptions(run="r", jobs=jobs))
    folder, hashes = recorded(db)
    assert hashes == files_of(folder)
    assert {f"{archive.SOURCES}/{name}" for name in sources} | {archive.MANIFEST} <= set(hashes)


def test_an_edge_set_records_the_hash_of_its_copy(built: Path) -> None:
    folder, _ = recorded(built)
    with GraphStore(built) as store:
        sets = store.run("MATCH (e:EdgeSet) RETURN e.name AS name, e.copy_hash AS h").table
    assert sorted(sets["name"].to_pylist()) == sorted(SETS)
    for name, digest in zip(sets["name"].to_pylist(), sets["h"].to_pylist(), strict=True):
        assert digest == hashlib.sha256(copy_file(built, folder, name).read_bytes()).hexdigest()


def test_a_database_of_an_older_tracegraph_asks_for_a_new_ingest(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its runs hold no hashes (here: the properties dropped); the next write adds them (NULL
    on the old rows), so another run can be ingested and read."""
    db, folder = copied(built, tmp_path)
    with GraphStore(db, read_only=False) as store:
        store.run("ALTER TABLE Run DROP archive_hashes")
        store.run("ALTER TABLE EdgeSet DROP copy_hash")
    for command in ("report", "diff"):
        code, _, err = cli(capsys, *COMMANDS[command](db))
        assert_one_error(code, err, f"{folder}: ", "older tracegraph", "re-ingest the run")
    ingest([DDP], db, IngestOptions(run="again"))
    code, out, err = cli(capsys, "report", db, "--run", "again")
    assert code == 0 and out, err
    code, _, err = cli(capsys, "report", db, "--run", "ddp")
    assert_one_error(code, err, "older tracegraph")
