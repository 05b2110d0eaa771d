"""The only module that imports kuzu: a small store seam, and all-or-nothing writes.

A write never touches the live database file. It copies the file to a staging file beside it,
loads into the copy, closes it (which checkpoints), and atomically renames it over the original.
A failure or a kill at any moment therefore leaves the original exactly as it was; stale staging
files are removed by the next writer, which holds an exclusive lock on `DB.lock`.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import kuzu
import pyarrow as pa

from . import schema
from .cypher_text import parameter_names
from .errors import DatabaseBusy, IngestError, TracegraphError
from .memory import release_freed

DEFAULT_TIMEOUT_MS = 60_000
READER_BUFFER_POOL = 2 << 30
DEFAULT_REGION = 1 << 43  # Kuzu's default max_db_size (8 TB): a writer's file may grow
MIN_READER_REGION = 1 << 30
KUZU_VERSION = kuzu.__version__


# Refuses a statement before it reaches Kuzu (raises); a read-only store given one checks each.
StatementCheck = Callable[[str, Mapping[str, object]], None]


class QueryError(TracegraphError):
    """A query the database rejected (syntax, binding, missing parameter, timeout)."""


class ReadOnlyStoreError(TracegraphError):
    """A write asked of a store opened read-only (on such a connection Kuzu 0.11.3 crashes on
    some, e.g. BEGIN TRANSACTION)."""


@dataclass(frozen=True)
class ResultSet:
    columns: list[str]
    table: pa.Table
    elapsed_s: float
    truncated: bool = False


def unused_parameters(cypher: str, params: Mapping[str, object]) -> list[str]:
    """The names in `params` that `cypher` does not use (a notebook passes run= out of habit:
    the read surfaces drop them with a warning; `GraphStore.run` refuses them)."""
    return sorted(set(params) - query_parameters(cypher))


def query_parameters(cypher: str) -> set[str]:
    """Names of the `$parameters` a query uses (not `$x` inside strings, names or comments)."""
    return parameter_names(cypher)


class GraphStore:
    """One open database; `run` answers queries as Arrow tables. A read-only store refuses
    every write method, and with a `check` runs no statement the check refuses."""

    def __init__(
        self,
        path: Path,
        read_only: bool = True,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        check: StatementCheck | None = None,
    ):
        self.path = Path(path)
        self.read_only = read_only
        self._check = check
        try:
            # Kuzu reserves 80% of RAM for its buffer pool by default, which makes every open
            # slow (and limits a process to ~20 open databases); readers need far less.
            pool = READER_BUFFER_POOL if read_only else 0  # 0: Kuzu's default
            # Kuzu also reserves 8 TB of address space per open database for the file's pages
            # (a process holds at most 15); a reader's file cannot grow: a region a few times
            # its size is ample, and one too small fails at the open, not in a query
            region = _reader_region(self.path) if read_only else DEFAULT_REGION
            self._db = kuzu.Database(
                str(self.path), read_only=read_only, buffer_pool_size=pool, max_db_size=region
            )
        except RuntimeError as exc:
            raise IngestError(f"{self.path}: cannot open database ({_short(exc)})") from exc
        self._conn = kuzu.Connection(self._db)
        self.swapped = False  # a staging copy: set once it has replaced the database
        self.paused = False  # closed by `commit_and_pause` until `resume`
        self._timeout_ms = timeout_ms
        if timeout_ms:
            self._conn.set_query_timeout(timeout_ms)

    def run(
        self, cypher: str, params: Mapping[str, object] | None = None, limit: int | None = None
    ) -> ResultSet:
        """Execute one statement; unknown or missing parameters are errors, not NULLs."""
        params = dict(params or {})
        if self._check is not None:
            self._check(cypher, params)
        used = query_parameters(cypher)
        unknown = sorted(set(params) - used)
        missing = sorted(used - set(params))
        if unknown:
            raise QueryError(f"unknown parameter(s) {unknown}; the query uses {sorted(used)}")
        if missing:
            raise QueryError(f"missing parameter(s) {missing}")
        self.resume()
        start = time.perf_counter()
        try:
            result = self._conn.execute(cypher, params)
        except RuntimeError as exc:
            raise QueryError(_short(exc)) from exc
        if isinstance(result, list):
            result = result[-1]
        table = result.get_as_arrow()
        truncated = False
        if limit is not None and table.num_rows > limit:
            table, truncated = table.slice(0, limit), True
        return ResultSet(table.column_names, table, time.perf_counter() - start, truncated)

    def copy(self, label: str, data: pa.Table, pair: tuple[str, str] | None = None) -> None:
        """Bulk-load an Arrow table already in the label's load order."""
        self._writable("COPY")
        if data.num_rows == 0:
            return
        options = f" (from='{pair[0]}', to='{pair[1]}')" if pair else ""
        self.resume()
        try:
            self._conn.execute(f"COPY {label} FROM $data{options}", {"data": data})
        except RuntimeError as exc:
            raise IngestError(f"{self.path}: loading {label} failed ({_short(exc)})") from exc

    def copy_edges(self, label: str, edges: pa.Table) -> int:
        """COPY edges carrying from_label/to_label columns into each FROM/TO pair of the table."""
        total = 0
        for pair, part in edge_pairs(label, edges):
            self.copy(label, part, pair=pair)
            total += part.num_rows
        return total

    def copy_files(
        self, label: str, paths: Sequence[Path], pair: tuple[str, str] | None = None
    ) -> None:
        """Bulk-load Parquet files already in the label's load order (as `copy`'s tables)."""
        self._writable("COPY")
        if not paths:
            return
        files = ", ".join(f"'{_literal(str(p))}'" for p in paths)
        options = f" (from='{pair[0]}', to='{pair[1]}')" if pair else ""
        self.resume()
        try:
            self._conn.execute(f"COPY {label} FROM [{files}]{options}")
        except RuntimeError as exc:
            raise IngestError(f"{self.path}: loading {label} failed ({_short(exc)})") from exc

    def begin(self) -> None:
        """Start a transaction: COPYs inside one commit together, much faster than one by one."""
        self._writable("BEGIN TRANSACTION")
        self._conn.execute("BEGIN TRANSACTION")

    def commit(self) -> None:
        self._writable("COMMIT")
        if not self.paused:  # paused: all is committed
            self._conn.execute("COMMIT")

    def commit_and_pause(self) -> None:
        """Commit what the open transaction holds and close the database until `resume` (which
        a query or COPY calls itself). Only for a staging copy, whose swap (not the commit)
        makes the write atomic.

        A transaction keeps its rows in memory until it commits, a connection keeps every Arrow
        table it was given for a COPY until it closes, and what Kuzu holds for an open database
        grows with it (Kuzu 0.11.3): an ingest that pauses between batches holds one batch, not
        the whole run, and while it prepares ranks, Kuzu holds nothing."""
        self._writable("COMMIT")
        if self.paused:
            return
        try:
            self._conn.execute("COMMIT")
            self._conn.close()
            self._db.close()
        except RuntimeError as exc:
            raise IngestError(f"{self.path}: writing the database failed ({_short(exc)})") from exc
        self.paused = True
        release_freed()  # what Kuzu freed

    def resume(self) -> None:
        """Reopen the database `commit_and_pause` closed, in a new transaction (no-op if open)."""
        if not self.paused:
            return
        try:
            self._db = kuzu.Database(str(self.path), read_only=False, buffer_pool_size=0)
            self._conn = kuzu.Connection(self._db)
            if self._timeout_ms:
                self._conn.set_query_timeout(self._timeout_ms)
            self._conn.execute("BEGIN TRANSACTION")
        except RuntimeError as exc:
            raise IngestError(f"{self.path}: writing the database failed ({_short(exc)})") from exc
        self.paused = False

    def create_schema(self) -> None:
        """Create the tables a database lacks, and the properties added since an older
        tracegraph made it (NULL on its rows)."""
        self._writable("CREATE")
        self.resume()
        for statement in schema.ddl():
            self._conn.execute(statement)
        for table in schema.NODE_TABLES:
            for statement in schema.added_columns(table, self.properties(table.label)):
                self._conn.execute(statement)

    def has_table(self, label: str) -> bool:
        """Whether this database holds table `label` (one made by an older tracegraph may not)."""
        return label in self.run("CALL show_tables() RETURN name").table["name"].to_pylist()

    def properties(self, label: str) -> set[str]:
        """The property names of table `label` as this database holds it."""
        table = self.run(f"CALL table_info('{label}') RETURN name").table
        return set(table["name"].to_pylist())

    def recreate_rel_table(self, label: str) -> None:
        """Drop relationship table `label` and create it empty (in the open write): far cheaper
        than deleting most of its rows, which Kuzu 0.11.3 does at ~7 µs a row."""
        self._writable("DROP TABLE")
        statement = next(s for s in schema.ddl() if f"REL TABLE IF NOT EXISTS {label}(" in s)
        self.resume()
        self._conn.execute(f"DROP TABLE {label}")
        self._conn.execute(statement)

    def _writable(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyStoreError(f"{self.path}: {what} refused: the database is open read-only")

    def interrupt(self) -> None:
        if not self.paused:  # paused: nothing runs
            self._conn.interrupt()

    def close(self) -> None:
        self._conn.close()
        self._db.close()

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _reader_region(path: Path) -> int:
    """The address space a read-only open reserves for the file's pages: a power of two at
    least four times the file's size, and at least 1 GiB."""
    try:
        size = path.stat().st_size if path.is_file() else 0
    except OSError:
        size = 0
    return max(MIN_READER_REGION, 1 << (4 * size).bit_length())


def edge_pairs(label: str, edges: pa.Table) -> Iterator[tuple[tuple[str, str], pa.Table]]:
    """Edges carrying from_label/to_label columns, split by the rel table's FROM/TO pairs, each
    part in the table's load order."""
    import pyarrow.compute as pc  # ~80 ms to import: readers never need it

    rel = schema.REL_BY_LABEL[label]
    for src, dst in rel.pairs:
        mask = pc.and_(pc.equal(edges["from_label"], src), pc.equal(edges["to_label"], dst))
        yield (src, dst), schema.conform(edges.filter(mask), rel)


def _literal(text: str) -> str:
    """`text` inside a single-quoted Cypher string."""
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())


