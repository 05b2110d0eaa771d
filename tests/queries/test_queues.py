"""The launch queue per stream (`analyses.queue_lengths`): the time it held at least N kernels
launched and not started (at N = 1,024, CUDA's limit, the next launch blocks), against a
plain-Python count over the raw JSON of a real H100 step, at several N."""

from __future__ import annotations

from collections import defaultdict

import pytest

from tracegraph.ingest.edgesets.native.frame import frame_source
from tracegraph.ingest.parse import parse_file
from tracegraph.queries.report.activity import exact_activity
from tracegraph.queries.report.analyses import queue_lengths

from ..conftest import TRACES
from .test_launchers import GPU, _events, _ns, json_launch_owners

H100 = TRACES / "tracelens/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


def json_waiting(path, full_at: int) -> dict[int, int]:  # noqa: ANN001
    """Per stream: ns with >= full_at kernels launched and not yet started."""
    events = _events(path)
    owner = json_launch_owners([(i, e) for i, e in enumerate(events) if e.get("ph") == "X"])
    changes: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("ph") == "X" and e.get("cat") in GPU and corr in owner:
            stream = e["args"].get("stream", e.get("tid"))
            changes[stream] += [(owner[corr][1], 1), (_ns(e["ts"]), -1)]
    out = {}
    for stream, points in changes.items():
        points.sort()  # at one instant, -1 (a start) before +1 (a launch)
        depth, full = 0, 0
        for (t, step), (t_next, _) in zip(points, points[1:] + [points[-1]], strict=True):
            depth += step
            if depth >= full_at:
                full += t_next - t
        out[stream] = full
    return out


def test_time_at_a_full_launch_queue_equals_the_raw_json() -> None:
    if not H100.is_file():
        pytest.skip(f"real traces not at {TRACES}")
    gpu = exact_activity(frame_source(parse_file(H100)[0]))
    deepest = max(r["max"] for r in queue_lengths(gpu))
    for full_at in (1, 2, deepest - 1, deepest, 1024):
        got = {r["stream"]: r["full_ns"] for r in queue_lengths(gpu, full_at)}
        assert got == json_waiting(H100, full_at), full_at
    assert any(v > 0 for v in json_waiting(H100, 2).values())
    assert all(r["full_ns"] == 0 for r in queue_lengths(gpu))  # never 1,024 deep here
