"""Each rank's frame source for the native builder: from the run's archive (written at ingest),
else, for a run ingested before archives existed, from the cache or its re-read file.

A rank file is re-read with `parse_file` as at ingest (`reread_ranks`: a merged file once for all
its ranks, with the ingest's pid → rank map if its pids name no rank); a rank whose event count
differs from the database's fails the build (the file changed since the ingest). `file_events`
re-reads a rank from the archived copy of its file, for what the archive's rows leave out (args).
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from ...archive import RunArchive, read_rank, source_copy
from ...parse import RankTrace, parse_file
from ...parse_options import ParseOptions
from ..errors import EdgeSetError
from .cache import load_sources, store_sources
from .frame import FrameSource, frame_source

REREAD_LIMIT = 1 << 62


def rank_sources(
    db: Path,
    files: dict[int, str],
    counts: dict[int, int],
    pid_ranks: dict[int, int],
    archive: RunArchive | None = None,
) -> list[FrameSource]:
    """Each rank's frame source: from the run's archive, else (a run ingested before archives
    existed) from the cache, else re-read from its file (and cached)."""
    if archive is not None:
        archived = {rank: read_rank(archive, rank) for rank in sorted(files)}
        missing = [rank for rank, rows in archived.items() if rows is None]
        if missing:
            raise EdgeSetError(
                f"{archive.folder}: the run's archive lacks rank(s) {missing[:5]}; re-ingest "
                "the run"
            )
        return [FrameSource(rank, rows) for rank, rows in archived.items() if rows is not None]
    by_file: dict[str, list[int]] = {}
    for rank, file in sorted(files.items()):
        by_file.setdefault(file, []).append(rank)
    out: list[FrameSource] = []
    for file, ranks in by_file.items():
        path = Path(file)
        if not path.is_file():
            raise EdgeSetError(f"{file}: source trace of rank(s) {ranks} is gone")
        sources = load_sources(db, path)
        if sources is None:
            sources = [frame_source(t) for t in reread_ranks(path, ranks, counts, pid_ranks)]
            store_sources(db, path, sources)
        found = {s.rank: s for s in sources}
        if len(ranks) == 1 and len(sources) == 1:
            found = {ranks[0]: replace(sources[0], rank=ranks[0])}
        for rank in ranks:
            if rank not in found:
                raise EdgeSetError(f"{file}: re-reading it found no events of rank {rank}")
            out.append(found[rank])
    return out


def reread_ranks(
    path: Path, ranks: list[int], counts: dict[int, int], pid_ranks: dict[int, int]
) -> list[RankTrace]:
    """The file's ranks as at ingest; a rank whose event count changed fails the build.

    Read as the ingest read it: a one-rank file as the rank the database gives it (`--rank`
    over a missing or unusable distributedInfo), pids by the ingest's map, and no size limit
    (the ingest already accepted the file, perhaps with --max-json-gb)."""
    options = ParseOptions(
        rank=ranks[0] if len(ranks) == 1 else None,
        rank_of_pid=pid_ranks,
        max_json_bytes=REREAD_LIMIT,
        max_gzip_ratio=0.0,
    )
    traces = parse_file(path, options)
    if len(ranks) == 1 and len(traces) == 1:
        traces = [_as_rank(traces[0], ranks[0])]
    for trace in traces:
        labels = trace.events["label"].to_numpy(zero_copy_only=False)
        n = int(np.isin(labels, ["Op", "Runtime", "Kernel"]).sum())
        if trace.rank in counts and n != counts[trace.rank]:
            raise EdgeSetError(
                f"{trace.file}: re-reading it gave {n} events for rank {trace.rank}, the "
                f"database holds {counts[trace.rank]}; re-ingest the run"
            )
    return traces


def _as_rank(trace: RankTrace, rank: int) -> RankTrace:
    if trace.rank == rank:
        return trace
    return RankTrace(
        trace.file,
        rank,
        trace.events,
        trace.world_size,
        trace.schema_version,
        trace.base_time_ns,
        trace.device,
        trace.distributed_info,
    )


def file_events(
    archive: RunArchive | None,
    files: dict[int, str],
    counts: dict[int, int],
    pid_ranks: dict[int, int],
    rank: int,
) -> dict[int, pa.Table]:
    """The parsed events (`parse_file`'s columns, args included) of `rank` and of every rank
    sharing its file, by rank, re-read as at ingest from the run's archived copy of the file
    (else from the file itself); `files` and `counts` are every rank's."""
    file = files[rank]
    sharing = sorted(r for r, f in files.items() if f == file)
    with tempfile.TemporaryDirectory() as tmp:
        copy = None if archive is None else source_copy(archive, file, Path(tmp))
        path = copy if copy is not None else Path(file)
        if not path.is_file():
            raise EdgeSetError(f"{file}: source trace of rank {rank} is gone")
        pids = pid_ranks if len(sharing) > 1 else {}
        traces = reread_ranks(path, sharing, {r: counts[r] for r in sharing}, pids)
    found = {t.rank: t.events for t in traces if t.rank in sharing}
    if rank not in found:
        raise EdgeSetError(f"{file}: re-reading it found no events of rank {rank}")
    return found
