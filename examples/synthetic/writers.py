"""The trace files: each rank's own file (`write_per_rank`) or one merged file holding every rank
(`write_merged`), their header (device properties, distributed info, injected faults) and
footer, plain or gzipped byte-reproducibly."""

from __future__ import annotations

import contextlib
import gzip as gzip_module
import io
import json
from pathlib import Path
from typing import IO

from .config import SyntheticConfig
from .model import quote
from .simulate import event_chunks


def _device_properties(device: int) -> dict[str, object]:
    """deviceProperties entry of an H100 SXM."""
    return {
        "id": device,
        "name": "NVIDIA H100 80GB HBM3",
        "totalGlobalMem": 85_045_346_304,
        "computeMajor": 9,
        "computeMinor": 0,
        "maxThreadsPerBlock": 1024,
        "maxThreadsPerMultiprocessor": 2048,
        "regsPerBlock": 65536,
        "warpSize": 32,
        "sharedMemPerBlock": 49152,
        "numSms": 132,
        "regsPerMultiprocessor": 65536,
        "sharedMemPerBlockOptin": 232448,
        "sharedMemPerMultiprocessor": 233472,
    }


def _header(config: SyntheticConfig, rank: int | None) -> str:
    """Everything before the first event (rank None: the merged file)."""
    if rank is None:
        devices = sorted({d for r in range(config.ranks) for d in config.devices(r)})
        dist: dict[str, object] = {"world_size": config.ranks}
    else:
        devices = config.devices(rank)
        ranks = list(range(config.ranks))
        dist = {
            "backend": "nccl",
            "rank": rank,
            "world_size": config.ranks,
            "pg_count": 1,
            "pg_config": [
                {
                    "pg_name": "0",
                    "pg_desc": "default_pg",
                    "backend_config": "cuda:nccl",
                    "pg_size": config.ranks,
                    "ranks": ranks,
                }
            ],
            "nccl_version": "2.21.5",
        }
    props = ",\n    ".join(json.dumps(_device_properties(d)) for d in devices)
    injected = [f for r in range(config.ranks) for f in config.injected(r)
                if rank is None or r == rank]  # fmt: skip
    labels = f'  "tracegraphFaults": {json.dumps(injected)},\n' if injected else ""
    if config.host_names and rank is not None:
        labels += f'  "host_name": "node{rank // config.gpus_per_node}",\n'
    return (
        '{\n  "schemaVersion": 1,\n'
        f'  "deviceProperties": [\n    {props}\n  ],\n'
        f'  "distributedInfo": {json.dumps(dist)},\n'
        f"{labels}"
        '  "displayTimeUnit": "ms",\n'
        f'  "baseTimeNanoseconds": {config.base_time_ns},\n'
        '  "traceEvents": [\n'
    )


def _footer(trace_name: str) -> str:
    """Everything after the last event."""
    return f'\n  ],\n  "traceName": {quote(trace_name)}\n}}\n'


class _Sink:
    """Writes events into an open traceEvents array, comma-separated."""

    def __init__(self, fh: IO[str]) -> None:
        self.fh = fh
        self.empty = True

    def write(self, events: list[str]) -> None:
        """Append `events`."""
        if not events:
            return
        if not self.empty:
            self.fh.write(",\n")
        self.fh.write(",\n".join(events))
        self.empty = False


def _open_text(path: Path, gzip: bool, stack: contextlib.ExitStack) -> IO[str]:
    """A text file for writing. gzip output is byte-reproducible (mtime 0, no file name) and
    uses level 1: ~190 MB/s and ~10x smaller, where level 6 (~45 MB/s, ~15x) halves throughput."""
    if not gzip:
        return stack.enter_context(path.open("w", encoding="utf-8", newline="\n"))
    raw = stack.enter_context(path.open("wb"))
    packed = stack.enter_context(
        gzip_module.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=1)
    )
    return stack.enter_context(io.TextIOWrapper(packed, encoding="utf-8", newline="\n"))


def write_per_rank(config: SyntheticConfig, out_dir: Path, gzip: bool = False) -> list[Path]:
    """Write rank{r}.trace.json[.gz] for every rank into `out_dir`; returns the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = ".trace.json.gz" if gzip else ".trace.json"
    paths = [out_dir / f"rank{r}{suffix}" for r in range(config.ranks)]
    with contextlib.ExitStack() as stack:
        files = [_open_text(p, gzip, stack) for p in paths]
        for rank, fh in enumerate(files):
            fh.write(_header(config, rank))
        sinks = [_Sink(fh) for fh in files]
        for per_rank in event_chunks(config, merged=False, rank_in_args=False):
            for sink, events in zip(sinks, per_rank, strict=True):
                sink.write(events)
        for path, fh in zip(paths, files, strict=True):
            fh.write(_footer(path.name))
    return paths


def write_merged(config: SyntheticConfig, path: Path, rank_in_args: bool = True) -> Path:
    """Write all ranks into one file the way merge tools do (pid = rank * 1_000_000 + pid)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        fh = _open_text(path, path.suffix == ".gz", stack)
        fh.write(_header(config, None))
        sink = _Sink(fh)
        for per_rank in event_chunks(config, merged=True, rank_in_args=rank_in_args):
            for events in per_rank:
                sink.write(events)
        fh.write(_footer(path.name))
    return path
