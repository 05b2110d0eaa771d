// GPU activities of one rank by total time: the kernels worth looking at first.
// params: run (string), rank (int)
// columns: name, cat, count, total_us, mean_us, max_us
MATCH (k:Kernel)
WHERE k.run = $run AND k.rank = $rank
RETURN k.name AS name, k.cat AS cat, count(*) AS count,
       sum(k.dur) / 1000.0 AS total_us, avg(k.dur) / 1000.0 AS mean_us, max(k.dur) / 1000.0 AS max_us
ORDER BY total_us DESC, name, cat
LIMIT 25;
