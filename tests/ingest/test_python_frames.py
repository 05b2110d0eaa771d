"""Python frame names as a person reads them (ingest/python_frames.py): no object addresses."""

from __future__ import annotations

import pytest

from tracegraph.ingest.python_frames import readable


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("<built-in method run_backward of torch._C._EngineBase object at 0x7f006294eff0>",
         "run_backward"),
        ("<built-in function collect>", "collect"),
        ("ddp_mlp.py(185): <listcomp>", "<listcomp> (ddp_mlp.py:185)"),
        ("torch/nn/modules/module.py(1747): _call_impl", "_call_impl (module.py:1747)"),
        ("nn.Module: Linear_0", "nn.Module: Linear_0"),
        ("aten::addmm", "aten::addmm"),
        ("<lambda> of Foo object at 0xdeadbeef", "<lambda> of Foo object"),
    ],
)  # fmt: skip
def test_frames_read_without_addresses(name: str, shown: str) -> None:
    assert readable(name) == shown


def test_two_ranks_same_frame_read_the_same() -> None:
    frame = "<built-in method __exit__ of torch._C.DisableTorchFunctionSubclass object at {}>"
    a, b = frame.format("0x7f80014cc7b0"), frame.format("0x7f11aa2c0000")
    assert readable(a) == readable(b) == "__exit__"
