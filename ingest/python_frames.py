"""Python frame names (Kineto's `python_function` events) as a person reads them.

With `with_stack=True` Kineto names a frame `path/to/file.py(LINE): function`, a C function
`<built-in function NAME>` and a bound C method `<built-in method NAME of TYPE object at
0x7f...>`. The object address differs per process and per run, so two ranks' (or two runs')
same frame would read as different; and it is what a narrow column keeps of the name. The
readable form keeps what tells frames apart: `function (file.py:LINE)`, `NAME`.
"""

from __future__ import annotations

import re

_FILE_FRAME = re.compile(r"^(?P<path>.+?)\((?P<line>\d+)\): (?P<func>.+)$")
_BUILTIN = re.compile(r"^<built-in (?:function|method) (?P<name>[^ >]+)(?: of .*)?>$")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def readable(name: str) -> str:
    """`torch/nn/modules/module.py(1747): _call_impl` → `_call_impl (module.py:1747)`,
    `<built-in method run_backward of torch._C._EngineBase object at 0x7f00…>` →
    `run_backward`; any other name without its object addresses."""
    builtin = _BUILTIN.match(name)
    if builtin:
        return builtin.group("name")
    frame = _FILE_FRAME.match(name)
    if frame:
        file = frame.group("path").replace("\\", "/").rsplit("/", 1)[-1]
        return f"{frame.group('func')} ({file}:{frame.group('line')})"
    return _ADDRESS.sub("", name)
