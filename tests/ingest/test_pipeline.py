"""Trace files → one run: every real trace ingests with one node per event, merged multi-rank
files equal their per-rank files, folders, and several runs in one database."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.ingest.errors import IngestError, TraceFormatError
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.pipeline import trace_files as pipeline_files
from tracegraph.ingest.store import GraphStore

from ..conftest import (
    MERGED,
    MULTI_RANK_FOLDERS,
    RANK_OF_PID_KEY,
    UNLABELLED_PID,
    Ingested,
    TracePool,
    label_counts,
    needs_traces,
    per_rank_files,
    rows,
    scalar,
    trace,
)
from .oracle import LABEL_OF_CATEGORY, TraceFacts, read_bytes, to_ns, trace_events

LABELS = ("Op", "Runtime", "Kernel")
COUNT_OF_RANK = {
    "Op": "MATCH (n:Op) WHERE n.rank = $r RETURN count(*)",
    "Runtime": "MATCH (n:Runtime) WHERE n.rank = $r RETURN count(*)",
    "Kernel": "MATCH (n:Kernel) WHERE n.rank = $r RETURN count(*)",
}
NODES_OF_RANK = {
    "Op": "MATCH (n:Op) WHERE n.rank = $r "
    "RETURN n.ev_idx AS ev_idx, n.name AS name, n.ts AS ts, n.dur AS dur",
    "Runtime": "MATCH (n:Runtime) WHERE n.rank = $r "
    "RETURN n.ev_idx AS ev_idx, n.name AS name, n.ts AS ts, n.dur AS dur",
    "Kernel": "MATCH (n:Kernel) WHERE n.rank = $r "
    "RETURN n.ev_idx AS ev_idx, n.name AS name, n.ts AS ts, n.dur AS dur",
}


def assert_same_nodes(got: pa.Table, facts: TraceFacts, label: str) -> None:
    """The DB's (ev_idx, name, ts, dur) rows of a label equal the file's, exactly."""
    columns = facts.columns.get(label, {})
    want = {name: columns.get(name, []) for name in got.schema.names}
    got = got.sort_by("ev_idx")
    try:
        if got.equals(pa.table(want, schema=got.schema)):
            return
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    assert got.to_pylist() == [
        dict(zip(want, row, strict=True)) for row in zip(*want.values(), strict=True)
    ]


def test_every_trace_ingests_one_node_per_event_with_exact_times(
    traces: TracePool, shared_trace: Path
):
    facts = traces.facts(shared_trace)
    ingested = traces.db_of(shared_trace)
    rank = ingested.rank_of(shared_trace)
    if facts.distributed_rank is not None:
        assert rank == facts.distributed_rank
    counts = facts.counts()
    for label in LABELS:
        assert ingested.scalar(COUNT_OF_RANK[label], {"r": rank}) == counts[label], label
        assert_same_nodes(ingested.store.run(NODES_OF_RANK[label], {"r": rank}).table, facts, label)
    (rank_node,) = ingested.rows(
        "MATCH (k:Rank) WHERE k.rank = $r "
        "RETURN k.op_count AS Op, k.runtime_count AS Runtime, k.kernel_count AS Kernel, "
        "k.event_count AS total",
        {"r": rank},
    )
    assert rank_node == {**{lb: counts[lb] for lb in LABELS}, "total": sum(counts.values())}


@needs_traces
@pytest.mark.parametrize(
    "relative",
    [
        "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz",
        "cpu_ddp_2r/rank0.step5.pt.trace.json.gz",
    ],
)
def test_oracle_reads_what_json_reads(traces: TracePool, relative: str):
    """The oracle's fast reader agrees with the standard library's json on real files."""
    doc = json.loads(read_bytes(trace(relative)), parse_float=Decimal)
    want = [
        (i, e["name"], to_ns(e["ts"]), to_ns(e["dur"]), (e.get("args") or {}).get("correlation"))
        for i, e in enumerate(trace_events(doc))
        if e.get("ph") == "X" and e.get("cat") in LABEL_OF_CATEGORY and "ts" in e
    ]
    got = [
        (e.ev_idx, e.name, e.ts, e.dur, e.correlation)
        for e in traces.facts(trace(relative)).events()
    ]
    assert got == want and len(got) > 20


EDGES = {
    "CALLS": "MATCH (a)-[:CALLS]->(b) RETURN a.rank, a.name, a.ts, b.name, b.ts",
    "LAUNCHES": "MATCH (a:Runtime)-[e:LAUNCHES]->(b:Kernel) "
    "RETURN a.rank, a.name, a.ts, b.name, b.ts, e.via",
    "NEXT_ON_STREAM": "MATCH (a:Kernel)-[e:NEXT_ON_STREAM]->(b:Kernel) "
    "RETURN a.rank, a.name, a.ts, b.name, b.ts, e.gap_ns",
    "SYNCS": "MATCH (a:Kernel)-[e:SYNCS]->(b) "
    "RETURN a.rank, a.name, a.ts, b.name, b.ts, e.sync_type",
    "PART_OF": "MATCH (a)-[:PART_OF]->(c:Collective) "
    "RETURN a.rank, a.name, a.ts, c.name, c.seq, c.participants",
}
NODES = {
    "Rank": "MATCH (k:Rank) RETURN k.rank, k.device, k.event_count, k.op_count, "
    "k.runtime_count, k.kernel_count, k.cuda_sync_count, k.skipped",
    "Kernel": "MATCH (k:Kernel) "
    "RETURN k.rank, k.name, k.ts, k.dur, k.device, k.stream, k.correlation",
    "Runtime": "MATCH (k:Runtime) RETURN k.rank, k.name, k.ts, k.dur, k.correlation, k.is_sync",
}
RANKED = {**NODES, **EDGES}
COLLECTIVES = (
    "MATCH (c:Collective) RETURN c.name, c.process_group, c.seq, c.matched_by, c.participants"
)


def as_counter(ingested: Ingested, cypher: str) -> Counter[tuple]:
    return Counter(tuple(r.values()) for r in ingested.rows(cypher))


def per_rank_rows(traces: TracePool, key: str, cypher: str) -> Counter[tuple]:
    """Rows (rank first) of the per-rank files' own ingests, each under its rank in `key`."""
    want: Counter[tuple] = Counter()
    for rank, path in enumerate(per_rank_files(key)):
        ingested = traces.db_of(path)
        own = ingested.rank_of(path)
        want.update(
            {
                (rank, *row[1:]): n
                for row, n in as_counter(ingested, cypher).items()
                if row[0] == own
            }
        )
    return want


