"""Processes that die with the process that started them (Linux).

Two ways, both for a `kill -9` of an ingest, which runs no clean-up of its own:
- `die_with_parent`, a pool worker's initializer: the kernel kills the worker with its parent.
- `Reaper`, a watcher process: when this process dies (or stops it), it kills each process
  this one started meanwhile and their descendants (a local Ray instance's daemons: Ray binds
  its GCS and raylet to the driver itself, but not the agents the raylet starts, which outlive
  a killed driver).

Only the standard library: a spawned worker imports this module before its first task (so the
time in which it could outlive a killed parent unnoticed is its interpreter's start-up alone),
and the watcher runs this file as its script.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1
POLL_S = 0.25  # how often the watcher looks for new descendants


def die_with_parent(parent: int) -> None:
    """In a worker (a pool's initializer): Linux kills it when its parent, the process `parent`,
    dies; where that happened already, while the worker started, it exits now. Elsewhere:
    nothing (a worker there outlives a killed parent).

    The kernel sends the signal when the *thread* that started the worker ends: a pool's
    workers must be started by a thread that outlives the pool (an ingest's pool is created,
    fed and closed by the thread that runs the ingest)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # no prctl: not Linux
        return
    prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:  # the parent died before prctl: no signal will come
        os._exit(1)


class Reaper:
    """A watcher process which, when this process dies or calls `stop`, kills every process
    this one started meanwhile (children and their descendants, found every `POLL_S` seconds)
    that is still alive: for a local Ray instance, which `ray.shutdown` ends but for its
    agents, and which an interrupt during `ray.init` leaves running. (Children that another
    thread of this process starts meanwhile would be killed too.) Where there is no /proc
    (not Linux) it does nothing."""

    def __init__(self) -> None:
        self.watcher: subprocess.Popen[bytes] | None = None
        if not os.path.isdir("/proc/self"):
            return
        me = os.getpid()
        before = [str(pid) for pid in _descendants(me, set())]
        self.watcher = subprocess.Popen(
            [sys.executable, "-I", __file__, str(me), *before],
            stdin=subprocess.PIPE,  # its end here closes when this process dies: the signal
            stdout=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        """Kill what this process started meanwhile now, and end the watcher."""
        if self.watcher is None or self.watcher.stdin is None:
            return
        self.watcher.stdin.close()
        self.watcher.wait()
        self.watcher = None


def _watch(parent: int, excluded: set[int]) -> None:
    """The watcher: track `parent`'s new descendants until its pipe on stdin closes (the
    parent died or stops it), then kill them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's to handle
    excluded.add(os.getpid())
    tracked: dict[int, int] = {}  # pid: its start time (a pid may be reused)
    while not select.select([0], [], [], POLL_S)[0]:
        tracked.update(_descendants(parent, excluded))
    tracked.update(_descendants(parent, excluded))
    for root in list(tracked):  # what the tracked started since the last look
        tracked.update(_descendants(root, excluded))
    alive = _processes()
    for pid, started in tracked.items():
        if alive.get(pid, (0, -1))[1] == started:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _descendants(root: int, excluded: set[int]) -> dict[int, int]:
    """The descendants of process `root` (none under an excluded one): pid to start time."""
    children: dict[int, list[int]] = {}
    table = _processes()
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in excluded and child not in found:
                found[child] = table[child][1]
                todo.append(child)
    return found


def _processes() -> dict[int, tuple[int, int]]:
    """Every live process: pid to (parent pid, start time), from /proc."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # it ended meanwhile
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        if fields[0] != b"Z":  # fields: state, ppid, ..., start time (the 20th)
            table[int(name)] = (int(fields[1]), int(fields[19]))
    return table


if __name__ == "__main__":
    _watch(int(sys.argv[1]), {int(pid) for pid in sys.argv[2:]})
