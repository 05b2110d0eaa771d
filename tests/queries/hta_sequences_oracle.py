"""HTA's own frequent kernel sequences (`get_frequent_cuda_kernel_sequences`): the oracle of
`kernel_sequences` with HTA's starting rule.

Run with an HTA environment's python: `python hta_sequences_oracle.py TRACE_DIR OUT.json OP...`.
Writes, per "rank|op", HTA's rows [pattern, count, GPU kernel µs, CPU op µs] with every kernel
count (min_pattern_len=1) and every ProfilerStep (include_last_profiler_step=True).
"""

import json
import logging
import sys
import tempfile
import warnings

warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)


def main():
    from hta.trace_analysis import TraceAnalysis

    trace_dir, out_path, ops = sys.argv[1], sys.argv[2], sys.argv[3:]
    analysis = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)
    columns = ["pattern", "count", "GPU kernel duration (us)", "CPU op duration (us)"]
    out = {}
    with tempfile.TemporaryDirectory() as overlaid:
        for rank in sorted(analysis.t.traces):
            for op in ops:
                frame = analysis.get_frequent_cuda_kernel_sequences(
                    operator_name=op,
                    output_dir=overlaid,
                    min_pattern_len=1,
                    rank=rank,
                    visualize=False,
                )
                rows = [] if frame.empty else frame[columns].values.tolist()
                out[f"{rank}|{op}"] = [[p, int(c), float(g), float(u)] for p, c, g, u in rows]
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
