"""Every canned query: described, listed by `tracegraph queries`, and answering on a real graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.explorer.cli import main
from tracegraph.ingest.edgesets.native.edge_set import build_native_edge_set
from tracegraph.ingest.edgesets.native.options import emulate
from tracegraph.ingest.pipeline import IngestOptions, ingest
from tracegraph.ingest.store import GraphStore
from tracegraph.queries.catalog import canned_queries, coerce_params

PARAMS = {"run": "syn", "rank": "1", "edge_set": "native:hta-0.5.0"}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("catalog")
    files = write_per_rank(SyntheticConfig(ranks=2, steps=3, layers=4), folder / "traces")
    path = folder / "syn.kuzu"
    ingest(files, path, IngestOptions(run="syn"))
    build_native_edge_set(path, run="syn", options=emulate("hta-0.5.0"))
    return path


def test_every_query_file_is_described() -> None:
    queries = canned_queries()
    assert len(queries) >= 10
    for name, query in queries.items():
        assert query.description and query.columns, name
        assert set(query.params) <= set(PARAMS), name


def test_every_query_is_listed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["queries"]) == 0
    listed = capsys.readouterr().out
    for name, query in canned_queries().items():
        assert f"{name}\n  {query.description}" in listed


@pytest.mark.parametrize("name", sorted(canned_queries()))
def test_every_query_answers_with_its_columns(db: Path, name: str) -> None:
    query = canned_queries()[name]
    params = coerce_params(query, {k: PARAMS[k] for k in query.params})
    with GraphStore(db) as store:
        result = store.run(query.cypher, params)
    assert result.columns == query.columns
    assert result.table.num_rows > 0, f"{name} returned nothing on the synthetic run"
