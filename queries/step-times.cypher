// ProfilerStep#N durations per rank of a run: the spread across ranks shows the stragglers.
// params: run (string)
// columns: rank, step, start_ns, dur_us
MATCH (s:Op)
WHERE s.run = $run AND s.cat = 'user_annotation' AND s.name STARTS WITH 'ProfilerStep#'
RETURN s.rank AS rank, s.name AS step, s.ts AS start_ns, s.dur / 1000.0 AS dur_us
ORDER BY step, rank;
