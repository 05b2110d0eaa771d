"""The explorer's small databases, for the headless read-side tests (built once per session)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tracegraph.ingest.store import GraphStore

from ..explorer import dbs


@pytest.fixture(scope="session")
def synthetic_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GraphStore]:
    with GraphStore(dbs.synthetic_db(tmp_path_factory.mktemp("reads"))) as store:
        yield store
