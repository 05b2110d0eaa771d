// The critical path of one rank in an edge set, in order: each edge, its weight and share of the path.
// params: run (string), rank (int), edge_set (string)
// columns: position, edge_type, src, src_boundary, dst, dst_boundary, weight_us, share_pct, src_ev_idx, dst_ev_idx
MATCH (x:Op:Runtime:Kernel)-[t:DEP]->(:Op:Runtime:Kernel)
WHERE t.edge_set = $edge_set AND x.run = $run AND x.rank = $rank AND t.path_order >= 0
WITH CAST(sum(t.weight_ns) AS DOUBLE) AS total
MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(b:Op:Runtime:Kernel)
WHERE d.edge_set = $edge_set AND a.run = $run AND a.rank = $rank AND d.path_order >= 0
RETURN d.path_order AS position, d.type AS edge_type, a.name AS src, d.src_boundary AS src_boundary,
       b.name AS dst, d.dst_boundary AS dst_boundary, d.weight_ns / 1000.0 AS weight_us,
       CASE WHEN total > 0 THEN 100.0 * d.weight_ns / total ELSE 0.0 END AS share_pct,
       a.ev_idx AS src_ev_idx, b.ev_idx AS dst_ev_idx
ORDER BY position;
