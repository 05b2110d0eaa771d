// ProfilerStep#N durations per rank of a run: the spread across ranks shows the stragglers.
// params: run (string)
// columns: rank, step, start_ns, dur_us
MATCH (s:Op)
WHERE s.run = $run AND s.cat IN ['user_annotation', 'Operator']
  AND regexp_matches(s.name, '^ProfilerStep#[0-9]{1,18}$')
WITH s, CAST(substring(s.name, 14, size(s.name)) AS INT64) AS n
RETURN s.rank AS rank, s.name AS step, s.ts AS start_ns, s.dur / 1000.0 AS dur_us
ORDER BY n, rank, start_ns;