# What a merged file's per-rank traces do not have.
ABSENT = {
    "merged:cpu_ddp_2r": {"Runtime", "Kernel", "LAUNCHES", "NEXT_ON_STREAM", "SYNCS"},
    "merged:hta/trace_filter": {"SYNCS"},
    "merged:hta/critical_path": {"PART_OF"},
}


@needs_traces
@pytest.mark.parametrize("merged_key", MERGED)
def test_merged_file_gives_the_nodes_and_edges_of_its_per_rank_files(
    traces: TracePool, merged_key: str
):
    merged = traces.db(merged_key)
    assert sorted(r.rank for r in merged.result.ranks) == [0, 1]
    for rank, path in enumerate(per_rank_files(merged_key)):
        counts = traces.facts(path).counts()
        for label in LABELS:
            assert merged.scalar(COUNT_OF_RANK[label], {"r": rank}) == counts[label]
    for name, cypher in RANKED.items():
        want = per_rank_rows(traces, merged_key, cypher)
        assert bool(want) != (name in ABSENT[merged_key]), name
        assert as_counter(merged, cypher) == want, name
    units = {traces.unit_of(p) for p in per_rank_files(merged_key)}
    if len(units) == 1:  # the per-rank files are one run: compare what spans ranks too
        split = traces.db(units.pop())
        for cypher in (COLLECTIVES, "MATCH (r:Run) RETURN r.world_size"):
            assert as_counter(merged, cypher) == as_counter(split, cypher)


