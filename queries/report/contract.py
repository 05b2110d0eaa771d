"""The report as JSON: the contract scripts rely on (docs/report.md, "The JSON contract").
Times in µs (floats, to the ns), one entry per rank, per step and per collective instance."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .report import Report


def _us(ns: int | float | None) -> float | None:
    return None if ns is None else round(ns / 1e3, 3)


def _by_rank(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        out[row["rank"]].append(row)
    return out


def _bound_json(bound: dict[str, Any]) -> dict[str, Any]:
    """What bound a step: rank, op, the path's length and its top-level segments, in µs."""
    return {
        "rank": bound["rank"],
        "op": bound["op"],
        "path_us": _us(bound.get("length_ns")),
        "segments": [
            {
                "rank": s["rank"],
                "name": s["name"],
                "kind": s["kind"],
                "us": _us(s["ns"]),
                "saving_us": _us(s.get("saving_ns")),
            }
            for s in bound.get("segments") or ()
        ],
    }


def _spread_json(row: dict[str, Any]) -> dict[str, Any]:
    """One metric's spread over the ranks in a step, in µs, and the ranks that stand out."""
    return {
        "ranks": row["ranks"],
        **{k.replace("_ns", "_us"): _us(row[k]) for k in ("min_ns", "p50_ns", "p90_ns", "max_ns")},
        "max_rank": row["max_rank"],
        "outliers": [int(r) for r in row["outliers"].split()],
    }


def report_json(report: Report) -> dict[str, Any]:
    t = {name: table.to_pylist() for name, table in report.tables.items()}
    temporal = {r["rank"]: r for r in t["temporal"]}
    overlap = {r["rank"]: r for r in t["overlap"]}
    launch = {r["rank"]: r for r in t["launches"]}
    idle, kinds, kernels, queues = (_by_rank(t[n]) for n in ("idle", "kernel_types",
                                                              "top_kernels", "queues"))  # fmt: skip
    annotations = _by_rank(t["gpu_annotations"])
    allocator = _by_rank(t["allocator"])
    categories, shapes = _by_rank(t["op_categories"]), _by_rank(t["op_shapes"])
    perf, modules = _by_rank(t["op_perf"]), _by_rank(t["module_tree"])
    sequences = _by_rank(t["kernel_sequences"])
    counters = _by_rank(t["counters"])
    ranks = []
    for rank in report.ranks:
        tr = temporal.get(rank, {})
        streams: dict[int, dict[str, Any]] = {}
        for row in idle.get(rank, []):
            entry = streams.setdefault(row["stream"], {"stream": row["stream"]})
            entry[f"{row['idle_category']}_us"] = _us(row["idle_ns"])
        ranks.append(
            {
                "rank": rank,
                "temporal": {
                    "idle_us": _us(tr.get("idle_ns")),
                    "compute_us": _us(tr.get("compute_ns")),
                    "non_compute_us": _us(tr.get("non_compute_ns")),
                    "kernel_us": _us(tr.get("kernel_time_ns")),
                    "idle_pct": tr.get("idle_pct"),
                    "compute_pct": tr.get("compute_pct"),
                    "non_compute_pct": tr.get("non_compute_pct"),
                    "idle_host_wait_us": _us(tr.get("idle_host_wait_ns")),
                    "idle_kernel_wait_us": _us(tr.get("idle_kernel_wait_ns")),
                    "idle_other_us": _us(tr.get("idle_other_ns")),
                },
                "comm_comp_overlap_pct": overlap.get(rank, {}).get("overlap_pct"),
                "idle": list(streams.values()),
                "kernel_types": {k["kernel_type"]: _us(k["total_ns"]) for k in kinds.get(rank, [])},
                "top_kernels": [
                    {
                        "kernel_type": k["kernel_type"],
                        "name": k["name"],
                        "names": k["names"],
                        "count": k["count"],
                        "total_us": _us(k["total_ns"]),
                        "mean_us": _us(k["mean_ns"]),
                        "min_us": _us(k["min_ns"]),
                        "max_us": _us(k["max_ns"]),
                        "std_us": _us(k["std_ns"]),
                    }  # fmt: skip
                    for k in kernels.get(rank, [])
                ],
                "launch": {
                    k.replace("_ns", "_us"): (_us(v) if k.endswith("_ns") else v)
                    for k, v in launch.get(rank, {}).items()
                    if k != "rank"
                },  # fmt: skip
                "queues": [
                    {
                        "stream": q["stream"],
                        "launches": q["launches"],
                        "max": q["max"],
                        "mean": round(q["mean"], 3),
                        "full_us": _us(q["full_ns"]),
                    }  # fmt: skip
                    for q in queues.get(rank, [])
                ],
                "gpu_annotations": [
                    {
                        "name": a["name"],
                        "count": a["count"],
                        **{
                            k.replace("_ns", "_us"): _us(a[k])
                            for k in ("total_ns", "mean_ns", "min_ns", "max_ns", "std_ns")
                        },
                    }  # fmt: skip
                    for a in annotations.get(rank, [])
                ],
                "allocator": [
                    {
                        **{k: v for k, v in a.items() if k not in ("rank", "peak_offset_ns")},
                        "peak_offset_us": _us(a["peak_offset_ns"]),
                    }
                    for a in allocator.get(rank, [])
                ],
                "op_categories": [
                    {
                        **{k: c[k] for k in ("category", "launchers", "kernels", "pct")},
                        "gpu_us": _us(c["gpu_ns"]),
                    }
                    for c in categories.get(rank, [])
                ],  # fmt: skip
                "op_shapes": [_shape(o) for o in shapes.get(rank, [])],
                "op_perf": [_perf(o) for o in perf.get(rank, [])],
                "module_tree": [
                    {
                        **{k: m[k] for k in ("module", "depth", "calls", "kernels")},
                        **{
                            k.replace("_ns", "_us"): _us(m[k])
                            for k in ("cpu_ns", "gpu_ns", "self_gpu_ns")
                        },
                    }
                    for m in modules.get(rank, [])
                ],  # fmt: skip
                "kernel_sequences": [
                    {
                        **{k: s[k] for k in ("op", "sequence", "kernels", "count")},
                        "kernel_us": _us(s["kernel_ns"]),
                        "cpu_us": _us(s["cpu_ns"]),
                        "first_ev_idx": s["first_ev_idx"],
                    }
                    for s in sequences.get(rank, [])
                ],
                "counters": [
                    {k: v for k, v in c.items() if k != "rank"} for c in counters.get(rank, [])
                ],
            }
        )
    stragglers = {s["step"]: s for s in t["stragglers"]}
    steps: dict[int, dict[str, Any]] = {}
    for row in t["steps"]:
        entry = steps.setdefault(row["step"], {"step": row["step"], "durations_us": {}})
        entry["durations_us"][str(row["rank"])] = _us(row["step_ns"])
    for number, entry in steps.items():
        s = stragglers.get(number)
        entry["straggler"] = (
            {
                "rank": s["rank"],
                "late_us": _us(s["late_ns"]),
                "collective": s["collective"],
                "caused_wait_us": _us(s["wait_caused_ns"]),
            }  # fmt: skip
            if s is not None
            else None
        )
        bound = report.bound_by.get(number)
        entry["bound_by"] = None if bound is None else _bound_json(bound)
        entry["across_ranks"] = {
            s["metric"]: _spread_json(s) for s in t.get("spread", ()) if s["step"] == number
        }
    return {
        "run": report.run,
        "mode": report.mode,
        "step": report.step,
        "ranks": ranks,
        "steps": [steps[n] for n in sorted(steps)],
        "collectives": [
            {
                **{k: v for k, v in c.items() if not k.endswith("_ns")},
                "skew_us": _us(c["skew_ns"]),
                "wait_caused_us": _us(c["wait_caused_ns"]),
                "latency_us": _us(c["latency_ns"]),
                "waits_us": {r: _us(w) for r, w in json.loads(c["waits_ns"]).items()},
            }
            for c in t["collectives"]
        ],
        "collective_ranks": [
            {
                "rank": c["rank"],
                "arrived_last": c["arrived_last"],
                "wait_caused_us": _us(c["wait_caused_ns"]),
                "waited_us": _us(c["waited_ns"]),
                "clock_offset_us": _us(c["clock_offset_ns"]),
            }  # fmt: skip
            for c in t["collective_ranks"]
        ],
        "memory": [
            {**{k: v for k, v in m.items() if k != "total_ns"}, "total_us": _us(m["total_ns"])}
            for m in t["memory"]
        ],
        "nodes": [
            {
                "host": n["host"],
                "ranks": _listed(n["rank_list"]),
                "stand_out": [int(r) for r in n["stand_out"].split()],
                "late_max_us": _us(n["late_max_ns"]),
                "late_max_rank": n["late_max_rank"],
                "compute_max_pct": n["compute_max_pct"],
                "compute_max_rank": n["compute_max_rank"],
            }
            for n in t.get("nodes", ())
        ],
        "unmatched": [
            {
                "collective": u["collective"],
                "process_group": u["process_group"],
                "seq": u["seq"],
                "ranks": json.loads(u["ranks"]),
                "missing": json.loads(u["missing"]),
                "steps": json.loads(u["steps"]),
                "waited_us": _us(u["waited_ns"]),
            }
            for u in t.get("unmatched", ())
        ],
        "findings": [f.to_json() for f in report.findings],
    }