@contextmanager
def write_transaction(path: Path) -> Iterator[GraphStore]:
    """A writable copy of the database at `path`, swapped in only if the block succeeds.

    The database is the file `path` names: through a symbolic link, the link's target is what
    changes (the link stays). Its permission bits are kept, and a file the user made read-only
    is refused. Errors name `path` as given, never the hidden staging copy.
    """
    given = Path(path)
    target = _writable_target(given)
    with _exclusive_lock(target, given):
        if problem := recovery_problem(given):
            # the copy would leave them behind, and a later read-write open would replay them
            # into the new file
            raise IngestError(problem)
        _remove_stale_staging(target)
        staging = target.with_name(f".{target.name}.staging-{os.getpid()}")
        store: GraphStore | None = None
        committed = False
        try:
            with _named(given, staging):
                if target.exists():
                    shutil.copyfile(target, staging)
                    shutil.copymode(target, staging)
                store = GraphStore(staging, read_only=False, timeout_ms=0)
                store.create_schema()
                store.begin()
            with _renamed(given, staging):
                yield store
            with _named(given, staging):
                store.commit()
                store.close()
                if _wal(staging).exists():
                    raise IngestError(f"{given}: staging database was not checkpointed")
                _fsync(staging)
                os.replace(staging, target)
                store.swapped = True
                _fsync(target.parent)
            committed = True
        finally:
            if not committed:
                if store is not None:
                    try:
                        store.close()
                    except RuntimeError:
                        pass
                for leftover in (staging, _wal(staging)):
                    leftover.unlink(missing_ok=True)