@needs_traces
def test_merged_file_with_ranks_it_cannot_tell_names_the_pids_and_rank_of_pid(
    traces: TracePool, tmp_path: Path
):
    (merged,) = traces.paths(RANK_OF_PID_KEY)
    db = tmp_path / "x.kuzu"
    with pytest.raises(TraceFormatError) as caught:
        ingest([merged], db)
    message = str(caught.value)
    assert message.startswith(str(merged)) and "--rank-of-pid" in message
    assert str(UNLABELLED_PID) in message
    assert not db.exists()
    # ...and it ingests once the pid's rank is given (compared edge by edge above).
    assert sorted(r.rank for r in traces.db(RANK_OF_PID_KEY).result.ranks) == [0, 1]


WORLD_SIZE = {"cpu_ddp_2r": 2, "hta/trace_filter": 128}  # their distributedInfo says so


@needs_traces
def test_folder_ingests_every_trace_file_in_it_one_rank_each(traces: TracePool):
    for folder in MULTI_RANK_FOLDERS:
        ingested = traces.db(folder)
        files = [str(p) for p in per_rank_files(folder)]
        assert sorted(r.file for r in ingested.result.ranks) == files
        assert ingested.scalar("MATCH (k:Rank) RETURN count(*)") == len(files)
        (run,) = ingested.rows(
            "MATCH (r:Run) RETURN r.name AS name, r.world_size AS ws, r.sources AS sources"
        )
        assert run["name"] == Path(folder).name
        assert run["ws"] == WORLD_SIZE[folder]
        assert sorted(json.loads(run["sources"])) == files


