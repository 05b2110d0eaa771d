"""HTA's own time series of GPU work (`get_queue_length_time_series`,
`get_memory_bw_time_series`): the oracle of `queue_length_series` and `memory_bandwidth_series`.

Run with an HTA environment's python: `python hta_series_oracle.py TRACE_DIR OUT.json`. Writes,
per rank, each series as rows [ts, stream or kind, value] in HTA's own order (its default
reading, as `report --hta-compatible` mirrors it: the last ProfilerStep left out).
"""

import json
import logging
import sys
import warnings

warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)


def main():
    from hta.trace_analysis import TraceAnalysis

    analysis = TraceAnalysis(trace_dir=sys.argv[1])
    ranks = sorted(analysis.t.traces)
    queues = analysis.get_queue_length_time_series(ranks=ranks)
    bandwidth = analysis.get_memory_bw_time_series(ranks=ranks)
    out = {
        str(rank): {
            "queue": []
            if rank not in queues
            else [
                [int(t), int(s), int(q)]
                for t, s, q in queues[rank][["ts", "stream", "queue_length"]].values.tolist()
            ],
            "bandwidth": []
            if rank not in bandwidth
            else [
                [float(t), str(k), float(g)]
                for t, k, g in bandwidth[rank][["ts", "name", "memory_bw_gbps"]].values.tolist()
            ],
        }
        for rank in ranks
    }
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
