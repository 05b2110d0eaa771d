"""One rank's share of an ingest: what the node tables keep alive, and the archive rows written
at once equal to those returned."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracegraph.ingest import read
from tracegraph.ingest.prepare import prepare_rank
from tracegraph.ingest.schema import EVENT_LABELS

from ..conftest import needs_traces, trace

# a CUDA trace with ac2g flows and cuda_sync events, a ROCm one, and a CPU-only DDP rank
# (flows, no runtime calls or kernels: its empty node tables must hold nothing either)
FLOWS = "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz"
ROCM = "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
CPU_ONLY = "cpu_ddp_2r/rank0.step5.pt.trace.json.gz"


def _first_rank(relative: str) -> read.RankTrace:
    return next(read.rank_traces(trace(relative)))


@needs_traces
@pytest.mark.parametrize("relative", [FLOWS, ROCM, CPU_ONLY])
def test_node_tables_keep_no_buffer_of_the_other_rows(relative: str) -> None:
    rank = _first_rank(relative)
    labels = rank.events["label"]
    node_rows = pc.sum(pc.is_in(labels, pa.array(list(EVENT_LABELS)))).as_py()
    assert 0 < node_rows < rank.events.num_rows  # flows, syncs: rows that are no node
    prepared = prepare_rank(rank, "r", 0)
    assert sum(t.num_rows for t in prepared.node_tables.values()) == node_rows
    for label, table in prepared.node_tables.items():
        held = [b.size for c in table["ts"].chunks for b in c.buffers() if b is not None]
        if table.num_rows:
            # the int64 buffer the slice points into: the node rows of every label, nothing else
            assert held[-1] == 8 * node_rows, label
        else:
            assert sum(held) == 0, label


@needs_traces
def test_archive_rows_written_at_once_are_those_returned() -> None:
    returned = prepare_rank(_first_rank(FLOWS), "r", 0)
    kept: dict[int, pa.Table] = {}
    written = prepare_rank(_first_rank(FLOWS), "r", 0, keep_archive=kept.__setitem__)
    assert not returned.archived and written.archived
    assert written.archive_rows.num_rows == 0
    assert returned.archive_rows.num_rows > 0
    assert kept[returned.rank].equals(returned.archive_rows)
    for label, table in returned.node_tables.items():
        assert table.equals(written.node_tables[label]), label
