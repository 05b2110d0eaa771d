"""The Python front door (`import tracegraph`): the notebook example end to end, its answers
checked against the raw JSON, and its refusals as one-line `TracegraphError`s."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import tracegraph
from tracegraph.examples import notebook
from tracegraph.ingest.edgesets.records import rank_outcomes
from tracegraph.queries.guard import QueryRefused


def _kernel_totals(folder: Path) -> dict[str, int]:
    """Kernel time by name over every rank file, read with plain json (µs → ns)."""
    totals: dict[str, int] = defaultdict(int)
    for path in sorted(folder.glob("*.json")):
        for event in json.loads(path.read_text())["traceEvents"]:
            if event.get("ph") == "X" and event.get("cat") in ("kernel", "gpu_memcpy",
                                                               "gpu_memset"):  # fmt: skip
                totals[event["name"]] += round(float(event["dur"]) * 1000)
    return totals


def test_the_notebook_example_runs_and_its_answers_hold(tmp_path: Path) -> None:
    shown = notebook.main(tmp_path)
    assert shown["ranks"] == [0, 1, 2, 3]
    assert shown["edge_sets"] == ("native", "native:traceinsight-0.6.1")
    # rank 2 starts every step late: it is the straggler of each step
    stragglers = shown["stragglers"]
    assert len(stragglers) == 3 and all(rank == 2 for _, rank in stragglers)
    # the top kernels by total time, as the raw JSON gives them
    expected = sorted(_kernel_totals(tmp_path / "traces").items(), key=lambda kv: -kv[1])[:5]
    top = shown["top_kernels"]
    got = list(zip(top["kernel"].to_pylist(), map(int, top["total_ns"].to_pylist()), strict=True))
    assert got == expected


def test_reads_of_a_missing_database_are_one_line_errors(tmp_path: Path) -> None:
    g = tracegraph.open(tmp_path / "none.kuzu")
    for read in (g.runs, g.info, g.edge_sets, lambda: g.query("MATCH (n:Op) RETURN n.id")):
        with pytest.raises(tracegraph.TracegraphError) as caught:
            read()
        message = str(caught.value)
        assert "\n" not in message and str(tmp_path / "none.kuzu") in message


def test_queries_are_read_only_and_bind_their_parameters(tmp_path: Path) -> None:
    g = tracegraph.open(tmp_path / "job.kuzu")
    traces = tmp_path / "traces"
    notebook.write_per_rank(notebook.SyntheticConfig(ranks=2, steps=1, layers=1), traces)
    g.ingest(traces, run="a'b")
    with pytest.raises(tracegraph.TracegraphError, match="read-only|refused|not allowed"):
        g.query("MATCH (n:Op) DELETE n")
    with pytest.raises(tracegraph.TracegraphError):
        g.query("LOAD FROM '/etc/passwd' RETURN *")
    runs = g.query("MATCH (r:Run) WHERE r.name = $name RETURN r.name AS name", name="a'b")
    assert runs["name"].to_pylist() == ["a'b"]
    assert g.runs()["name"].to_pylist() == ["a'b"]
    kernels = g.canned("top-kernels", run="a'b", rank="1")  # typed by the query's header
    assert kernels.num_rows > 0
    with pytest.raises(tracegraph.TracegraphError, match="trace file or folder"):
        g.ingest()


def test_importing_a_layer_does_not_load_the_front_door() -> None:
    code = "import sys, tracegraph.ingest.parse; print('tracegraph.graph' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert tracegraph.__version__ != "0+unknown"


def test_the_dependency_graph_in_networkx_gives_the_stored_critical_path(tmp_path: Path) -> None:
    nx = pytest.importorskip("networkx")
    config = notebook.SyntheticConfig(ranks=2, steps=2, layers=2, python_stacks=True,
                                      annotate=True)  # fmt: skip
    notebook.write_per_rank(config, tmp_path / "traces")
    g = tracegraph.open(tmp_path / "job.kuzu")
    g.ingest(tmp_path / "traces", run="job")
    built = g.edges("native", run="job")
    with g.reading() as store:
        stored = rank_outcomes(store, "native", "job")
    for summary in built.ranks:
        graph = g.dependency_graph("native", run="job", rank=summary.rank)
        assert nx.is_directed_acyclic_graph(graph) and graph.number_of_edges() > 0
        for a, b in graph.edges:  # every edge forward in time, weighing at most its Δt
            dt = graph.nodes[b]["time_ns"] - graph.nodes[a]["time_ns"]
            assert 0 <= graph.edges[a, b]["weight"] <= dt
        longest = nx.dag_longest_path_length(graph, weight="weight")
        assert longest == summary.path_length_ns
        assert stored[summary.rank] == summary  # read back as the type it was written as
        on_path = [d["weight"] for _, _, d in graph.edges(data=True) if d["on_critical_path"]]
        assert sum(on_path) == longest
    with pytest.raises(tracegraph.TracegraphError, match="no edge set 'Native'.*native"):
        g.dependencies("Native", run="job")


def test_an_all_steps_set_hands_networkx_one_step_at_a_time(tmp_path: Path) -> None:
    """`dependency_graph(step=N)`: ProfilerStep#N's graph alone; each is acyclic, its longest
    path the step's own, and the steps' paths sum to the rank's stored path."""
    nx = pytest.importorskip("networkx")
    notebook.write_per_rank(notebook.SyntheticConfig(ranks=2, steps=3, layers=2), tmp_path / "t")
    g = tracegraph.open(tmp_path / "job.kuzu")
    g.ingest(tmp_path / "t", run="job")
    built = g.edges("native", run="job", all_steps=True)
    steps = sorted(
        {s for s in g.query("MATCH (s:Step) WHERE s.step >= 0 RETURN s.step AS s")["s"].to_pylist()}
    )
    assert len(steps) == 3
    for summary in built.ranks:
        lengths = []
        for step in steps:
            graph = g.dependency_graph("native", run="job", rank=summary.rank, step=step)
            assert nx.is_directed_acyclic_graph(graph) and graph.number_of_edges() > 0
            longest = nx.dag_longest_path_length(graph, weight="weight")
            on_path = [d["weight"] for _, _, d in graph.edges(data=True) if d["on_critical_path"]]
            assert sum(on_path) == longest
            lengths.append(longest)
        assert sum(lengths) == summary.path_length_ns
    every = g.dependencies("native", run="job").num_rows
    assert sum(g.dependencies("native", run="job", step=s).num_rows for s in steps) == every
    with pytest.raises(tracegraph.TracegraphError, match="no ProfilerStep#99"):
        g.dependency_graph("native", run="job", step=99)


