"""HTA's own CUPTI counters joined to operators (`get_cupti_counter_data_with_operators`): the
oracle of `counters`.

Run with an HTA environment's python: `python hta_counters_oracle.py TRACE_DIR OUT.json RANK...`.
Writes, per rank, HTA's rows in its order: [range name, ts µs, op_stack, top_level_op,
bottom_level_op, {counter: value}] (no entry for a rank HTA gives nothing for).
"""

import json
import logging
import sys
import warnings

warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)

FIXED = {
    "name",
    "cat",
    "ts",
    "dur",
    "pid",
    "tid",
    "index",
    "index_runtime",
    "op_stack",
    "top_level_op",
    "bottom_level_op",
    "stream",
    "correlation",
    "ph",
    "id",
    "s_name",
    "s_cat",
    "iteration",
    "index_correlation",
    "end",
    "rank",
    "external_id",
    "device",
}


def main():
    from hta.trace_analysis import TraceAnalysis

    trace_dir, out_path, ranks = sys.argv[1], sys.argv[2], [int(r) for r in sys.argv[3:]]
    analysis = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)
    out = {}
    for rank in ranks:
        frames = analysis.get_cupti_counter_data_with_operators(ranks=[rank])
        if not frames:
            continue
        frame = frames[0]
        counters = [c for c in frame.columns if c not in FIXED and "." in c]
        rows = []
        for _, row in frame.iterrows():
            values = {c: float(row[c]) for c in counters if row[c] == row[c]}
            rows.append(
                [
                    row["name"],
                    float(row["ts"]),
                    list(row["op_stack"]),
                    row["top_level_op"],
                    row["bottom_level_op"],
                    values,
                ]
            )
        out[str(rank)] = rows
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
