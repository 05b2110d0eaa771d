// Host and stream synchronizations on one rank: the GPU work each one waited for; wait_us is the
// span of a host call that waited (a stream wait on the GPU has no span of its own: null).
// params: run (string), rank (int)
// columns: sync_type, waiter, waiter_ts_ns, waited_for, waited_for_end_ns, wait_us
MATCH (k:Kernel)-[s:SYNCS]->(w:Runtime:Kernel)
WHERE k.run = $run AND k.rank = $rank
RETURN s.sync_type AS sync_type, w.name AS waiter, w.ts AS waiter_ts_ns, k.name AS waited_for,
       k.ts + k.dur AS waited_for_end_ns,
       CASE WHEN label(w) = 'Runtime' THEN w.dur / 1000.0 ELSE NULL END AS wait_us
ORDER BY waiter_ts_ns, waited_for_end_ns, sync_type, waiter, waited_for;