def _small_job(tmp_path: Path) -> tracegraph.Graph:
    g = tracegraph.open(tmp_path / "job.kuzu")
    traces = tmp_path / "traces"
    notebook.write_per_rank(notebook.SyntheticConfig(ranks=2, steps=1, layers=1), traces)
    g.ingest(traces, run="job")
    return g


def _kuzu_files(db: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in db.parent.glob(db.name + "*") if p.is_file()}


def test_a_read_handle_runs_only_what_query_runs(tmp_path: Path) -> None:
    """Issue #22: `st.run("CHECKPOINT")` on `g.reading()` left .shadow/.wal, after which every
    reader failed and a later ingest's run was lost."""
    g = _small_job(tmp_path)
    before = _kuzu_files(g.path)
    with g.reading() as st:
        for statement in (
            "CHECKPOINT",
            "BEGIN TRANSACTION",
            "CALL threads=1",
            "MATCH (n:Op) DETACH DELETE n",
            "COPY (MATCH (r:Run) RETURN r.name) TO '/tmp/tracegraph-leak.csv'",
            "LOAD FROM '/etc/passwd' RETURN *",
            "UNWIND range(1, 100000*1000000) AS x RETURN count(x)",
        ):
            with pytest.raises(QueryRefused):
                st.run(statement)
        for write in (st.begin, st.commit, st.create_schema):
            with pytest.raises(tracegraph.TracegraphError, match="read-only"):
                write()
        assert st.run("MATCH (r:Run) RETURN r.name AS n").table["n"].to_pylist() == ["job"]
    assert _kuzu_files(g.path) == before and not Path("/tmp/tracegraph-leak.csv").exists()
    assert g.runs()["name"].to_pylist() == ["job"]
    rows = tmp_path / "rows.csv"
    rows.write_text("a\n1\n2\n")
    with g.reading(allow_files=True) as st:  # as g.query(..., allow_files=True)
        loaded = st.run(f"LOAD FROM '{rows}' (header=true) RETURN count(*) AS n")
    assert loaded.table["n"].to_pylist() == [2]


