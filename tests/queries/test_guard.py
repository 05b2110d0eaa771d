"""A user's query is one read-only statement, or it never reaches Kuzu (queries/guard.py)."""

from __future__ import annotations

import pytest

from tracegraph.queries.catalog import canned_queries
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
    # sizes within the bounds, or from the data (which cannot be told before the query runs)
    "UNWIND range(1, 1000*1000) AS x RETURN count(x)",
    "UNWIND range(1, 1000000, 1) AS x RETURN count(x)",
    "WITH 100000000000 AS n WITH 10 AS n UNWIND range(1, n) AS x RETURN x",
    "MATCH (o:Op) UNWIND range(0, o.dur) AS x RETURN count(x)",
    "MATCH (o:Op) RETURN size(range(o.rank, o.rank + 100000000000 * 0 + 3))",
    "MATCH (o:Op) WITH o.dur AS n RETURN range(1, n)",
    "RETURN range(1, 10^11)",  # a float bound: Kuzu's binder refuses it
    "RETURN repeat('ab', 1000), lpad('x', 10, ' '), rpad(o.name, o.rank * 1000000000, 'y')",
    "RETURN 'range(1, 100000000000)', `range`",
    "MATCH (n:Op) RETURN n.range",
    # after AS comes a name, never a clause; a CALL clause always names what it calls
    "MATCH (r:Runtime) RETURN r.name AS call, count(*) AS n ORDER BY n DESC, call",
    "MATCH (k:Kernel) RETURN k.name AS set, k.dur AS load",
]

REFUSED = [
    ("CHECKPOINT", "CHECKPOINT"),
    ("BEGIN TRANSACTION", "BEGIN"),
    ("COMMIT", "COMMIT"),
    ("CALL threads=1", "threads"),
    ("MATCH (n:Op) WITH n AS call CALL threads=1", "threads"),
    ("MATCH (n:Op) WITH n AS x SET n.name = 'x'", "SET"),
    ("CALL project_graph('g', ['Op'], ['CALLS'])", "project_graph"),
    ("LOAD FROM '/etc/shadow' (file_format='csv') RETURN *", "--allow-files"),
    ("LOAD FROM '/proc/self/environ' RETURN *", "--allow-files"),
    ("MATCH (n:Op) LOAD FROM '/etc/passwd' RETURN *", "--allow-files"),
    ("COPY (MATCH (n:Op) RETURN n.id) TO '/tmp/x.csv'", "--format csv"),
    ("UNWIND range(1, 100000000000) AS x RETURN count(x)", "range"),
    ("RETURN size(range(0, 2000000, 1))", "range"),
    # computed bounds (issue #22: `range(1, 100000*1000000)` reached 6.5 GB under a 5 s timeout)
    ("UNWIND range(1, 100000*1000000) AS x RETURN count(x)", "range"),
    ("RETURN range(1, (1000 + 1) * 1000)", "range"),
    ("RETURN range(-1000000, 1000000, 1)", "range"),
    ("RETURN range(1, -(-100000000000))", "range"),
    ("RETURN range(1, 100000000000 / 10)", "range"),
    ("RETURN range(1, CAST(1e11 AS INT64))", "range"),
    ("RETURN range(1, to_int64(10^11))", "range"),
    ("RETURN range(1, range(100000000000, 100000000001)[1])", "range"),
    ("RETURN range(1, [1, 100000000000][2])", "range"),
    ("RETURN range(1, size(range(1, 1000000)) * 1000000)", "range"),
    ("WITH 100000000000 AS n UNWIND range(1, n) AS x RETURN count(x)", "range"),
    ("WITH 1 AS m, 100000 * 1000000 AS n RETURN range(m, n)", "range"),
    ("WITH 5 AS n WITH 100000000000 AS n RETURN range(1, n)", "range"),
    ("MATCH (o:Op) RETURN range(1, 100000000000) // o.rank", "range"),
    ("RETURN repeat('x', 100000 * 100000)", "repeat"),
    ("RETURN lpad('x', 2000000000, 'y')", "lpad"),
    ("RETURN rpad('x', 20000000, 'y')", "rpad"),
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


def test_parameters_count_as_constants() -> None:
    cypher = "UNWIND range($lo, $hi) AS x RETURN count(x)"
    check_read_only(cypher, params={"lo": 1, "hi": 1000})
    check_read_only(cypher)  # values unknown: Kuzu decides
    with pytest.raises(QueryRefused, match="range"):
        check_read_only(cypher, params={"lo": 1, "hi": 100000 * 1000000})
    with pytest.raises(QueryRefused, match="range"):
        check_read_only("RETURN range(1, $xs[2])", params={"xs": [1, 10**11]})
    check_read_only("RETURN range(1, $s)", params={"s": "100000000000"})  # Kuzu refuses it


def test_every_canned_query_passes() -> None:
    """The library's own queries are read-only statements: a read handle runs each through the
    guard (launch-latency's `AS call` was once refused)."""
    for query in canned_queries().values():
        check_read_only(query.cypher, params=dict.fromkeys(query.params, 1))
