// Sync edges of an edge set, on and off the critical path: what Chakra keeps (on) and drops (off).
// params: run (string), edge_set (string)
// columns: rank, on_critical_path, waited_for, waiter, waiter_kind, dst_boundary, src_end_ns, dst_ts_ns
MATCH (a:Op:Runtime:Kernel)-[d:DEP]->(b:Op:Runtime:Kernel)
WHERE d.edge_set = $edge_set AND a.run = $run AND d.type = 'sync_dependency'
RETURN a.rank AS rank, d.on_critical_path AS on_critical_path, a.name AS waited_for,
       b.name AS waiter, label(b) AS waiter_kind, d.dst_boundary AS dst_boundary,
       a.ts + a.dur AS src_end_ns, b.ts AS dst_ts_ns
ORDER BY rank, src_end_ns, dst_ts_ns, waited_for, waiter;
