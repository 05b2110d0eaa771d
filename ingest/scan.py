"""A trace's JSON, read block by block: its events as JSON arrays of a few thousand, and the
top-level values asked for, without ever holding the whole file.

Each block is scanned with numpy over its structural bytes only (quotes, brackets, colons,
commas, backslashes): a quote is escaped when an odd run of backslashes precedes it; parity of
the real quotes says what lies inside strings; a running sum of brackets outside strings gives
the depth. Events are the elements of the top-level `traceEvents` array (or of a top-level
array), cut at their separating commas; only the few top-level keys and values are walked in
Python. The JSON of each event is not checked here: msgspec decodes the arrays this yields,
and refuses what is malformed. What the scan itself can tell is refused as `ScanError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import msgspec
import numpy as np

_QUOTE, _OPEN, _CLOSE, _COLON, _COMMA, _BACKSLASH = 1, 2, 3, 4, 5, 6
_KIND = np.zeros(256, np.uint8)
for _byte, _kind in ((b'"', _QUOTE), (b"{", _OPEN), (b"[", _OPEN), (b"}", _CLOSE)):
    _KIND[_byte[0]] = _kind
for _byte, _kind in ((b"]", _CLOSE), (b":", _COLON), (b",", _COMMA), (b"\\", _BACKSLASH)):
    _KIND[_byte[0]] = _kind
_BYTE = {_QUOTE: ord('"'), _BACKSLASH: ord("\\")}
_STRUCTURAL = [ord(c) for c in "{}[]:,"]
_STEP = np.zeros(7, np.int8)
_STEP[_OPEN], _STEP[_CLOSE] = 1, -1
_WHITESPACE = b" \t\r\n"
EVENTS_KEY = "traceEvents"
MAX_TOP_VALUE = 64 << 20  # bytes of a kept top-level value (or of a key)


class ScanError(ValueError):
    """The bytes are not a JSON object or array whose structure the scan can follow."""


@dataclass
class TopLevel:
    """What the scan found besides the events: the raw JSON of each kept top-level value, and
    whether the document is a bare array of events (no object around it)."""

    values: dict[str, bytes] = field(default_factory=dict)
    bare_array: bool = False
    has_events: bool = False  # an events array was found (perhaps empty)


@dataclass
class _State:
    depth: int = 0
    in_string: bool = False
    backslashes: int = 0  # length of the backslash run that ended the previous block
    root: bytes = b""  # b"{" or b"[" once the document has started
    ended: bool = False  # the root has closed
    key: str | None = None  # the top-level key whose value is being read
    capture: bytearray | None = None  # a key, or a kept value, being read
    in_events: bool = False
    cut: bool = False  # the events array being read has had a separator
    pending: bytearray = field(default_factory=bytearray)  # an event cut by the block's end


def scan_events(blocks: Iterable[bytes], keep: frozenset[str], top: TopLevel) -> Iterator[bytes]:
    """JSON arrays of consecutive events (`[e1,e2,...]`) from the document's bytes, given block
    by block; the values of the top-level keys in `keep` go to `top.values` (complete once the
    iterator is exhausted)."""
    state = _State()
    for block in blocks:
        if block:
            yield from _scan_block(block, state, keep, top)
    if not state.root:
        raise ScanError("no JSON object or array")
    if not state.ended or state.in_string:
        raise ScanError("the JSON ends early (truncated?)")


def _scan_block(
    block: bytes, state: _State, keep: frozenset[str], top: TopLevel
) -> Iterator[bytes]:
    start = 0
    if state.ended:
        _check_blank(block, 0)
        return
    if not state.root:
        start = len(block) - len(block.lstrip(_WHITESPACE))
        if start == len(block):
            return
        state.root = block[start : start + 1]
        if state.root not in (b"{", b"["):
            raise ScanError("not a JSON object or array")
        top.bare_array = state.root == b"["
    arr = np.frombuffer(block, np.uint8)
    special = arr == _BYTE[_QUOTE]
    for byte in _STRUCTURAL:
        special |= arr == byte
    slashes = state.backslashes > 0 or b"\\" in block
    if slashes:
        special |= arr == _BYTE[_BACKSLASH]
    pos = np.flatnonzero(special)
    del special
    kind = _KIND[arr[pos]]
    quote = kind == _QUOTE
    if slashes:
        quote &= ~_escaped(pos, kind, state.backslashes)
    # inside a string after each byte: the parity of the real quotes so far
    inside = np.bitwise_xor.accumulate(quote.view(np.uint8)).view(bool) ^ state.in_string
    outside = ~inside & ~quote
    step = _STEP[kind] * outside
    depth = np.cumsum(step, dtype=np.int32) + state.depth  # depth after each byte
    if len(depth) and depth.min() < 0:
        raise ScanError("unbalanced brackets")
    event_depth = 1 if top.bare_array else 2
    separators = pos[outside & (kind == _COMMA) & (depth == event_depth)]
    if top.bare_array:
        walk = outside & (((kind == _OPEN) & (depth == 1)) | ((kind == _CLOSE) & (depth == 0)))
    else:
        walk = outside & (
            ((kind == _OPEN) & (depth <= 2))
            | ((kind == _CLOSE) & (depth <= 1))
            | (((kind == _COLON) | (kind == _COMMA)) & (depth == 1))
        )
    from_at = start  # where the key, value or events being read start in this block
    for p, k, d in zip(pos[walk].tolist(), kind[walk].tolist(), depth[walk].tolist(), strict=True):
        if k == _OPEN and d == 1:  # the root opens
            from_at = p + 1
            if top.bare_array:
                state.in_events, top.has_events = True, True
            else:
                state.capture = bytearray()
        elif k == _CLOSE and state.in_events and d == event_depth - 1:  # the events end
            yield from _flush(block, from_at, p, separators, state, final=True)
            state.in_events = False
            if top.bare_array:
                _end(block, p, state)
                return
        elif k == _COLON:  # a key ends: its value starts
            state.key = _key(_captured(block, from_at, p, state))
            state.capture = bytearray() if state.key in keep or state.key == EVENTS_KEY else None
            from_at = p + 1
        elif k == _OPEN and d == 2 and state.key == EVENTS_KEY and state.capture is not None:
            if block[p : p + 1] == b"[" and not bytes(_captured(block, from_at, p, state)).strip():
                if top.has_events:
                    raise ScanError(f"two top-level '{EVENTS_KEY}' lists")
                state.in_events, top.has_events, state.capture = True, True, None
                from_at = p + 1
        elif k == _COMMA or (k == _CLOSE and d == 0):  # a value ends
            if state.capture is not None and state.key is not None:
                top.values[state.key] = bytes(_captured(block, from_at, p, state)).strip()
            state.key, state.capture, from_at = None, bytearray(), p + 1
            if k == _CLOSE:
                _end(block, p, state)
                return
    if state.in_events:
        yield from _flush(block, from_at, len(block), separators, state, final=False)
    elif state.capture is not None:
        state.capture += block[from_at:]
        if len(state.capture) > MAX_TOP_VALUE:
            raise ScanError(f"top-level value of {state.key!r} is over {MAX_TOP_VALUE >> 20} MiB")
    state.depth = int(depth[-1]) if len(depth) else state.depth
    state.in_string = bool(inside[-1]) if len(inside) else state.in_string
    state.backslashes = _trailing_backslashes(block, state.backslashes)


def _escaped(pos: np.ndarray, kind: np.ndarray, carried: int) -> np.ndarray:
    """Whether each structural byte follows an odd run of backslashes (`carried` of them ended
    the previous block)."""
    slash = kind == _BACKSLASH
    out = np.zeros(len(pos), bool)
    if not slash.any():
        if carried % 2 and len(pos) and pos[0] == 0:
            out[0] = True
        return out
    idx = np.flatnonzero(slash)
    at = pos[idx]
    # runs of consecutive backslash positions
    breaks = np.flatnonzero(np.diff(at) != 1) + 1
    run_start = np.concatenate(([0], breaks))
    run_end = np.concatenate((breaks, [len(at)])) - 1
    length = run_end - run_start + 1
    length = length + np.where(at[run_start] == 0, carried, 0)
    after = at[run_end[length % 2 == 1]] + 1  # these bytes are escaped
    found = np.searchsorted(pos, after)
    found = found[found < len(pos)]
    out[found[np.isin(pos[found], after)]] = True
    if carried % 2 and len(pos) and pos[0] == 0 and not slash[0]:
        out[0] = True
    return out


def _trailing_backslashes(block: bytes, carried: int) -> int:
    n = len(block) - len(block.rstrip(b"\\"))
    return n + carried if n == len(block) else n


def _captured(block: bytes, from_at: int, to: int, state: _State) -> bytearray:
    out = state.capture if state.capture is not None else bytearray()
    return out + block[from_at:to]


def _key(raw: bytearray) -> str:
    try:
        key = msgspec.json.decode(bytes(raw))
    except msgspec.DecodeError as exc:
        raise ScanError(f"unreadable top-level key ({exc})") from exc
    if not isinstance(key, str):
        raise ScanError("a top-level key is not a string")
    return key


def _flush(
    block: bytes, from_at: int, to: int, separators: np.ndarray, state: _State, final: bool
) -> Iterator[bytes]:
    """The complete events between `from_at` and `to` (with the one cut at the previous block's
    end) as a JSON array; what follows the last separator waits for the next block."""
    lo, hi = np.searchsorted(separators, [from_at, to])
    cut = to if final else (int(separators[hi - 1]) if hi > lo else -1)
    if cut < 0:
        state.pending += block[from_at:to]
        return
    body = bytes(state.pending) + block[from_at:cut]
    state.pending = bytearray() if final else bytearray(block[cut + 1 : to])
    if body.strip():
        yield b"[" + body + b"]"
    elif not final or state.cut:  # `[,`, `,,` or `,]`: an element missing
        raise ScanError("an empty element in the events list (a stray comma)")
    state.cut = not final


def _end(block: bytes, p: int, state: _State) -> None:
    state.ended, state.depth, state.in_string, state.capture = True, 0, False, None
    _check_blank(block, p + 1)


def _check_blank(block: bytes, start: int) -> None:
    if block[start:].strip(_WHITESPACE):
        raise ScanError("data after the end of the JSON")
