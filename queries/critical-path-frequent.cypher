// Events that lie on the critical path most often, across every rank and step of a run's edge set.
// params: run (string), edge_set (string)
// columns: kind, name, times_on_path, ranks, total_us
// Path time is attributed to events as in critical-path-by-op. times_on_path = events of that
// kind and name with path time, ranks = the ranks they are on. No count(DISTINCT ...) here, since
// in Kuzu 0.11.3 it nulls every other aggregate of the same RETURN or WITH.
MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(b:Op:Runtime:Kernel)
WHERE d.edge_set = $edge_set AND a.run = $run AND d.path_order >= 0 AND d.type = 'operator_kernel'
OPTIONAL MATCH (p:Op:Runtime)-[:CALLS]->(a)
WITH d, a, b, p,
     CASE WHEN d.src_boundary = 'start' THEN 'a' WHEN d.dst_boundary = 'end' THEN 'b'
          WHEN p IS NULL THEN 'a' ELSE 'p' END AS who
WITH d.weight_ns AS w,
     CASE who WHEN 'a' THEN a.id WHEN 'b' THEN b.id ELSE p.id END AS event,
     CASE who WHEN 'a' THEN a.rank WHEN 'b' THEN b.rank ELSE p.rank END AS rank,
     CASE who WHEN 'a' THEN label(a) WHEN 'b' THEN label(b) ELSE label(p) END AS kind,
     CASE who WHEN 'a' THEN a.name WHEN 'b' THEN b.name ELSE p.name END AS name
WITH kind, name, event, rank, sum(w) AS w
WITH kind, name, count(*) AS times_on_path, size(list_distinct(collect(rank))) AS ranks,
     sum(w) AS w
RETURN kind, name, times_on_path, ranks, CAST(w AS DOUBLE) / 1000.0 AS total_us
ORDER BY times_on_path DESC, total_us DESC, kind, name
LIMIT 30;
