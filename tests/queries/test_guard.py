"""A user's query is one read-only statement, or it never reaches Kuzu (queries/guard.py)."""

from __future__ import annotations

import pytest

from tracegraph.queries.guard import QueryRefused, check_read_only

READ = [
    "MATCH (k:Kernel) RETURN k.name, count(*) AS n ORDER BY n DESC LIMIT 10",
    "OPTIONAL MATCH (a:Op)-[:CALLS]->(b:Op) RETURN a.name",
    "UNWIND [1, 2, 3] AS x RETURN x",
    "WITH 1 AS x RETURN x",
    "RETURN 1;",
    "UNWIND range(1, 1000) AS x RETURN sum(x)",
    "UNWIND range(-5, 5, 2) AS x RETURN x",
    "CALL show_tables() RETURN *",
    "CALL table_info('Op') RETURN *",
    "EXPLAIN MATCH (n:Op) RETURN n.id",
    "MATCH (n:Op) WHERE n.name = 'CREATE TABLE x; DROP TABLE Op' RETURN n.set, n.`load`",
    "MATCH (n:Op) // a comment: DELETE n\nRETURN n.id /* COPY x TO 'y' */",
    "MATCH (o:Op) WHERE o.name STARTS WITH 'gloo:' RETURN o.rank, count(*)",
]

REFUSED = [
    ("CHECKPOINT", "CHECKPOINT"),
    ("BEGIN TRANSACTION", "BEGIN"),
    ("COMMIT", "COMMIT"),
    ("CALL threads=1", "threads"),
    ("CALL project_graph('g', ['Op'], ['CALLS'])", "project_graph"),
    ("LOAD FROM '/etc/shadow' (file_format='csv') RETURN *", "--allow-files"),
    ("LOAD FROM '/proc/self/environ' RETURN *", "--allow-files"),
    ("MATCH (n:Op) LOAD FROM '/etc/passwd' RETURN *", "--allow-files"),
    ("COPY (MATCH (n:Op) RETURN n.id) TO '/tmp/x.csv'", "--format csv"),
    ("UNWIND range(1, 100000000000) AS x RETURN count(x)", "range"),
    ("RETURN size(range(0, 2000000, 1))", "range"),
    ("EXPORT DATABASE '/tmp/dump'", "EXPORT"),
    ("IMPORT DATABASE '/tmp/dump'", "IMPORT"),
    ("LOAD EXTENSION '/tmp/x.so'", "--allow-files"),
    ("INSTALL json", "INSTALL"),
    ("ATTACH '/tmp/other.kuzu' AS o", "ATTACH"),
    ("CREATE NODE TABLE T(id INT64, PRIMARY KEY(id))", "CREATE"),
    ("MATCH (n:Op) SET n.name = 'x'", "SET"),
    ("MATCH (n:Op) DETACH DELETE n", "DETACH"),
    ("MATCH (n:Op) RETURN n; MATCH (m:Op) DELETE m", "one statement"),
    ("DROP TABLE Op", "DROP"),
    ("COMMENT ON TABLE Op IS 'x'", "COMMENT"),
    ("", "empty"),
]


@pytest.mark.parametrize("cypher", READ)
def test_read_only_statements_pass(cypher: str) -> None:
    check_read_only(cypher)


@pytest.mark.parametrize(("cypher", "says"), REFUSED)
def test_everything_else_is_refused_with_the_reason(cypher: str, says: str) -> None:
    with pytest.raises(QueryRefused, match=says):
        check_read_only(cypher)


def test_files_only_when_allowed() -> None:
    check_read_only("LOAD FROM 'x.csv' RETURN *", allow_files=True)
    with pytest.raises(QueryRefused, match="--format csv"):
        check_read_only("COPY (MATCH (n:Op) RETURN n.id) TO 'x.csv'", allow_files=True)
    with pytest.raises(QueryRefused, match="EXTENSION"):
        check_read_only("LOAD EXTENSION '/tmp/x.so'", allow_files=True)
    with pytest.raises(QueryRefused, match="CHECKPOINT"):
        check_read_only("CHECKPOINT", allow_files=True)
