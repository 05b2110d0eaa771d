"""Capture real PyTorch-profiler (Kineto) traces of 4-rank CPU training on gloo, with known faults.

What it records: 4 processes on localhost (gloo backend, MASTER_ADDR=127.0.0.1, a free port) each
train the same small MLP on synthetic random data, one CPU thread each, under
``torch.profiler.profile(activities=[CPU], schedule=schedule(wait=1, warmup=1, active=N),
record_shapes=True)`` with ``prof.step()`` once per iteration, so the traces carry
``ProfilerStep#k`` annotations for the N active steps. Each step's data comes from inside a
``record_function("dataloader")`` range. Each scenario writes one sub-folder holding
``rank{0..3}.json.gz`` (Kineto's chrome-trace JSON, gzipped with mtime 0) and ``truth.json``
(the ground truth: which rank was made slow, how, by how much, and every setting used):

- ``data_stall``: DDP; rank 2 sleeps 60 ms inside the dataloader range on every step.
- ``gc_python``: DDP, ``with_stack=True`` (python frames in the trace); rank 2 builds ~120k
  cyclic garbage objects and runs ``gc.collect()`` on every step after forward and before
  backward, so the other ranks wait for it in the gradient all-reduce.
- ``main_thread_gloo``: no DDP; after backward the main thread calls blocking
  ``dist.all_reduce`` on every parameter's grad; rank 1 sleeps 40 ms in the dataloader range.
- ``clean``: DDP, no fault, every rank does the same work.

Rerun (needs only torch, a CPU build is enough; takes well under a minute)::

    python tests/data/gloo_4r/capture.py --out tests/data/gloo_4r
    python tests/data/gloo_4r/capture.py --out /tmp/x --scenarios data_stall clean

Timings in the traces are real and so differ from run to run; ``truth.json`` holds what was
injected and what the injecting rank measured for it on each profiled step, and each rank's pid
and main thread id (the ``tid`` of its ``ProfilerStep#k`` events).

Where things land (torch 2.13 CPU): ``c10d::allreduce_`` (cpu_op) is on the main thread and
returns at once; ``gloo:all_reduce`` (user_annotation) runs on one of ProcessGroupGloo's two
worker threads, and on a waiting rank it lasts until the slowest rank joins. That holds for the
blocking calls of ``main_thread_gloo`` too: the main thread's wait in them is a gap with no event.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import gzip
import json
import os
import platform
import shutil
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

WORLD_SIZE = 4

# Shared by every scenario (all of it goes into truth.json).
SETTINGS: dict[str, Any] = {
    "backend": "gloo",
    "master_addr": "127.0.0.1",
    "num_layers": 8,  # Linear layers (ReLU between them)
    "hidden": 256,
    "in_features": 256,
    "out_features": 16,
    "batch_size": 32,
    "lr": 0.01,
    "optimizer": "SGD(momentum=0.9)",
    "bucket_cap_mb": 0.5,
    "torch_num_threads": 1,
    "model_seed": 0,
    "data_seed_base": 1000,  # rank r draws its batches from seed data_seed_base + r
    "profiler_activities": ["CPU"],
    "schedule": {"wait": 1, "warmup": 1, "active": 4, "repeat": 1},
    "record_shapes": True,
}

# Per scenario: the fault and the profiler's with_stack.
SCENARIOS: dict[str, dict[str, Any]] = {
    "data_stall": {
        "fault_kind": "data_stall",
        "injected_rank": 2,
        "injected_delay_ms": 60.0,
        "ddp": True,
        "with_stack": False,
        "description": "rank 2 sleeps 60 ms (time.sleep) inside record_function('dataloader') "
        "on every step",
    },
    "gc_python": {
        "fault_kind": "gc_python",
        "injected_rank": 2,
        "injected_delay_ms": None,  # set from the measured gc pauses
        "gc_objects": 120_000,
        "ddp": True,
        "with_stack": True,
        "description": "rank 2 builds gc_objects self-referencing dicts (garbage cycles) in "
        "make_cyclic_garbage() and runs gc.collect() in python_gc_pause() on every step, "
        "after forward and before backward; injected_delay_ms is the median measured time "
        "of python_gc_pause() (building plus collecting)",
    },
    "main_thread_gloo": {
        "fault_kind": "data_stall",
        "injected_rank": 1,
        "injected_delay_ms": 40.0,
        "ddp": False,
        "with_stack": False,
        "description": "no DDP: after backward the main thread calls dist.all_reduce (blocking, "
        "gloo) on each parameter's grad in parameter order, then divides by world size; rank 1 "
        "sleeps 40 ms inside record_function('dataloader') on every step",
    },
    "clean": {
        "fault_kind": "none",
        "injected_rank": None,
        "injected_delay_ms": 0.0,
        "ddp": True,
        "with_stack": False,
        "description": "no fault: every rank does the same work",
    },
}


def make_model() -> nn.Sequential:
    layers: list[nn.Module] = []
    width = SETTINGS["in_features"]
    for i in range(SETTINGS["num_layers"]):
        last = i == SETTINGS["num_layers"] - 1
        out = SETTINGS["out_features"] if last else SETTINGS["hidden"]
        layers.append(nn.Linear(width, out))
        if not last:
            layers.append(nn.ReLU())
        width = out
    return nn.Sequential(*layers)


def make_cyclic_garbage(n: int) -> None:
    """n dicts that each refer to themselves; unreachable once this returns, so only the cycle
    collector frees them. Built with item assignment (no call per object), so a python tracer
    records this function once, not n times."""
    objs: list[dict[str, object]] = [{} for _ in range(n)]
    for d in objs:
        d["self"] = d


def python_gc_pause(n: int) -> tuple[float, float]:
    """Build n garbage cycles and collect them; returns the seconds each part took."""
    start = time.perf_counter()
    make_cyclic_garbage(n)
    built = time.perf_counter()
    gc.collect()
    return built - start, time.perf_counter() - built


def worker(rank: int, scenario: str, out_dir: str, active: int) -> None:
    spec = SCENARIOS[scenario]
    torch.set_num_threads(SETTINGS["torch_num_threads"])
    dist.init_process_group(
        SETTINGS["backend"],
        rank=rank,
        world_size=WORLD_SIZE,
        timeout=datetime.timedelta(seconds=120),
    )
    torch.manual_seed(SETTINGS["model_seed"])
    model: nn.Module = make_model()
    if spec["ddp"]:
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=SETTINGS["bucket_cap_mb"])
    else:  # what DDP's constructor would do: start every rank from rank 0's weights
        for p in model.parameters():
            dist.broadcast(p.data, src=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=SETTINGS["lr"], momentum=0.9)
    loss_fn = nn.MSELoss()
    gen = torch.Generator().manual_seed(SETTINGS["data_seed_base"] + rank)
    injected = rank == spec["injected_rank"]

    sched = dict(SETTINGS["schedule"], active=active)
    iterations = sched["wait"] + sched["warmup"] + sched["active"]
    out = Path(out_dir)

    def on_trace_ready(prof: profile) -> None:
        raw = out / f"rank{rank}.json"  # Kineto writes this path into the trace as traceName
        prof.export_chrome_trace(str(raw))
        with raw.open("rb") as src, (out / f"rank{rank}.json.gz").open("wb") as dst:
            with gzip.GzipFile(fileobj=dst, mode="wb", mtime=0, filename="") as gz:
                shutil.copyfileobj(src, gz)
        raw.unlink()

    measured_ms: list[float] = []  # the injected delay as this rank measured it, per iteration
    gc_collect_ms: list[float] = []  # gc_python: the gc.collect() part of it
    dist.barrier()
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(**sched),
        record_shapes=SETTINGS["record_shapes"],
        with_stack=spec["with_stack"],
        on_trace_ready=on_trace_ready,
    ) as prof:
        for _ in range(iterations):
            with record_function("dataloader"):
                x = torch.randn(SETTINGS["batch_size"], SETTINGS["in_features"], generator=gen)
                y = torch.randn(SETTINGS["batch_size"], SETTINGS["out_features"], generator=gen)
                if injected and spec["fault_kind"] == "data_stall":
                    start = time.perf_counter()
                    time.sleep(spec["injected_delay_ms"] / 1000)
                    measured_ms.append((time.perf_counter() - start) * 1000)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            if injected and spec["fault_kind"] == "gc_python":
                build_s, collect_s = python_gc_pause(spec["gc_objects"])
                measured_ms.append((build_s + collect_s) * 1000)
                gc_collect_ms.append(collect_s * 1000)
            loss.backward()
            if not spec["ddp"]:
                for p in model.parameters():
                    assert p.grad is not None
                    dist.all_reduce(p.grad)
                    p.grad /= WORLD_SIZE
            optimizer.step()
            prof.step()

    info = {
        "rank": rank,
        "pid": os.getpid(),
        "main_thread_native_id": threading.get_native_id(),
        "measured_injected_ms_per_iteration": [round(v, 3) for v in measured_ms],
    }
    if gc_collect_ms:
        info["measured_gc_collect_ms_per_iteration"] = [round(v, 3) for v in gc_collect_ms]
    gathered: list[Any] = [None] * WORLD_SIZE
    dist.all_gather_object(gathered, info)
    if rank == 0:
        write_truth(out, scenario, active, sched, gathered)
    dist.barrier()
    dist.destroy_process_group()


def write_truth(
    out: Path, scenario: str, active: int, sched: dict[str, int], ranks: list[Any]
) -> None:
    spec = dict(SCENARIOS[scenario])
    first_active = sched["wait"] + sched["warmup"]
    injected = spec["injected_rank"]
    profiled_ms: list[float] = []
    if injected is not None:
        per_iteration = ranks[injected]["measured_injected_ms_per_iteration"]
        profiled_ms = per_iteration[first_active : first_active + active]
        if spec["injected_delay_ms"] is None:
            spec["injected_delay_ms"] = round(statistics.median(profiled_ms), 3)
    truth = {
        "scenario": scenario,
        "world_size": WORLD_SIZE,
        "steps_profiled": active,
        "profiled_step_names": [
            f"ProfilerStep#{k}" for k in range(first_active, first_active + active)
        ],
        "injected_rank": injected,
        "fault_kind": spec.pop("fault_kind"),
        "injected_delay_ms": spec.pop("injected_delay_ms"),
        "measured_injected_ms_per_profiled_step": profiled_ms,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "scenario_settings": spec,
        "settings": dict(SETTINGS, schedule=sched),
        "ranks": ranks,
    }
    (out / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--scenarios", nargs="+", choices=list(SCENARIOS), default=list(SCENARIOS))
    parser.add_argument("--active", type=int, default=SETTINGS["schedule"]["active"])
    args = parser.parse_args(argv)
    if args.active < 3:
        parser.error("--active must be at least 3")

    os.environ["MASTER_ADDR"] = SETTINGS["master_addr"]
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # keep gloo on the loopback device
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    for scenario in args.scenarios:
        folder = args.out / scenario
        folder.mkdir(parents=True, exist_ok=True)
        os.environ["MASTER_PORT"] = str(free_port())
        start = time.perf_counter()
        mp.spawn(worker, args=(scenario, str(folder), args.active), nprocs=WORLD_SIZE, join=True)
        print(f"{scenario}: {time.perf_counter() - start:.1f}s -> {folder}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