def test_stale_recovery_files_are_one_line_for_every_reader_and_the_writer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a failed checkpoint leaves (here made by Kuzu itself) is named, with what to do,
    instead of Kuzu's advice to open the database read-write, which would replay them."""
    import kuzu

    from tracegraph.explorer.cli import main

    g = _small_job(tmp_path)
    database = kuzu.Database(str(g.path), read_only=True)
    connection = kuzu.Connection(database)
    with pytest.raises(RuntimeError):
        connection.execute("CHECKPOINT")
    connection.close()
    database.close()
    before = _kuzu_files(g.path)
    said = f"{g.path}: stale job.kuzu.wal and job.kuzu.shadow beside it"
    for use in (g.runs, g.info, lambda: g.query("RETURN 1"), lambda: g.canned("step-times",
                run="job"), lambda: g.ingest(tmp_path / "traces", run="again")):  # fmt: skip
        with pytest.raises(tracegraph.TracegraphError) as caught:
            use()
        assert str(caught.value).startswith(said) and "\n" not in str(caught.value)
    for argv in (["info", str(g.path)], ["query", str(g.path), "RETURN 1"]):
        assert main(argv) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and said in err, argv
    before.pop("job.kuzu.lock", None)
    after = _kuzu_files(g.path)
    after.pop("job.kuzu.lock", None)
    assert after == before


def test_findings_come_as_a_table_with_the_json_contracts_names(tmp_path: Path) -> None:
    """What a notebook filters and sorts: the findings with the JSON's names and units, and
    pandas (the notebook extra) takes them as they are."""
    pd = pytest.importorskip("pandas")
    config = notebook.SyntheticConfig(ranks=2, steps=2, layers=2, late_rank=1, late_us=5_000)
    notebook.write_per_rank(config, tmp_path / "t")
    g = tracegraph.open(tmp_path / "job.kuzu")
    g.ingest(tmp_path / "t", run="job")
    report = g.report("job")
    table = report.findings_table()
    expected = report.to_json()["findings"]
    assert table.num_rows == len(expected) > 0
    for row, want in zip(table.to_pylist(), expected, strict=True):
        evidence = want.pop("evidence")
        assert row == want | {
            "evidence_ids": evidence["ids"],
            "evidence_cypher": evidence["cypher"],
        }
    frame = table.to_pandas()
    assert isinstance(frame, pd.DataFrame) and list(frame["kind"]) == [f["kind"] for f in expected]


def test_each_steps_graph_of_a_real_job_gives_its_stored_path(tmp_path: Path) -> None:
    """HTA's trace-diff test rank (6 steps, NCCL, a GPU tail past each step's CPU window):
    each step's graph alone gives that step's stored critical path."""
    nx = pytest.importorskip("networkx")
    folder = (
        Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "hta/trace_diff/test"
    )
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent")
    g = tracegraph.open(tmp_path / "job.kuzu")
    g.ingest(folder, run="job")
    g.edges("native", run="job", all_steps=True)
    with g.reading() as store:
        (outcome,) = rank_outcomes(store, "native", "job").values()
    assert len(outcome.windows) == 6
    for window in outcome.windows:
        step = int(str(window["step"]).removeprefix("ProfilerStep#"))
        graph = g.dependency_graph("native", run="job", rank=outcome.rank, step=step)
        assert nx.dag_longest_path_length(graph, weight="weight") == window["path_length_ns"]
