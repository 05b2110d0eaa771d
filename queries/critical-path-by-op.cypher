// Critical path of one rank broken down by event: the ops, runtime calls and kernels whose own span lies on it.
// params: run (string), rank (int), edge_set (string)
// columns: kind, name, spans, total_us
MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(b:Op:Runtime:Kernel)
WHERE d.edge_set = $edge_set AND a.run = $run AND a.rank = $rank AND d.path_order >= 0
  AND d.type = 'operator_kernel'
RETURN label(a) AS kind, a.name AS name, count(*) AS spans, sum(d.weight_ns) / 1000.0 AS total_us
ORDER BY total_us DESC
LIMIT 30;
