// Critical path of one rank broken down by edge type: where the path's time goes (ops, launches, gaps, syncs).
// params: run (string), rank (int), edge_set (string)
// columns: edge_type, edges, total_us, share_pct
MATCH (x:Op:Runtime:Kernel)-[t:DEP]->(:Op:Runtime:Kernel)
WHERE t.edge_set = $edge_set AND x.run = $run AND x.rank = $rank AND t.path_order >= 0
WITH CAST(sum(t.weight_ns) AS DOUBLE) AS total
MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(:Op:Runtime:Kernel)
WHERE d.edge_set = $edge_set AND a.run = $run AND a.rank = $rank AND d.path_order >= 0
WITH total, d.type AS edge_type, count(*) AS edges, CAST(sum(d.weight_ns) AS DOUBLE) AS weight
RETURN edge_type, edges, weight / 1000.0 AS total_us,
       CASE WHEN total > 0 THEN 100.0 * weight / total ELSE 0.0 END AS share_pct
ORDER BY total_us DESC, edge_type;
