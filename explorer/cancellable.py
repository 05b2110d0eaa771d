"""A CLI query that Ctrl-C and its timeout always stop within about a second.

Kuzu checks its timeout and `interrupt()` between operators; some work (materializing a huge
`UNWIND range(...)`) checks neither, and a blocked `execute` never lets Python's Ctrl-C handler
run. So the query runs in a worker thread while the main thread waits: at Ctrl-C or the deadline
it interrupts Kuzu, and if the query still has not stopped a second later the process exits at
once. That is safe only because the CLI's queries run on a read-only connection: nothing is
half-written.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Mapping

from tracegraph.ingest.store import GraphStore, QueryError, ResultSet

GRACE_S = 1.0
POLL_S = 0.05
EXIT_INTERRUPTED = 130
EXIT_TIMED_OUT = 2


def run_cancellable(
    store: GraphStore, cypher: str, params: Mapping[str, object], timeout_s: float
) -> ResultSet:
    """`store.run` that Ctrl-C (exit 130) or `timeout_s` (0: none) stop within GRACE_S."""
    outcome: list[ResultSet | BaseException] = []

    def work() -> None:
        try:
            outcome.append(store.run(cypher, params))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            outcome.append(exc)

    worker = threading.Thread(target=work, name="tracegraph-query", daemon=True)
    deadline = time.monotonic() + timeout_s if timeout_s > 0 else None
    worker.start()
    try:
        while worker.is_alive():
            worker.join(POLL_S)
            if deadline is not None and time.monotonic() > deadline and worker.is_alive():
                _stop(store, worker, f"query timed out after {timeout_s:g} s", EXIT_TIMED_OUT)
    except KeyboardInterrupt:
        _stop(store, worker, "interrupted", EXIT_INTERRUPTED)
        raise
    result = outcome[0]
    if isinstance(result, QueryError) and deadline is not None and time.monotonic() >= deadline:
        raise QueryError(f"query timed out after {timeout_s:g} s") from result  # Kuzu's own
    if isinstance(result, BaseException):
        raise result
    return result


def _stop(store: GraphStore, worker: threading.Thread, why: str, code: int) -> None:
    """Interrupt the query; if it does not stop within GRACE_S, leave the process at once."""
    store.interrupt()
    worker.join(GRACE_S)
    if worker.is_alive():
        print(f"tracegraph: error: {store.path}: {why}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(code)
    if code == EXIT_TIMED_OUT:
        raise QueryError(why)
