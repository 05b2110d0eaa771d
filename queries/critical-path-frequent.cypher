// Events that lie on the critical path most often, across every rank and step of a run's edge set.
// params: run (string), edge_set (string)
// columns: kind, name, times_on_path, ranks, total_us
MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(b:Op:Runtime:Kernel)
WHERE d.edge_set = $edge_set AND a.run = $run AND d.path_order >= 0 AND d.type = 'operator_kernel'
RETURN label(a) AS kind, a.name AS name, count(*) AS times_on_path,
       count(DISTINCT a.rank) AS ranks, sum(d.weight_ns) / 1000.0 AS total_us
ORDER BY times_on_path DESC, total_us DESC
LIMIT 30;