def test_folder_without_trace_files_is_a_trace_format_error(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("no traces here")
    with pytest.raises(TraceFormatError) as caught:
        ingest([tmp_path], tmp_path / "x.kuzu")
    assert str(tmp_path) in str(caught.value)
    with pytest.raises(TraceFormatError, match="no such file"):
        pipeline_files([tmp_path / "missing.json"])


def test_one_rank_twice_in_a_run_is_an_error_naming_both_files(tmp_path: Path):
    (first,) = write_per_rank(SyntheticConfig(ranks=1, steps=1, layers=1), tmp_path / "a")
    (second,) = write_per_rank(SyntheticConfig(ranks=1, steps=1, layers=2), tmp_path / "b")
    with pytest.raises(TraceFormatError) as caught:
        ingest([first, second], tmp_path / "x.kuzu")
    assert str(first) in str(caught.value) and str(second) in str(caught.value)
    assert not (tmp_path / "x.kuzu").exists()


RUN_COUNTS = (
    "MATCH (n:Op) WHERE n.run = $run RETURN 'Op' AS label, count(*) AS n "
    "UNION ALL MATCH (n:Runtime) WHERE n.run = $run RETURN 'Runtime' AS label, count(*) AS n "
    "UNION ALL MATCH (n:Kernel) WHERE n.run = $run RETURN 'Kernel' AS label, count(*) AS n "
    "UNION ALL MATCH (a)-[e]->(b) WHERE a.run = $run RETURN label(e) AS label, count(*) AS n"
)


def run_counts(store: GraphStore, run: str) -> dict[str, int]:
    return {r["label"]: r["n"] for r in rows(store, RUN_COUNTS, {"run": run}) if r["n"]}


@needs_traces
def test_two_runs_of_one_trace_share_a_database_and_a_clashing_name_changes_nothing(
    traces: TracePool, tmp_path: Path
):
    path = trace("hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz")
    expected = traces.facts(path).counts()
    db = tmp_path / "runs.kuzu"
    ingest([path], db, IngestOptions(run="a"))
    ingest([path], db, IngestOptions(run="b"))
    with GraphStore(db) as store:
        runs = rows(store, "MATCH (r:Run) RETURN r.name AS name, r.run_idx AS idx ORDER BY idx")
        assert runs == [{"name": "a", "idx": 0}, {"name": "b", "idx": 1}]
        a, b = run_counts(store, "a"), run_counts(store, "b")
        assert a == b
        assert {lb: a[lb] for lb in LABELS} == {lb: expected[lb] for lb in LABELS}
        assert a["CALLS"] and a["LAUNCHES"] and a["NEXT_ON_STREAM"] and a["SYNCS"]
        alone = label_counts(traces.db_of(path).store)  # the same trace as the only run
        assert a == {label: alone[label] for label in a}
        assert scalar(store, "MATCH (a)-[e]->(b) WHERE a.run <> b.run RETURN count(*)") == 0
    before = db.read_bytes()
    with pytest.raises(IngestError, match="'a' already exists"):
        ingest([path], db, IngestOptions(run="a"))
    assert db.read_bytes() == before
    assert not list(tmp_path.glob(".runs.kuzu.staging-*"))


def test_negative_rank_is_refused_or_keyed_apart_per_run(tmp_path: Path):
    path = tmp_path / "rank_minus_one.json"
    event = {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 5}
    path.write_text(json.dumps({"distributedInfo": {"rank": -1}, "traceEvents": [event]}))
    db = tmp_path / "x.kuzu"
    try:
        ingest([path], db, IngestOptions(run="a"))
    except (TraceFormatError, IngestError) as refused:  # refusing it, naming the file, is fine
        assert str(path) in str(refused)
        return
    ingest([path], db, IngestOptions(run="b"))
    with GraphStore(db) as store:
        assert scalar(store, "MATCH (n:Op) RETURN count(DISTINCT n.id)") == 2


JOB_RANKS = ["rank0.trace.json", "rank1.trace.json"]


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A job's folder as a capture leaves it (no ../shared needed): one synthetic trace per
    rank, and its run metadata, JSON but no trace, in a subfolder."""
    folder = tmp_path / "job"
    write_per_rank(SyntheticConfig(ranks=2, steps=1, layers=1), folder)
    (folder / "meta").mkdir()
    (folder / "meta" / "run_meta.json").write_text('{"world_size": 2, "backend": "gloo"}')
    return folder


def _sources(db: Path) -> tuple[str, list[str]]:
    with GraphStore(db) as store:
        (run,) = rows(store, "MATCH (r:Run) RETURN r.name AS name, r.sources AS sources")
    return run["name"], json.loads(run["sources"])


def test_folder_gives_the_trace_files_directly_in_it(tmp_path: Path, job: Path):
    folder = job
    assert [p.name for p in pipeline_files([folder])] == JOB_RANKS
    deep = pipeline_files([folder], recursive=True)
    assert [str(p.relative_to(folder)) for p in deep] == ["meta/run_meta.json", *JOB_RANKS]
    db = tmp_path / "flat.kuzu"
    result = ingest([folder], db)
    assert [r.rank for r in result.ranks] == [0, 1] and result.skipped == ()
    assert _sources(db) == ("job", [str(folder / name) for name in JOB_RANKS])


def test_recursive_folder_skips_a_json_that_is_no_trace(tmp_path: Path, job: Path):
    folder = job
    db = tmp_path / "deep.kuzu"
    result = ingest([folder], db, IngestOptions(recursive=True))
    assert result.skipped == (("meta/run_meta.json", "not a trace (no traceEvents)"),)
    assert [r.rank for r in result.ranks] == [0, 1]
    # the run is named after the folder, and records only the traces it holds
    assert _sources(db) == ("job", [str(folder / name) for name in JOB_RANKS])


def test_a_named_file_that_is_no_trace_is_still_an_error(tmp_path: Path, job: Path):
    meta = job / "meta" / "run_meta.json"
    with pytest.raises(TraceFormatError) as caught:
        ingest([meta], tmp_path / "x.kuzu", IngestOptions(recursive=True))
    assert caught.value.path == str(meta) and "traceEvents" in caught.value.reason
    assert not (tmp_path / "x.kuzu").exists()


def test_a_folder_of_no_traces_is_an_error_that_changes_nothing(tmp_path: Path, job: Path):
    db = tmp_path / "kept.kuzu"
    ingest([job / JOB_RANKS[0]], db, IngestOptions(run="kept"))
    before = db.read_bytes()
    meta = job / "meta"
    with pytest.raises(TraceFormatError) as caught:
        ingest([job, meta], db, IngestOptions(run="new"))
    assert caught.value.path == str(meta)
    assert caught.value.reason == "folder holds no traces (run_meta.json: not a trace)"
    assert db.read_bytes() == before
    assert not list(tmp_path.glob(".kept.kuzu.staging-*"))
    with GraphStore(db) as store:
        assert scalar(store, "MATCH (r:Run) RETURN count(*)") == 1


def test_a_folder_with_traces_only_in_subfolders_says_recursive(tmp_path: Path, job: Path):
    folder = tmp_path  # holds job/ (two traces and run_meta.json) and nothing else
    with pytest.raises(TraceFormatError, match="3 in its subfolders \\(use --recursive\\)"):
        ingest([folder], tmp_path / "x.kuzu")
    assert len(pipeline_files([folder], recursive=True)) == 3
    assert not (tmp_path / "x.kuzu").exists()


def test_a_broken_trace_in_a_folder_is_an_error_not_skipped(tmp_path: Path, job: Path):
    folder = tmp_path / "traces"
    folder.mkdir()
    good = job / JOB_RANKS[0]
    packed = gzip.compress(good.read_bytes())
    (folder / "rank0.json.gz").write_bytes(packed)
    (folder / "rank1.json.gz").write_bytes(packed[: len(packed) // 2])  # truncated
    (folder / "notes.json").write_text('{"comment": "not a trace"}')
    with pytest.raises(TraceFormatError) as caught:
        ingest([folder], tmp_path / "x.kuzu")
    assert caught.value.path == str(folder / "rank1.json.gz")
    assert "gzip" in caught.value.reason  # refused as broken, not as a second rank 0
    assert not (tmp_path / "x.kuzu").exists()


@needs_traces
def test_a_cpu_only_rank_before_a_gpu_rank_loads_both(tmp_path: Path):
    """A rank with no runtime calls or kernels gives empty tables for them: loaded in one batch
    before a GPU rank, they once made the COPY load nothing (or fail to concatenate)."""
    cpu_only, gpu = trace("hta/cpu_only"), trace("hta/critical_path/alexnet")
    db = tmp_path / "mixed.kuzu"
    result = ingest([cpu_only, gpu], db, IngestOptions(run="mixed"))
    assert sorted(r.rank for r in result.ranks) == [0, 34]
    gpu_counts = next(r.counts for r in result.ranks if r.rank == 0)
    with GraphStore(db) as store:
        assert scalar(store, "MATCH (n:Runtime) RETURN count(*)") == gpu_counts["Runtime"] > 0
        assert scalar(store, "MATCH (n:Kernel) RETURN count(*)") == gpu_counts["Kernel"] > 0
        launches = scalar(store, "MATCH ()-[e:LAUNCHES]->() RETURN count(*)")
    assert launches == result.edges["LAUNCHES"] > 0


@pytest.mark.parametrize(
    ("payload", "skipped"),
    [({"samples": "x" * (9 << 20)}, True), ({"traceEvents": None, "pad": "x" * (9 << 20)}, False)],
    ids=["no traceEvents: skipped", "traceEvents null: a broken trace"],
)
def test_a_large_json_in_a_folder_is_told_apart_without_loading_it(
    tmp_path: Path, job: Path, payload: dict, skipped: bool
):
    big = job / "big.json"
    big.write_text(json.dumps(payload))  # over WHOLE_CHECK_BYTES: scanned, not loaded
    if skipped:
        result = ingest([job], tmp_path / "x.kuzu")
        assert result.skipped == (("big.json", "not a trace (no traceEvents)"),)
        assert [r.rank for r in result.ranks] == [0, 1]
    else:
        with pytest.raises(TraceFormatError) as caught:
            ingest([job], tmp_path / "x.kuzu")
        assert caught.value.path == str(big)


def test_a_run_named_after_its_file_keeps_the_dots_in_the_name(tmp_path: Path, job: Path):
    file = tmp_path / "xdit_sd_3.5_rank0.pt.trace.json"
    file.write_bytes((job / JOB_RANKS[0]).read_bytes())
    result = ingest([file], tmp_path / "dots.kuzu")
    assert result.run == "xdit_sd_3.5_rank0"


def test_an_ingest_that_closes_the_database_while_ranks_are_prepared_loads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From LARGE_FROM_BYTES of JSON on, the staging database is committed and closed while
    the first ranks are prepared (and the ranks wait for their load in files): the run it
    loads is the same, and a failure after the pause still leaves the database as it was."""
    from tracegraph.ingest import pipeline

    files = write_per_rank(SyntheticConfig(ranks=3, steps=2, layers=3), tmp_path / "traces")
    open_db, paused_db = tmp_path / "open.kuzu", tmp_path / "paused.kuzu"
    ingest(files, open_db, IngestOptions(run="r"))
    monkeypatch.setattr(pipeline, "LARGE_FROM_BYTES", 0)
    pauses = _counted_pauses(monkeypatch)
    paused = ingest(files, paused_db, IngestOptions(run="r", jobs=1))
    assert len(pauses) == 1
    with GraphStore(open_db) as a, GraphStore(paused_db) as b:
        assert label_counts(a) == label_counts(b)
        assert sum(label_counts(b).values()) > 0
    assert paused.edges["CALLS"] > 0

    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": "x"}]}')
    before = paused_db.read_bytes()
    with pytest.raises(TraceFormatError):
        ingest([*files, bad], paused_db, IngestOptions(run="r2", jobs=1))
    assert paused_db.read_bytes() == before
    leftovers = [*tmp_path.iterdir(), *paused_db.with_name("paused.kuzu.archive").iterdir()]
    assert [p.name for p in leftovers if p.name.startswith(".")] == []  # staging, spill, partial


def test_ranks_loaded_a_batch_each_give_the_run_of_one_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch is committed and the database closed until the next: the collectives and
    run rows loaded after the last batch reopen it."""
    from tracegraph.ingest import batch

    config = SyntheticConfig(ranks=3, steps=2, layers=3)
    files = write_per_rank(config, tmp_path / "traces")
    whole, batched = tmp_path / "whole.kuzu", tmp_path / "batched.kuzu"
    ingest(files, whole, IngestOptions(run="r", jobs=1))
    pauses = _counted_pauses(monkeypatch)
    monkeypatch.setattr(batch, "BATCH_ROWS", 1)  # a batch per rank
    ingest(files, batched, IngestOptions(run="r", jobs=1))
    assert len(pauses) == config.ranks
    with GraphStore(whole) as a, GraphStore(batched) as b:
        assert label_counts(a) == label_counts(b)
        assert scalar(b, "MATCH (c:Collective) RETURN count(*)") > 0


def _counted_pauses(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The databases `GraphStore.commit_and_pause` is called on from now on, one per call."""
    pauses: list[Path] = []
    pause = GraphStore.commit_and_pause

    def counted(store: GraphStore) -> None:
        pauses.append(store.path)
        pause(store)

    monkeypatch.setattr(GraphStore, "commit_and_pause", counted)
    return pauses


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("summary", [False, True])
def test_keep_going_passes_over_a_bad_file_and_loads_the_others(
    tmp_path: Path, jobs: int, summary: bool
) -> None:
    """One rank's file is cut short: by default the ingest fails and the database stays as it
    was; with keep_going that file is listed as skipped and the other ranks are the run, as if
    ingested alone (in this process or by workers, summaries or events)."""
    from dataclasses import replace as with_

    import tracegraph
    from tracegraph.examples.truth_jobs import BASE
    from tracegraph.ingest.errors import TracegraphError

    from ..conftest import dump

    files = write_per_rank(with_(BASE, ranks=4), tmp_path / "traces")
    bad = files[2]
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])  # a capture cut short
    db, alone = tmp_path / "kept.kz", tmp_path / "alone.kz"
    with pytest.raises(TracegraphError, match=str(bad)):
        tracegraph.open(db).ingest(tmp_path / "traces", jobs=jobs, summary=summary)
    assert not db.exists()
    result = tracegraph.open(db).ingest(
        tmp_path / "traces", jobs=jobs, summary=summary, keep_going=True, run="job"
    )
    assert [r.rank for r in result.ranks] == [0, 1, 3]
    ((what, why),) = result.skipped
    assert what == str(bad) and why.startswith("not loaded: ")
    good = [f for f in files if f != bad]
    tracegraph.open(alone).ingest(*good, summary=summary, run="job")
    assert dump(db) == dump(alone)