def _writable_target(given: Path) -> Path:
    """The file to write for the path the user gave, or a one-line IngestError why not."""
    target = Path(os.path.realpath(given))
    if target.is_dir():
        raise IngestError(f"{given}: is a folder, not a database file")
    parent = target.parent
    if parent.exists() and not parent.is_dir():
        raise IngestError(f"{given}: {parent} is a file, not a folder")
    if target.exists() and not target.stat().st_mode & 0o222:
        raise IngestError(f"{given}: the database is read-only (make it writable to change it)")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IngestError(f"{given}: cannot create {parent} ({exc.strerror})") from exc
    return target


@contextmanager
def _renamed(given: Path, staging: Path) -> Iterator[None]:
    """The store's one-line errors from the work inside a transaction, naming the database the
    user gave instead of its staging copy; every other error as it was raised."""
    try:
        yield
    except IngestError as exc:
        if str(staging) not in str(exc):
            raise
        raise IngestError(str(exc).replace(str(staging), str(given))) from exc


@contextmanager
def _named(given: Path, staging: Path) -> Iterator[None]:
    """Store and file-system errors as one line naming the database the user gave."""
    try:
        with _renamed(given, staging):
            yield
    except OSError as exc:
        raise IngestError(f"{given}: writing the database failed ({exc.strerror})") from exc
    except RuntimeError as exc:
        raise IngestError(f"{given}: writing the database failed ({_short(exc)})") from exc


