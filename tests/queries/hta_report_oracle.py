"""HTA 0.5.0's own standard analyses of trace folders: the oracle of `report --hta-compatible`.

Run with the HTA environment's python: `python hta_report_oracle.py JOBS.json OUT.json`, JOBS a
list of {"key", "trace_dir"}. Writes, per key, each analysis as records (or the error's last
line): temporal breakdown, comm/comp overlap, kernel type and all-kernel breakdowns, idle time
by stream, GPU user annotations, and the launch pairs of every rank. Every call with
visualize=False.
"""

import json
import logging
import math
import sys
import warnings

warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)


def records(frame):
    rows = frame.reset_index(drop=True).to_dict(orient="records")
    return [{k: _plain(v) for k, v in row.items()} for row in rows]


def _plain(value):
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def analyse(trace_dir):
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_dir=trace_dir)
    ranks = sorted(analysis.t.traces)
    out = {"ranks": ranks}
    calls = {
        "temporal": lambda: records(analysis.get_temporal_breakdown(visualize=False)),
        "overlap": lambda: records(analysis.get_comm_comp_overlap(visualize=False)),
        "kernel_types": lambda: records(analysis.get_gpu_kernel_breakdown(visualize=False)[0]),
        "all_kernels": lambda: records(analysis.get_gpu_kernel_breakdown(visualize=False)[1]),
        "idle": lambda: records(analysis.get_idle_time_breakdown(ranks=ranks, visualize=False)[0]),
        "gpu_annotations": lambda: records(
            analysis.get_gpu_user_annotation_breakdown(visualize=False)
            if analysis.t.symbol_table.sym_index.get("gpu_user_annotation") is not None
            else __import__("pandas").DataFrame()
        ),
        "launches": lambda: {
            str(rank): records(frame)
            for rank, frame in analysis.get_cuda_kernel_launch_stats(
                ranks=ranks, visualize=False
            ).items()
        },
    }
    for name, call in calls.items():
        try:
            out[name] = call()
        except Exception as exc:  # noqa: BLE001 - recorded as HTA's answer
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


def main():
    jobs = json.load(open(sys.argv[1]))
    answers = {job["key"]: analyse(job["trace_dir"]) for job in jobs}
    with open(sys.argv[2], "w") as f:
        json.dump(answers, f)


if __name__ == "__main__":
    main()
