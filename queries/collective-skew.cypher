// Collective instances of a run by the spread of their participants' start times (arrival skew).
// params: run (string)
// columns: collective, process_group, seq, participants, skew_us, last_rank
MATCH (k:Op:Kernel)-[:PART_OF]->(c:Collective)
WHERE c.run = $run
WITH c, k ORDER BY k.ts, k.rank SKIP 0
WITH c, collect(k.rank) AS ranks, min(k.ts) AS first_start, max(k.ts) AS last_start
RETURN c.name AS collective, c.process_group AS process_group, c.seq AS seq,
       size(ranks) AS participants,
       (last_start - first_start) / 1000.0 AS skew_us, ranks[size(ranks)] AS last_rank
ORDER BY skew_us DESC, collective, process_group, seq
LIMIT 50;
