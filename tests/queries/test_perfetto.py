"""`export --perfetto`: the run as Chrome trace JSON, checked against the database: every event
once at its exact time, the critical path as paired flows on its edges' endpoints, findings as
instant events, nothing written on an error."""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

import tracegraph
from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank


@pytest.fixture(scope="module")
def graph(tmp_path_factory: pytest.TempPathFactory) -> tracegraph.Graph:
    base = tmp_path_factory.mktemp("perfetto")
    write_per_rank(SyntheticConfig(ranks=2, steps=2, layers=2, late_rank=1, late_us=3_000),
                   base / "t")  # fmt: skip
    g = tracegraph.open(base / "r.kuzu")
    g.ingest(base / "t", run="job")
    g.edges("native", run="job", all_steps=True)
    return g


def load(path: Path) -> dict:
    return json.loads(path.read_text(), parse_float=Decimal)


def ns(us: Decimal, origin: int) -> int:
    value = us * 1000
    assert value == int(value)  # three decimals: whole ns
    return int(value) + origin


def test_every_event_once_at_its_exact_time_and_the_path_as_flows(graph, tmp_path) -> None:
    out = tmp_path / "job.json"
    counts = graph.export_perfetto(out, run="job", edge_set="native")
    data = load(out)
    origin = data["otherData"]["time_origin_ns"]
    every = [e for e in data["traceEvents"] if e["ph"] == "X"]
    slices = [e for e in every if e["cat"] != "critical_path_segment"]
    events = graph.query(
        "MATCH (n:Op:Runtime:Kernel) WHERE n.run = 'job' RETURN n.id AS id, n.ts AS ts, "
        "n.dur AS dur"
    ).to_pylist()
    assert counts["events"] == len(slices) == len(events)
    assert counts["segments"] == len(every) - len(slices) > 0  # test_path.py checks them
    got = {e["args"]["id"]: (ns(e["ts"], origin), ns(e["dur"], 0)) for e in slices}
    assert got == {e["id"]: (e["ts"], e["dur"]) for e in events}

    path = graph.dependencies("native", run="job").to_pylist()
    path = [e for e in path if e["on_critical_path"]]
    flows = [e for e in data["traceEvents"] if e["ph"] in "sf"]
    track = {e["args"]["id"]: (e["pid"], e["tid"]) for e in slices}
    # an arrow where the path changes track (a launch, a sync, a thread hop): not per edge
    hops = [p for p in path if track[p["src_id"]] != track[p["dst_id"]]]
    assert counts["path_edges"] == len(path) > counts["flows"] == len(hops) == len(flows) // 2 > 0
    assert Counter(Counter(e["id"] for e in flows).values()) == {2: len(hops)}  # paired
    starts = sorted(ns(e["ts"], origin) for e in flows if e["ph"] == "s")
    ends = sorted(ns(e["ts"], origin) for e in flows if e["ph"] == "f")
    assert starts == sorted(e["src_time"] for e in hops)
    assert ends == sorted(e["dst_time"] for e in hops)
    by_id = {}
    for e in flows:
        by_id.setdefault(e["id"], {})[e["ph"]] = (e["pid"], e["tid"])
    ends_of = {(track[p["src_id"]], track[p["dst_id"]]) for p in path}
    assert {(v["s"], v["f"]) for v in by_id.values()} <= ends_of
    marked = {e["args"]["id"] for e in slices if e.get("cname") == "terrible"}
    assert marked == {p["src_id"] for p in path} | {p["dst_id"] for p in path}
    instants = [e for e in data["traceEvents"] if e["ph"] == "i"]
    assert len(instants) == counts["findings"] > 0
    assert {e["name"] for e in instants} <= {f.kind for f in graph.report("job").findings}


def test_one_rank_and_refusals(graph, tmp_path) -> None:
    out = tmp_path / "rank1.json"
    graph.export_perfetto(out, run="job", rank=1, findings=False)
    data = load(out)
    assert {e["args"]["rank"] for e in data["traceEvents"]
            if e["ph"] == "X" and "rank" in e["args"]} == {1}  # fmt: skip
    assert {e["pid"] for e in data["traceEvents"] if e["ph"] == "X"} == {2, 3}  # rank 1's CPU, GPU
    assert not [e for e in data["traceEvents"] if e["ph"] in "sfi"]
    bad = tmp_path / "bad.json"
    with pytest.raises(tracegraph.TracegraphError, match="no edge set 'nope'"):
        graph.export_perfetto(bad, run="job", edge_set="nope")
    assert not bad.exists() and not list(tmp_path.glob(".*partial"))


def test_sync_dependencies_name_the_events_chakra_reads(graph, tmp_path) -> None:
    """Each dependency's ev_idx is the event's place in its rank's traceEvents (checked in the
    raw JSON: same name and External id); both modes' counts match the edge set's rows."""
    deps = graph.sync_dependencies("native", run="job")
    rows = [e for e in graph.dependencies("native", run="job").to_pylist()
            if e["type"] == "sync_dependency"]  # fmt: skip
    assert len(deps["dependencies"]) == len(rows) > 0
    assert sum(c["critical"] for c in deps["counts"].values()) == sum(
        e["on_critical_path"] for e in rows
    )
    traces = graph.path.parent / "t"
    files = {r: json.loads((traces / f"rank{r}.trace.json").read_text())["traceEvents"]
             for r in (0, 1)}  # fmt: skip
    for dep in deps["dependencies"]:
        for end in ("src", "dst"):
            event = files[dep["rank"]][dep[end]["ev_idx"]]
            assert event["name"] == dep[end]["name"]
            assert event["args"].get("External id") == dep[end]["external_id"]
    only = graph.sync_dependencies("native", run="job", critical_only=True)
    assert [d["on_critical_path"] for d in only["dependencies"]] == [True] * len(
        only["dependencies"]
    )
    assert only["counts"] == deps["counts"]