def _wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def recovery_files(db: Path) -> list[Path]:
    """Kuzu's write-ahead log and shadow pages beside the database file `db` names (through a
    link, beside its target). tracegraph never leaves them there (a write is a checkpointed
    copy swapped in), so they are stale: a checkpoint that failed on a read-only connection
    leaves both, and after it Kuzu opens the file read-only nowhere and read-write only by
    replaying them into it."""
    target = Path(os.path.realpath(db))
    found = (target.with_name(target.name + suffix) for suffix in (".wal", ".shadow"))
    return [path for path in found if os.path.lexists(path)]


def recovery_problem(given: Path) -> str | None:
    """Why `given` cannot be used while stale recovery files lie beside it, and what to do;
    None when there are none."""
    stale = recovery_files(given)
    if not stale:
        return None
    names = " and ".join(path.name for path in stale)
    return (
        f"{given}: stale {names} beside it (left by a checkpoint that failed, or a program that "
        f"opened it for writing outside tracegraph); if no program has it open, remove them: "
        f"the database file is as tracegraph last wrote it"
    )


@contextmanager
def _exclusive_lock(path: Path, given: Path | None = None) -> Iterator[None]:
    lock_path = path.with_name(path.name + ".lock")
    try:
        handle = open(lock_path, "a+")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise IngestError(f"{given or path}: cannot write beside it ({exc.strerror})") from exc
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            busy = f"{given or path}: another tracegraph process is writing it"
            raise DatabaseBusy(busy) from exc
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def wait_for_writer(db: Path, timeout_s: float, waiting: Callable[[], None]) -> None:
    """Return once no process holds `db`'s write lock (at once if none does); `waiting` is
    called once if it has to wait. A writer still there after `timeout_s` is a DatabaseBusy."""
    lock_path = Path(os.path.realpath(db) + ".lock")
    deadline = time.monotonic() + timeout_s
    told = False
    while True:
        try:
            with open(lock_path, "rb") as handle:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return
        except FileNotFoundError:
            return  # never written: no writer
        except BlockingIOError:
            pass
        if time.monotonic() >= deadline:
            raise DatabaseBusy(
                f"{db}: another tracegraph process is still writing it after {timeout_s:.0f} s"
            )
        if not told:
            waiting()
            told = True
        time.sleep(WRITER_POLL_S)


WRITER_POLL_S = 0.05


def _remove_stale_staging(path: Path) -> None:
    """Staging files left by a killed writer (we hold the lock, so none is live)."""
    for leftover in path.parent.glob(f".{path.name}.staging-*"):
        leftover.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
