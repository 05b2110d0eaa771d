// Launch delay per runtime call name on one rank: time from the launching call to its GPU work.
// params: run (string), rank (int)
// columns: call, launches, mean_delay_us, max_delay_us
MATCH (r:Runtime)-[:LAUNCHES]->(k:Kernel)
WHERE r.run = $run AND r.rank = $rank
RETURN r.name AS call, count(*) AS launches,
       avg(k.ts - r.ts) / 1000.0 AS mean_delay_us, max(k.ts - r.ts) / 1000.0 AS max_delay_us
ORDER BY launches DESC, call;
