"""Unmatched collectives: a collective some ranks enter and others never do.

NCCL and gloo pair each rank's k-th collective of a process group with every other rank's k-th
(by the `Seq` the trace records, else by order: `ingest/collectives.py` matches them the same
way). When one rank skips a collective the others run (DDP's `no_sync()` on one rank only, a
skipped all-reduce) or ends its loop before them (each rank deciding on its own clock to stop),
the pairing slides: its next collective pairs with the others' of the step before, and the
others' last one has no partner at all: it never completes, and the job hangs there until the
process group's timeout. In an instance that crosses steps, a rank taking part from a later
step (it skipped one before) is not late: what the others wait for then is the divergence, and
the report's lateness and stragglers leave such an instance out where that rank came last
(`Unmatched.ahead`; the cross-rank path does the same, `crossrank._arrivals`); where a rank of
the instance's own step came last, it is late as in any step. An instance that never completes
is no lateness (`Unmatched.hung`).

Read per process group (its ranks: those with a participant in it):
- per step and collective, how many each rank ran: a step where the counts differ names the
  ranks that ran fewer (a rank without that step: its loop had ended);
- per instance, the step of each participant (by what places it in a step, as elsewhere in the
  report) and the ranks missing from it; an instance outside every step (at a trace's edge,
  where the ranks' profiled windows may differ) is not read, in a run that has steps.
One finding per process group that diverges, with the first step it diverged in, the ranks
missing, the last collective every rank shared, and the instances that then crossed steps or
never completed. Its cost is the time the other ranks waited in those instances, per step; its
saving is not modelled (the job hangs), and it is ranked first.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from tracegraph.ingest import schema

from .analyses import Row
from .collectives import Participants, clock_offsets, step_of
from .findings import Finding
from .ranks import ranks_phrase
from .steps import StepWindow

KIND = "unmatched_collective"
EVIDENCE = 5


@dataclass(frozen=True)
class Unmatched:
    """What the run's collectives say of ranks that stopped matching (see the module doc)."""

    rows: list[Row]  # per instance that crosses steps or misses ranks
    findings: list[Finding]
    run_idx: int = 0
    # instances (indices) that never completed: no lateness in them
    hung: frozenset[int] = field(default_factory=frozenset)
    # instances that cross steps → the ranks taking part from a later step than the others
    # (they skipped one before): what they arrive after is the divergence, not lateness
    ahead: dict[int, frozenset[int]] = field(default_factory=dict)
    # per rank, its wait in those instances per step (`savings.transfer_only`)
    waited: dict[int, int] = field(default_factory=dict)
    events: frozenset[int] = field(default_factory=frozenset)  # their participants' event ids
    # (collective, process group, seq) of the instances whose wait is the divergence's
    diverged: frozenset[tuple[str, str, int]] = field(default_factory=frozenset)
    # per rank, per step: its wait for a late rank of another step's join (it took part from a
    # later step), which no step's cross-rank path sees
    unjoined: dict[int, int] = field(default_factory=dict)

    def off_communication(self, findings: list[Finding]) -> list[Finding]:
        """`unoverlapped_allreduce` findings whose work (what a what-if takes away) leaves out
        these collectives: their time is the divergence's, not a transfer to overlap."""
        if not self.events:
            return findings
        out = []
        for f in findings:
            if f.kind == "unoverlapped_allreduce":
                work = tuple(
                    (
                        rank,
                        tuple(
                            e
                            for e in evs
                            if schema.event_key(self.run_idx, rank, e) not in self.events
                        ),
                    )
                    for rank, evs in f.work
                )
                f = replace(f, work=work)
            out.append(f)
        return out


