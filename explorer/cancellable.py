"""A CLI query that Ctrl-C and its timeout always stop within about a second.

Kuzu checks its own timeout between operators, but some work (materializing a huge `UNWIND
range(...)`) never checks it, and a blocked `execute` never lets Python's Ctrl-C handler run.
And once a Ctrl-C (SIGINT) has reached the process, Kuzu 0.11.3's `interrupt()` of a running
parallel join aborted it in 2 of 3 tries ("malloc_consolidate(): unaligned fastbin chunk
detected"; the same call without a SIGINT stopped the query cleanly every time). So the query
runs in a worker thread while the main thread waits, and at Ctrl-C, or a second past the
timeout, the process leaves at once without asking Kuzu to stop. That is safe only because the
CLI's queries run on a read-only connection: nothing is half-written.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Mapping

from tracegraph.ingest.store import GraphStore, QueryError, ResultSet

GRACE_S = 1.0  # Kuzu's own timeout gets this long to stop the query cleanly
POLL_S = 0.05
EXIT_INTERRUPTED = 130
EXIT_TIMED_OUT = 2


def run_cancellable(
    store: GraphStore,
    cypher: str,
    params: Mapping[str, object],
    timeout_s: float,
    limit: int | None = None,
) -> ResultSet:
    """`store.run` (its first `limit` rows) that Ctrl-C (exit 130) or `timeout_s` (0: none;
    exit 2) stop promptly."""
    outcome: list[ResultSet | BaseException] = []

    def work() -> None:
        try:
            outcome.append(store.run(cypher, params, limit=limit))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            outcome.append(exc)

    worker = threading.Thread(target=work, name="tracegraph-query", daemon=True)
    deadline = time.monotonic() + timeout_s if timeout_s > 0 else None
    worker.start()
    try:
        while worker.is_alive():
            worker.join(POLL_S)
            if deadline is not None and time.monotonic() > deadline + GRACE_S:
                _leave(store, f"query timed out after {timeout_s:g} s", EXIT_TIMED_OUT)
    except KeyboardInterrupt:
        _leave(store, "interrupted", EXIT_INTERRUPTED)
    result = outcome[0]
    if isinstance(result, QueryError) and deadline is not None and time.monotonic() >= deadline:
        raise QueryError(f"query timed out after {timeout_s:g} s") from result  # Kuzu's own
    if isinstance(result, BaseException):
        raise result
    return result


def _leave(store: GraphStore, why: str, code: int) -> None:
    """Say why on one line and end the process now (the query thread with it)."""
    where = f"{store.path}: " if code != EXIT_INTERRUPTED else ""
    print(f"tracegraph: {'error: ' if where else ''}{where}{why}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(code)
