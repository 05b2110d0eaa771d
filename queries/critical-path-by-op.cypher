// Critical path of one rank broken down by event: the ops, runtime calls and kernels whose own span lies on it.
// params: run (string), rank (int), edge_set (string)
// columns: kind, name, spans, total_us
// Each operator_kernel edge on the path belongs to one event, as HTA attributes it (an edge
// leaving a start to its source, an end->end edge to its destination, the parent being unwound,
// an end->start gap between siblings to their parent, the source's CALLS parent, or the source
// where it has none). spans = events of that kind and name with path time, total_us = that time.
MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(b:Op:Runtime:Kernel)
WHERE d.edge_set = $edge_set AND a.run = $run AND a.rank = $rank AND d.path_order >= 0
  AND d.type = 'operator_kernel'
OPTIONAL MATCH (p:Op:Runtime)-[:CALLS]->(a)
WITH d, a, b, p,
     CASE WHEN d.src_boundary = 'start' THEN 'a' WHEN d.dst_boundary = 'end' THEN 'b'
          WHEN p IS NULL THEN 'a' ELSE 'p' END AS who
WITH d.weight_ns AS w,
     CASE who WHEN 'a' THEN a.id WHEN 'b' THEN b.id ELSE p.id END AS event,
     CASE who WHEN 'a' THEN label(a) WHEN 'b' THEN label(b) ELSE label(p) END AS kind,
     CASE who WHEN 'a' THEN a.name WHEN 'b' THEN b.name ELSE p.name END AS name
WITH kind, name, event, sum(w) AS w
WITH kind, name, count(*) AS spans, sum(w) AS w
RETURN kind, name, spans, CAST(w AS DOUBLE) / 1000.0 AS total_us
ORDER BY total_us DESC, spans DESC, kind, name
LIMIT 30;
