"""HTA as the oracle: its own loading (trace_dir, its rank detection) and its own CPGraph.

Run with an HTA environment's python: `python -I hta_oracle.py JOBS.json OUT.json`, where
JOBS.json is a list of {"key", "trace_dir" (or "trace_files": {rank: path}), "annotation",
"instance_id"}. Independent of
tracegraph on purpose (stdlib + hta only), following HTA's API as documented in SPEC.md.
"""

from __future__ import annotations

import json
import logging
import sys
import warnings


def _ns(micros: object) -> int:
    value = float(micros)  # type: ignore[arg-type]
    return int(micros) * 1000 if value.is_integer() else round(value * 1000)  # type: ignore[call-overload]


def analyze(job: dict) -> dict[str, object]:
    from hta.trace_analysis import TraceAnalysis

    annotation, instance_id = job["annotation"], job["instance_id"]
    try:
        if "trace_files" in job:
            ta = TraceAnalysis(trace_files={int(r): p for r, p in job["trace_files"].items()})
        else:
            ta = TraceAnalysis(trace_dir=job["trace_dir"])
    except Exception as exc:  # noqa: BLE001 - the failure is the answer
        return {"load": {"ok": False, "message": f"{type(exc).__name__}: {exc}"}}
    ranks: dict[str, object] = {}
    for rank in sorted(ta.t.get_ranks()):
        try:
            result = ta.critical_path_analysis(rank, annotation, instance_id)
        except Exception as exc:  # noqa: BLE001 - the failure is the answer
            ranks[str(rank)] = {"ok": False, "message": f"{type(exc).__name__}: {exc}"}
            continue
        if result is None:
            ranks[str(rank)] = {"ok": False, "message": "no result"}
            continue
        g, ok = result
        edges = []
        for u, v, d in g.edges(data=True):
            e, s, t = d["object"], g.node_list[u], g.node_list[v]
            edges.append(
                [
                    int(s.ev_idx),
                    "start" if s.is_start else "end",
                    int(t.ev_idx),
                    "start" if t.is_start else "end",
                    e.type.name.lower(),
                    _ns(d["weight"]),
                    e in g.critical_path_edges_set,
                ]
            )
        length = sum(_ns(g.edges[e.begin, e.end]["weight"]) for e in g.critical_path_edges_set)
        ranks[str(rank)] = {"ok": bool(ok), "edges": edges, "path_length_ns": length}
    return ranks


def main() -> None:
    logging.disable(logging.ERROR)
    warnings.filterwarnings("ignore")
    jobs = json.load(open(sys.argv[1]))
    out = {j["key"]: analyze(j) for j in jobs}
    with open(sys.argv[2], "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main()
