"""Collective instances across ranks: gloo ranges and NCCL kernels of real 2-rank jobs, matched
by order (these traces record no Seq), and a matching whose size grows with the collectives,
not with ranks times collectives."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tracegraph.ingest import collectives, link, nodes
from tracegraph.ingest.parse import parse_file

from ..conftest import TracePool, needs_traces, per_rank_files

_PART_OF = (
    " OPTIONAL MATCH (n)-[:PART_OF]->(c:Collective) RETURN n.rank AS rank, n.ev_idx AS ev_idx, "
    "c.id AS collective, c.participants AS participants, c.matched_by AS matched_by"
)
MEMBERS = {
    "Op": "MATCH (n:Op) WHERE n.name STARTS WITH 'gloo:'" + _PART_OF,
    "Kernel": "MATCH (n:Kernel) WHERE n.name STARTS WITH 'nccl'" + _PART_OF,
}


def kth_per_rank(traces: TracePool, folder: str, prefix: str) -> list[list[int]]:
    """Per rank, the ev_idx of its participants named `prefix`*, by start time (the oracle)."""
    per_rank = []
    for path in per_rank_files(folder):
        events = [e for e in traces.facts(path).events() if e.name.startswith(prefix)]
        per_rank.append([e.ev_idx for e in sorted(events, key=lambda e: (e.ts, e.ev_idx))])
    return per_rank


@needs_traces
@pytest.mark.parametrize(
    ("folder", "prefix", "label", "count"),
    [("cpu_ddp_2r", "gloo:", "Op", 9), ("hta/trace_filter", "ncclKernel", "Kernel", 10)],
)
def test_each_rank_s_kth_collective_is_one_instance_with_both_ranks(
    traces: TracePool, folder: str, prefix: str, label: str, count: int
):
    ingested = traces.db(folder)
    members = {(m["rank"], m["ev_idx"]): m for m in ingested.rows(MEMBERS[label])}
    expected = kth_per_rank(traces, folder, prefix)
    assert [len(r) for r in expected] == [count, count]
    assert len(members) == 2 * count
    assert all(m["participants"] == 2 and m["matched_by"] == "order" for m in members.values())
    for first, second in zip(*expected, strict=True):
        assert members[(0, first)]["collective"] == members[(1, second)]["collective"]
    assert ingested.scalar("MATCH (c:Collective) RETURN count(*)") == count
    assert (
        ingested.scalar(
            "MATCH (n)-[:PART_OF]->(c:Collective) WHERE label(n) <> $label RETURN count(*)",
            {"label": label},
        )
        == 0
    )


@pytest.fixture(scope="module")
def trace_filter_participants(traces: TracePool) -> pa.Table:
    """Collective participants of trace_filter's rank 0, as the pipeline derives them."""
    (rank0,) = parse_file(per_rank_files("hta/trace_filter")[0])
    events = nodes.with_keys(rank0.events, rank0.rank, "r", 0)
    return collectives.participants(events, link.launch_edges(events))


@needs_traces
@pytest.mark.parametrize("ranks", [2, 64, 512])
def test_matching_scales_with_collectives_not_with_ranks(
    trace_filter_participants: pa.Table, ranks: int
):
    one = trace_filter_participants
    assert one.num_rows == 10
    many = pa.concat_tables(
        one.set_column(
            one.schema.get_field_index("rank"), "rank", pa.array([r] * 10, pa.int64())
        ).set_column(0, "id", pc.add(one["id"], r << 32))
        for r in range(ranks)
    )
    coll, part_of = collectives.match(many, "r", 0)
    assert coll.num_rows == 10
    assert coll["participants"].to_pylist() == [ranks] * 10
    assert part_of.num_rows == 10 * ranks
    # the k-th participant of every rank joins the same instance
    by_rank: dict[int, list[int]] = defaultdict(list)
    order = np.lexsort((many["ts"].to_numpy(), many["rank"].to_numpy()))
    for row in order:
        by_rank[many["rank"][int(row)].as_py()].append(part_of["to_id"][int(row)].as_py())
    assert len({tuple(v) for v in by_rank.values()}) == 1


def synthetic(rows: list[tuple[int, str, int | None, str]]) -> pa.Table:
    """Participants (rank, op, seq, group) with ts in row order."""
    return pa.table(
        {
            "id": pa.array(range(len(rows)), pa.int64()),
            "label": pa.array(["Kernel"] * len(rows)),
            "rank": pa.array([r[0] for r in rows], pa.int64()),
            "ts": pa.array(range(len(rows)), pa.int64()),
            "group": pa.array([r[3] for r in rows]),
            "op": pa.array([r[1] for r in rows]),
            "seq": pa.array([r[2] for r in rows], pa.int64()),
        }
    )


def test_seq_matches_across_ranks_and_order_keeps_groups_and_ops_apart():
    parts = synthetic(
        [
            (0, "allreduce", 7, "pg0"),
            (1, "allreduce", 7, "pg0"),
            (0, "allgather", None, "pg0"),
            (0, "allreduce", None, "pg1"),
            (1, "allreduce", None, "pg1"),
            (1, "allgather", None, "pg0"),
            (0, "allgather", None, "pg0"),
        ]
    )
    coll, part_of = collectives.match(parts, "r", 3)
    instance = dict(zip(part_of["from_id"].to_pylist(), part_of["to_id"].to_pylist(), strict=True))
    assert instance[0] == instance[1]  # same (group, seq)
    assert instance[2] == instance[5] != instance[6]  # 1st allgather of pg0 on each rank
    assert instance[3] == instance[4] != instance[0]  # pg1 is another group
    assert len(set(instance.values())) == coll.num_rows == 4
    assert all(cid >> 40 == 3 for cid in coll["id"].to_pylist())  # keyed by run
    by_id = {c["id"]: c for c in coll.to_pylist()}
    assert by_id[instance[0]]["matched_by"] == "seq" and by_id[instance[0]]["seq"] == 7
    assert by_id[instance[6]]["participants"] == 1
