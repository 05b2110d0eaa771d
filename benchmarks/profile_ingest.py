"""Where one ingest spends its time and memory: stage timers, RSS per stage, and cProfile.

Wraps the pipeline's seams from outside (nothing in `ingest/` changes): parse and its steps, the
per-rank link steps, and the `GraphStore` methods that talk to Kuzu. Seams that no longer exist
are skipped. Time outside the top-level stages counts as "other".

    python benchmarks/profile_ingest.py [TRACE ...] [--repeat 3] [--top 25]
    python benchmarks/profile_ingest.py [TRACE ...] --memory     (one cold run, RSS per stage)
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import io
import os
import pstats
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from _common import CONTROL, median, print_table, raw_json_bytes

from tracegraph.explorer.entry import ALLOCATOR_VARIABLE
from tracegraph.ingest import (
    collectives,
    columns,
    decode,
    file_bytes,
    link,
    nodes,
    parse,
    read,
    store,
    syncs,
)
from tracegraph.ingest.pipeline import IngestOptions, ingest

PAGE = os.sysconf("SC_PAGE_SIZE")
PARSE = "parse"
KUZU = "kuzu"
_DONE = object()  # a generator seam's end

# (owner, attribute, stage); stages named "a/b" are steps inside top-level stage "a". A function
# is patched in each module that calls it by its own name (`parse` imports the stages' functions;
# `read` calls them through their modules).
SEAMS: list[tuple[ModuleType | type, str, str]] = [
    (read, "rank_traces", PARSE),  # a generator: timed while it makes each rank
    (file_bytes, "json_blocks", "parse/read+gunzip"),
    (decode, "decode_blob", "parse/msgspec decode (trace, args)"),
    (parse, "decode_blob", "parse/msgspec decode (trace, args)"),
    (columns, "decode_blob", "parse/msgspec decode (trace, args)"),
    (columns, "event_table", "parse/event table (arrow)"),
    (parse, "event_table", "parse/event table (arrow)"),
    (columns, "_decode_args", "parse/event table/args"),
    (parse, "_split_by_rank", "parse/split by rank"),
    (nodes, "with_keys", "link/keys"),
    (nodes, "node_tables", "link/node tables"),
    (link, "call_edges", "link/CALLS"),
    (link, "launch_edges", "link/LAUNCHES"),
    (link, "stream_edges", "link/NEXT_ON_STREAM"),
    (syncs, "sync_edges", "link/SYNCS"),
    (collectives, "participants", "link/collective participants"),
    (collectives, "match", "link/collective match"),
    (store.GraphStore, "create_schema", "kuzu/schema"),
    (store.GraphStore, "copy", "kuzu/COPY"),
    (store.GraphStore, "commit", "kuzu/commit"),
    (store.GraphStore, "commit_and_pause", "kuzu/commit a batch"),
    (store.GraphStore, "resume", "kuzu/reopen"),
    (store.GraphStore, "close", "kuzu/close (checkpoint)"),
]


def _rss_now() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE


def _rss_peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@dataclass
class Probe:
    """Seconds per stage, and the process peak RSS when each stage first ended (memory mode)."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    peak_after: dict[str, int] = field(default_factory=dict)
    sampled_max: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    active: list[str] = field(default_factory=list)


@contextmanager
def probed(sample_s: float = 0.0) -> Iterator[Probe]:
    """Patch the seams to time them (and sample RSS every `sample_s` s when > 0)."""
    probe = Probe()
    patched: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, attr: str, stage: str) -> None:
        original = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            label = stage
            if stage == "kuzu/COPY" and len(args) > 1:
                label = f"kuzu/COPY {args[1]}"
            with timing(label):
                return original(*args, **kwargs)

        def timed_steps(*args: Any, **kwargs: Any) -> Iterator[Any]:
            # a generator's work is done as it is iterated: each step is timed, not its caller's
            steps = original(*args, **kwargs)
            try:
                while True:
                    with timing(stage):
                        item = next(steps, _DONE)
                    if item is _DONE:
                        return
                    yield item
            finally:
                steps.close()  # its clean-up (a spill folder) now, as the caller's close asks

        patched.append((owner, attr, original))
        setattr(owner, attr, timed_steps if inspect.isgeneratorfunction(original) else timed)

    @contextmanager
    def timing(label: str) -> Iterator[None]:
        probe.active.append(label)
        start = time.perf_counter()
        try:
            yield
        finally:
            probe.seconds[label] += time.perf_counter() - start
            probe.active.pop()
            probe.peak_after.setdefault(label, _rss_peak())

    for owner, attr, stage in SEAMS:
        # a seam renamed or moved must fail here, not leave its stage's time under "other"
        assert hasattr(owner, attr), f"{owner.__name__}.{attr}: no such seam"
        wrap(owner, attr, stage)
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(sample_s):
            label = probe.active[-1] if probe.active else "other"
            probe.sampled_max[label] = max(probe.sampled_max[label], _rss_now())

    sampler = threading.Thread(target=sample, daemon=True) if sample_s > 0 else None
    if sampler:
        sampler.start()
    try:
        yield probe
    finally:
        stop.set()
        if sampler:
            sampler.join()
        for owner, attr, original in reversed(patched):
            setattr(owner, attr, original)


