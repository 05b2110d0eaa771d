"""How a trace file is read: which ranks its events take, how much JSON it may hold, and when
it is read block by block. One frozen object that every stage reads its part of (`file_bytes`
the limits, `ranks` and `parse` the ranks, `read` the streaming); it lives apart from the
entry (`parse`) so that the stages it runs need not import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ParseOptions:
    """How to assign ranks: `rank` for a single-rank file without distributedInfo,
    `rank_of_pid` for merged files whose events do not say their rank. How much JSON a file may
    hold: `max_json_bytes` (gunzipped; None: file_bytes.MAX_JSON_BYTES) and, for a .gz whose
    JSON passes file_bytes.RATIO_FLOOR, at most `max_gzip_ratio` times its compressed size
    (None: file_bytes.MAX_GZIP_RATIO; 0: no ratio limit). How a large file is read: see
    `read.rank_traces`. `flow_rows` False: a file read whole leaves its flow events out of the
    rows (a summary reads them only where a launch has no correlation), yet counts and checks
    them as rows (`columns.LeftOutFlows`)."""

    rank: int | None = None
    rank_of_pid: Mapping[int, int] = field(default_factory=dict)
    max_json_bytes: int | None = None
    max_gzip_ratio: float | None = None
    # JSON above this many bytes is read block by block (None: read.STREAM_BYTES), its events
    # set aside on disk in a folder named after `spill_at` (None: the system's temp folder)
    stream_bytes: int | None = None
    spill_at: Path | None = None
    flow_rows: bool = True


DEFAULT_OPTIONS = ParseOptions()