def _listed(ranges: str) -> list[int]:
    """The ranks of a `rank_ranges` text ("0–3, 7")."""
    out: list[int] = []
    for part in ranges.split(", "):
        lo, _, hi = part.partition("–")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _shape(row: dict[str, Any]) -> dict[str, Any]:
    """An op x shape row: its recorded arguments as JSON values (null where not recorded)."""
    out: dict[str, Any] = {"name": row["name"], "category": row["category"]}
    for key in ("input_dims", "input_types", "input_strides", "concrete_inputs"):
        out[key] = json.loads(row[key]) if row[key] else None
    out |= {"count": row["count"], "kernels": row["kernels"]}
    for key in ("gpu_total_ns", "gpu_mean_ns", "gpu_min_ns", "gpu_max_ns", "cpu_total_ns"):
        out[key.replace("_ns", "_us")] = _us(row[key])
    return out


def _perf(row: dict[str, Any]) -> dict[str, Any]:
    """An op_perf row: its recorded arguments as JSON values, its time per call in µs."""
    out: dict[str, Any] = {"name": row["name"], "category": row["category"]}
    for key in ("input_dims", "input_types", "input_strides", "concrete_inputs"):
        out[key] = json.loads(row[key]) if row[key] else None
    out["gpu_mean_us"] = row["gpu_mean_ns"] / 1e3
    skip = ("rank", "name", "category", "input_dims", "input_types", "input_strides",
            "concrete_inputs", "gpu_mean_ns")  # fmt: skip
    return out | {k: v for k, v in row.items() if k not in skip}