def unmatched(
    p: Participants,
    windows: dict[int, list[StepWindow]],
    steps: int,
    run_idx: int,
    hosts: dict[int, str | None] | None = None,
) -> Unmatched:
    """The unmatched collectives of a run's participants `p`, their steps placed by `windows`,
    their times on clocks aligned as the rest of the report aligns them (`hosts`); costs
    spread over `steps` steps."""
    if p.n == 0:
        return Unmatched([], [])
    offsets = clock_offsets(p, hosts)
    shift = np.array([offsets.get(int(r), 0) for r in p.rank], np.int64)
    arrive, leave = p.ts - shift, p.end - shift
    places = zip(p.rank.tolist(), p.anchor.tolist(), strict=True)
    step = np.array([step_of(r, a, windows) for r, a in places], object)
    group_ranks: dict[str, set[int]] = defaultdict(set)
    for i, r in zip(p.instance.tolist(), p.rank.tolist(), strict=True):
        group_ranks[p.names[i][1]].add(int(r))
    rows: list[Row] = []
    hung: set[int] = set()
    per_rank: dict[int, int] = defaultdict(int)
    elsewhere: dict[int, int] = defaultdict(int)
    events: set[int] = set()
    diverged: set[tuple[str, str, int]] = set()
    ahead: dict[int, frozenset[int]] = {}
    odd: dict[str, list[Row]] = defaultdict(list)
    shared: dict[str, tuple[int, str]] = {}  # group → (last arrival, label) of matched instances
    for inst, sel in _by_instance(p).items():
        name, group, seq = p.names[inst]
        ranks = sorted(int(r) for r in p.rank[sel])
        missing = sorted(group_ranks[group] - set(ranks))
        steps_of = {int(p.rank[j]): step[j] for j in sel.tolist()}
        known = {s for s in steps_of.values() if s is not None}
        if windows and not known:
            continue  # outside every step (a trace's edge, where the ranks' windows differ)
        if not missing and len(known) <= 1:
            last = int(arrive[sel].max())
            if last > shared.get(group, (-1, ""))[0]:
                shared[group] = (last, _label(name, seq, min(known) if known else None))
            continue
        later = frozenset(r for r, s in steps_of.items() if s is not None and s != min(known))
        if later:
            ahead[inst] = later
        last_rank = int(p.rank[sel[np.lexsort((p.rank[sel], arrive[sel]))[-1]]])
        # how long those who entered waited: to the last arrival, or (no one else coming) to
        # the collective's end, the trace's end where it never completed
        waited = (leave[sel] - arrive[sel]) if missing else (arrive[sel].max() - arrive[sel])
        if missing or last_rank in later:  # the divergence's wait, not a late rank's
            if missing:
                hung.add(inst)
            for r, w in zip(p.rank[sel].tolist(), waited.tolist(), strict=True):
                per_rank[int(r)] += int(w)
            events.update(int(e) for e in p.event[sel])
            diverged.add((name, group, seq))
        else:  # a late rank's, but those from a later step wait outside its step's join
            for r, w in zip(p.rank[sel].tolist(), waited.tolist(), strict=True):
                if r in later:
                    elsewhere[int(r)] += int(w)
        row = {
            "collective": name,
            "process_group": group,
            "seq": seq,
            "ranks": json.dumps(ranks),
            "missing": json.dumps(missing),
            "steps": json.dumps({str(r): s for r, s in sorted(steps_of.items())}),
            "first_ns": int(p.ts[sel].min()),
            "waited_ns": int(waited.sum()),
            "events": [int(e) for e in p.event[sel]],
            "aligned_ns": int(arrive[sel].min()),
        }
        rows.append(row)
        odd[group].append(row)
    counts = _counts(p, step, group_ranks, windows)
    findings = []
    for group, instances in sorted(odd.items()):
        first_ns = min(r["aligned_ns"] for r in instances)
        before = shared.get(group)
        shared_label = before[1] if before is not None and before[0] < first_ns else None
        findings.append(
            _finding(
                group,
                sorted(group_ranks[group]),
                counts.get(group, []),
                instances,
                shared_label,
                steps,
            )  # fmt: skip
        )
    rows.sort(key=lambda r: (r["process_group"], r["aligned_ns"]))
    for r in rows:
        del r["events"], r["aligned_ns"]
    each = {r: w // max(steps, 1) for r, w in per_rank.items()}
    unjoined = {r: w // max(steps, 1) for r, w in elsewhere.items()}
    return Unmatched(
        rows, findings, run_idx, frozenset(hung), ahead, each, frozenset(events),
        frozenset(diverged), unjoined,
    )  # fmt: skip


def _by_instance(p: Participants) -> dict[int, np.ndarray]:
    """Each instance's participant rows, one participant or more (`_groups` keeps those of two
    ranks or more: the lone ones are what this module is about too)."""
    bounds = np.nonzero(np.diff(p.instance))[0] + 1
    return {int(p.instance[g[0]]): g for g in np.split(np.arange(p.n), bounds) if len(g)}


def _known_steps(row: Row) -> set[int]:
    return {s for s in json.loads(row["steps"]).values() if s is not None}


def _label(name: str, seq: int, step: int | None) -> str:
    return f"{name} #{seq}" + ("" if step is None else f" (ProfilerStep#{step})")


def _counts(
    p: Participants,
    step: np.ndarray,
    group_ranks: dict[str, set[int]],
    windows: dict[int, list[StepWindow]],
) -> dict[str, list[tuple[int, str, dict[int, int]]]]:
    """Per group, the steps where its ranks ran different numbers of a collective: (step,
    collective, count per rank). A rank without that step counts 0 where its steps began
    before it (its loop ended); a rank without steps, or whose profiled steps begin later,
    is not counted there."""
    first = {r: min(w.step for w in ws) for r, ws in windows.items() if ws}
    ran: Counter[tuple[str, str, int, int]] = Counter()
    for i, r, s in zip(p.instance.tolist(), p.rank.tolist(), step.tolist(), strict=True):
        if s is not None:
            name, group, _ = p.names[i]
            ran[(group, name, int(s), int(r))] += 1
    cells: dict[tuple[str, str, int], dict[int, int]] = defaultdict(dict)
    for (group, name, s, r), n in ran.items():
        cells[(group, name, s)][r] = n
    out: dict[str, list[tuple[int, str, dict[int, int]]]] = defaultdict(list)
    for (group, name, s), by_rank in sorted(cells.items(), key=lambda kv: (kv[0][2], kv[0][1])):
        full = {
            r: by_rank.get(r, 0) for r in sorted(group_ranks[group]) if first.get(r, s + 1) <= s
        }
        if len(set(full.values())) > 1:
            out[group].append((s, name, full))
    return out


def _finding(
    group: str,
    ranks: list[int],
    counts: list[tuple[int, str, dict[int, int]]],
    instances: list[Row],
    shared: str | None,
    steps: int,
) -> Finding:
    """One process group's divergence as a finding (see the module docstring)."""
    first = min(instances, key=lambda r: r["aligned_ns"])
    if counts:
        step, name, by_rank = counts[0]
        most = max(by_rank.values())
        short = [r for r, n in by_rank.items() if n < most]
        ran = ", ".join(f"rank {r}: {n}" for r, n in by_rank.items() if n < most)
        start = (
            f"in ProfilerStep#{step} {ranks_phrase(short)} ran fewer {name} than the others "
            f"({ran}; the others: {most} each)"
        )
    else:
        short = json.loads(first["missing"]) or json.loads(first["ranks"])
        step = None
        start = f"{first['collective']} #{first['seq']} is missing {ranks_phrase(short)}"
    crossed = [r for r in instances if len(_known_steps(r)) > 1]
    hung = [r for r in instances if json.loads(r["missing"])]
    parts = [start]
    if crossed:
        c = crossed[0]
        by_step: dict[object, list[int]] = defaultdict(list)
        for r, s in json.loads(c["steps"]).items():
            by_step[s].append(int(r))
        placed = "; ".join(
            f"{ranks_phrase(rs)} in step {s}"
            for s, rs in sorted(by_step.items(), key=lambda kv: str(kv[0]))
        )
        parts.append(
            f"from then on collectives pair across steps ({len(crossed)} instance(s), first "
            f"{c['collective']} #{c['seq']}: {placed})"
        )
    if hung:
        names = ", ".join(f"#{r['seq']}" for r in hung[:5]) + (" …" if len(hung) > 5 else "")
        waited = sum(r["waited_ns"] for r in hung)
        parts.append(
            f"{len(hung)} never completed ({hung[0]['collective']} {names}: entered by "
            f"{ranks_phrase(json.loads(hung[0]['ranks']))} only, {waited / 1e3:,.0f} µs waited "
            "to the trace's end): the job hangs there until the process group's timeout"
        )
    parts.append(
        f"the last collective every rank shared: {shared}" if shared else
        "no collective every rank shared in the same step before it"
    )  # fmt: skip
    in_order = sorted(instances, key=lambda r: r["aligned_ns"])
    events = tuple(e for r in in_order for e in r["events"])
    evidence = events[:EVIDENCE]
    listed = ", ".join(str(e) for e in evidence)
    return Finding(
        KIND,
        short[0],
        "A collective some ranks never entered: the ranks' collectives no longer match",
        sum(r["waited_ns"] for r in instances) // max(steps, 1),
        len(instances),
        f"process group {group} ({ranks_phrase(ranks)}): " + "; ".join(parts),
        evidence,
        "MATCH (a:CollectiveArrival) WHERE a.id IN "
        f"[{listed}] RETURN a.id AS event, a.rank AS rank, a.ts AS ts, a.dur AS dur",
        "every rank must run the same collectives in the same order: decide together when to "
        "stop (all-reduce a stop flag; the same number of batches on every rank, drop_last), "
        "and use no_sync() on every rank or on none",
        step=step,
        ranks=tuple(short),
    )


SCHEMA = pa.schema(
    [("collective", pa.string()), ("process_group", pa.string()), ("seq", pa.int64()),
     ("ranks", pa.string()), ("missing", pa.string()), ("steps", pa.string()),
     ("first_ns", pa.int64()), ("waited_ns", pa.int64())]
)  # fmt: skip
