"""Which `_to_copy` calls change a dtype (queries/report/dtypes.py), and the implicit_casts
finding that rests on it, on real traces with recorded arguments."""

from __future__ import annotations

import json

import pytest

import tracegraph
from tracegraph.queries.report.dtypes import changes_dtype

from ..conftest import needs_traces, trace


def _args(source: str, target: str, dims: list[list[int]] | None = None) -> str:
    return json.dumps(
        {
            "Input type": [source, "Scalar", "", "", "", "Scalar", ""],
            "Concrete Inputs": ["", target, "", "", "", "False", ""],
            "Input Dims": dims if dims is not None else [[64, 384], [], [], [], [], [], []],
        }
    )


@pytest.mark.parametrize(
    ("args", "cast"),
    [
        (_args("double", "6"), True),  # float64 -> float32
        (_args("c10::BFloat16", "6"), True),
        (_args("float", "15"), True),
        (_args("float", "6"), False),  # the same dtype
        (_args("float", ""), False),  # no dtype: a device copy (.cpu(), .to("cuda"))
        (_args("double", "6", [[], [], []]), False),  # a 0-dim tensor: a Python scalar's
        (json.dumps({"Input type": ["float"]}), False),  # no concrete inputs recorded
        (None, False),
        ("not json", False),
    ],
)
def test_a_cast_is_a_dtype_change_of_a_tensor(args: str | None, cast: bool) -> None:
    assert changes_dtype(args) is cast


@needs_traces
def test_casts_are_found_only_on_the_rank_that_casts(tmp_path) -> None:
    """cpu_ddp_2r_faults: rank 1 casts activations to float64 and back around every Linear;
    both ranks cast 0-dim scalars (their optimizer's), which are no implicit casts."""
    g = tracegraph.open(tmp_path / "faults.kuzu")
    g.ingest(trace("cpu_ddp_2r_faults"), run="faults")
    casts = [f for f in g.report().findings if f.kind == "implicit_casts"]
    assert [f.all_ranks for f in casts] == [(1,)]
    (found,) = casts
    # 8 Linear layers, float64 and back, 4 profiled steps: 136 casts from the raw JSON
    assert found.events == 136
    assert found.saving_ns_per_step == 0  # rank 1 only waits for rank 0's GC: nothing saved
