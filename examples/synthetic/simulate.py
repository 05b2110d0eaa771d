"""The job's simulation: every rank through its steps together, each collective answered across
the ranks (its end, once every rank has arrived), as per-rank chunks of rendered events."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .config import SyntheticConfig
from .timing import UNMATCHED_HANG_NS
from .training import CollRequest, Rank, StepGen


def _advance(gen: StepGen, value: int | None) -> tuple[bool, CollRequest | None]:
    """Resume a rank's step: (False, None) once it is over, else (True, what it yielded)."""
    try:
        return True, gen.send(value)
    except StopIteration:
        return False, None


Arrivals = dict[int, dict[int, dict[int, int]]]  # step → collective Seq → rank → start (ns)


def _run_step(
    ranks: Sequence[Rank], step: int, arrivals: Arrivals | None = None
) -> Iterator[list[list[str]]]:
    """Run one step on every rank in lock step, resolving each collective across ranks;
    yields the per-rank events finished so far at every collective and flush point."""
    gens = [r.step(step) for r in ranks]
    answer: int | None = None
    while True:
        states = [_advance(g, answer) for g in gens]
        running = {alive for alive, _ in states}
        requests = [request for _, request in states]
        if running == {False}:
            break
        kinds = {(r.seq, r.transfer_ns) if r else None for r in requests}
        if running != {True} or len(kinds) != 1:
            raise RuntimeError(f"ranks out of lock step in step {step}: {kinds}")
        answer = None
        if requests[0] is not None:
            answer = max(r.start_ns for r in requests if r) + requests[0].transfer_ns
            if arrivals is not None:
                arrivals.setdefault(step, {})[requests[0].seq] = {
                    rank.rank: r.start_ns for rank, r in zip(ranks, requests, strict=True) if r
                }
        yield [r.take() for r in ranks]
    yield [r.take() for r in ranks]


def _run_unmatched(ranks: Sequence[Rank], config: SyntheticConfig) -> Iterator[list[list[str]]]:
    """Every rank through its own steps, its collectives matched by Seq across ranks (see
    SyntheticConfig's no_sync): the lowest Seq pending is answered once every rank still running
    waits on a collective; with every rank in it, as `_run_step` answers, else it never
    completes."""

    def loop(rank: Rank) -> StepGen:
        for i in range(config.steps_of(rank.rank)):
            yield from rank.step(i)

    gens = {r.rank: loop(r) for r in ranks}
    pending: dict[int, CollRequest] = {}
    answers: dict[int, int | None] = {}
    while gens:
        for rank in sorted(set(gens) - set(pending)):
            while True:  # on through flush points to its next collective, or its end
                alive, request = _advance(gens[rank], answers.pop(rank, None))
                if not alive:
                    del gens[rank]
                    break
                if request is not None:
                    pending[rank] = request
                    break
        yield [r.take() for r in ranks]
        if not pending:
            break
        seq = min(r.seq for r in pending.values())
        entered = {rank: r for rank, r in pending.items() if r.seq == seq}
        last = max(r.start_ns for r in entered.values())
        for rank, r in entered.items():
            complete = len(entered) == len(ranks)
            answers[rank] = last + r.transfer_ns if complete else r.start_ns + UNMATCHED_HANG_NS
            del pending[rank]
    yield [r.take() for r in ranks]


def event_chunks(
    config: SyntheticConfig, merged: bool, rank_in_args: bool, arrivals: Arrivals | None = None
) -> Iterator[list[list[str]]]:
    """Per-rank event chunks, in order: metadata, then the steps piece by piece; into
    `arrivals`, when given, when each rank arrived at each collective."""
    ranks = [Rank(config, r, merged, rank_in_args) for r in range(config.ranks)]
    yield [r.metadata() for r in ranks]
    if config.unmatched:
        if arrivals is not None:
            raise ValueError("collective_arrivals: the collectives of one step are matched")
        yield from _run_unmatched(ranks, config)
        if any(r.out for r in ranks):
            raise RuntimeError("events left unwritten")
        return
    for step in range(config.steps):
        yield from _run_step(ranks, step, arrivals)
    if any(r.out for r in ranks):
        raise RuntimeError("events left unwritten")