def probed_ingest(paths: Sequence[Path], sample_s: float = 0.0) -> tuple[float, Probe]:
    """One ingest into a fresh database: total wall time and the probe."""
    folder = Path(tempfile.mkdtemp(prefix="tg-prof-"))
    try:
        with probed(sample_s) as probe:
            start = time.perf_counter()
            ingest(list(paths), folder / "p.kuzu", IngestOptions(run="profile"))
            total = time.perf_counter() - start
        return total, probe
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _top(stage: str) -> str:
    return stage.split("/", 1)[0]


def _top_level(seconds: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for stage, value in seconds.items():
        if "/" not in stage or stage.startswith(KUZU + "/"):
            out[_top(stage)] += value
    return out


def time_report(paths: Sequence[Path], repeat: int) -> None:
    """Stage times: the cold first run in this process, then the median of `repeat` warm runs."""
    cold_total, cold = probed_ingest(paths)
    runs = [probed_ingest(paths) for _ in range(repeat)]
    total = median([t for t, _ in runs])

    def row(stage: str, pick: Callable[[float, Probe], float]) -> list[object]:
        warm = median([pick(t, p) for t, p in runs])
        return [stage, pick(cold_total, cold), warm, f"{100 * warm / total:.0f}%"]

    stages = sorted({s for _, p in runs for s in p.seconds}, key=lambda s: (_top(s) != PARSE, s))
    rows = [row(s, _stage_seconds(s)) for s in stages]
    for top in (PARSE, "link", KUZU):
        rows.append(row(f"= {top} total", _stage_total(top)))
    rows.append(
        row("= other (pipeline glue)", lambda t, p: t - sum(_top_level(p.seconds).values()))
    )
    rows.append(row("= ingest total", lambda t, _p: t))
    print(f"== {', '.join(map(str, paths))}: cold first run, then median of {repeat} warm")
    print_table(["stage", "cold s", "warm s", "warm share"], rows)
    parse_s = median([_top_level_total(p, PARSE) for _, p in runs])
    kuzu_s = median([_top_level_total(p, KUZU) for _, p in runs])
    print(f"parse / kuzu (COPY+commit+close) = {parse_s / kuzu_s:.2f}")


def _stage_seconds(stage: str) -> Callable[[float, Probe], float]:
    return lambda _total, probe: probe.seconds.get(stage, 0.0)


def _stage_total(top: str) -> Callable[[float, Probe], float]:
    return lambda _total, probe: _top_level_total(probe, top)


def _top_level_total(probe: Probe, top: str) -> float:
    if top == "link":
        return sum(v for k, v in probe.seconds.items() if _top(k) == "link")
    return _top_level(probe.seconds).get(top, 0.0)


def memory_report(paths: Sequence[Path]) -> None:
    """One cold ingest: peak RSS after each stage first ended, and the max RSS sampled within."""
    start_rss = _rss_now()
    total, probe = probed_ingest(paths, sample_s=0.005)
    raw = sum(raw_json_bytes(p) for p in paths)
    names = ", ".join(map(str, paths))
    print(f"== {names}: one cold run, {total:.2f} s, raw JSON {raw / 1e6:.1f} MB")
    print(f"RSS before ingest: {start_rss / 2**20:,.0f} MiB (interpreter + imports)")
    order = sorted(probe.peak_after, key=lambda s: probe.peak_after[s])
    rows = []
    for stage in order:
        rows.append(
            [
                stage,
                f"{probe.sampled_max.get(stage, 0) / 2**20:,.0f}",
                f"{probe.peak_after[stage] / 2**20:,.0f}",
                f"{probe.peak_after[stage] / raw:.2f}x",
            ]
        )
    rows.append(["other", f"{probe.sampled_max.get('other', 0) / 2**20:,.0f}", "", ""])
    print_table(["stage (by first end)", "max RSS within MiB", "peak so far MiB", "/raw"], rows)
    print(f"process peak: {_rss_peak() / 2**20:,.0f} MiB = {_rss_peak() / raw:.2f}x raw")


def cprofile_top(paths: Sequence[Path], top: int) -> str:
    """cProfile of one ingest, the `top` entries by cumulative and by internal time."""
    folder = Path(tempfile.mkdtemp(prefix="tg-prof-"))
    profiler = cProfile.Profile()
    try:
        profiler.runcall(ingest, list(paths), folder / "p.kuzu", IngestOptions(run="profile"))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    if ALLOCATOR_VARIABLE not in os.environ:  # as the tracegraph command: chosen before pyarrow
        env = {**os.environ, ALLOCATOR_VARIABLE: "system"}
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", type=Path, nargs="*", help="trace files, ingested as one run")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--top", type=int, default=25, help="cProfile entries (0: skip cProfile)")
    p.add_argument("--memory", action="store_true", help="RSS per stage of one cold run instead")
    args = p.parse_args(argv)
    paths = args.trace or [CONTROL]
    if args.memory:
        memory_report(paths)
        return 0
    time_report(paths, args.repeat)
    if args.top:
        print(cprofile_top(paths, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
