"""`tracegraph path`: each step's critical path as a tree of segments, in text or JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from tracegraph.ingest.python_frames import readable
from tracegraph.queries.crossrank import describe
from tracegraph.queries.path import StepStory

from . import output
from .names import shorten_all

NAME_WIDTH = 60


def write_stories(out: TextIO, stories: Sequence[StepStory], depth: int, fmt: str) -> None:
    if fmt == "json":
        out.write(output.json_text([s.to_json(depth) for s in stories]) + "\n")
        return
    for story in stories:
        out.write(_heading(story) + "\n")
        out.write(f"  {'µs':>12}  {'share':>6}  {'saves µs':>10}  {'rank':>4}  segment\n")
        for line in _lines(story.segments, story.length_ns, depth, 0):
            out.write(line + "\n")
        out.write("\n")


def _heading(story: StepStory) -> str:
    if story.verdict is not None:
        return describe(story.verdict).strip()
    return f"{story.step}: rank {story.rank}'s path {story.length_ns / 1e3:,.0f} µs"


def _lines(segments: Sequence, total: int, depth: int, level: int) -> list[str]:
    out = []
    names = shorten_all([readable(s.name) for s in segments], NAME_WIDTH - 2 * level)
    for seg, name in zip(segments, names, strict=True):
        share = f"{seg.ns / total:.1%}" if total else "-"
        saving = f"{seg.saving_ns / 1e3:,.0f}" if seg.saving_ns is not None else ""
        rank = "" if seg.rank < 0 else str(seg.rank)
        out.append(
            f"  {seg.ns / 1e3:>12,.1f}  {share:>6}  {saving:>10}  {rank:>4}  {'  ' * level}{name}"
        )
        if level + 1 < depth:
            out += _lines(seg.children, total, depth, level + 1)
    return out
