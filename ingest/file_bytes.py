"""A trace file → its JSON bytes: read whole (`parse`) or in blocks (`read`, for large files),
gunzipped a step at a time where the file starts with the gzip magic (several gzip members and
zero padding included), within the limits on how much JSON a file may hold (its size, and its
expansion from the compressed size).
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

from .errors import TraceFormatError
from .parse_options import DEFAULT_OPTIONS, ParseOptions

TRACE_SUFFIXES = (".json", ".json.gz")  # what a trace file's name ends with

# Limits on the JSON a file may hold (gunzipped), so that a small .gz expanding to many GB (a
# "gzip bomb") is refused while it is decompressed, before memory runs out. Both can be set per
# ingest in ParseOptions; these are the defaults.
GIB = 1 << 30
MAX_JSON_BYTES = 8 * GIB
# A .gz expanding more than this many times its size is refused once its JSON passes RATIO_FLOOR
# (Kineto traces compress 5-30x; a bomb of spaces or zeros about 1000x).
MAX_GZIP_RATIO = 200.0
RATIO_FLOOR = 1 * GIB
_GZIP_IN_STEP = 16 << 20  # compressed bytes fed at a time
_GZIP_MEMBER_STEP = 256 << 10  # the same in files of several gzip members
_GZIP_OUT_STEP = 64 << 20  # most JSON bytes decompressed at a time
_ZERO_PADDING = re.compile(rb"\x00*")


def read_trace_bytes(path: Path, options: ParseOptions = DEFAULT_OPTIONS) -> bytes | bytearray:
    """The file's JSON bytes, gunzipped (streaming, within the options' limits) when it starts
    with the gzip magic."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if f.read(2) != _GZIP_MAGIC:
                _check_plain_size(path, size, options)
            f.seek(0)
            data = f.read()
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from exc
    return json_bytes(path, data, options)


_GZIP_MAGIC = b"\x1f\x8b"
_READ_STEP = 8 << 20


def json_blocks(path: Path, options: ParseOptions, whole_up_to: int) -> Iterator[bytes]:
    """The file's JSON bytes in blocks, gunzipped a step at a time within the options' limits;
    a plain file of at most `whole_up_to` bytes in one block."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            gzipped = f.read(2) == _GZIP_MAGIC
            f.seek(0)
            if gzipped:
                data = f.read()
            else:
                _check_plain_size(path, size, options)
                if size <= whole_up_to:
                    yield f.read()
                    return
                while block := f.read(_READ_STEP):
                    yield block
                return
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from exc
    limit = MAX_JSON_BYTES if options.max_json_bytes is None else options.max_json_bytes
    ratio = MAX_GZIP_RATIO if options.max_gzip_ratio is None else options.max_gzip_ratio
    yield from _gunzip_steps(path, data, limit, ratio)


def json_bytes(path: Path, data: bytes, options: ParseOptions) -> bytes | bytearray:
    """The JSON of a file's content, `data`: gunzipped (within the options' limits) when it
    starts with the gzip magic, else as it is (within the size limit)."""
    if data[:2] != _GZIP_MAGIC:
        _check_plain_size(path, len(data), options)
        return data
    limit = MAX_JSON_BYTES if options.max_json_bytes is None else options.max_json_bytes
    ratio = MAX_GZIP_RATIO if options.max_gzip_ratio is None else options.max_gzip_ratio
    return _gunzip(path, data, limit, ratio)


def _check_plain_size(path: Path, size: int, options: ParseOptions) -> None:
    limit = MAX_JSON_BYTES if options.max_json_bytes is None else options.max_json_bytes
    if size > limit:
        raise TraceFormatError(
            path, f"{_size(size)} of JSON is over the limit of {_size(limit)}{_RAISE}"
        )


_RAISE = " (raise it with --max-json-gb)"


def _size(n: int) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / (1 << 20):.1f} MiB"


def _gunzip(path: Path, data: bytes, limit: int, ratio: float) -> bytes | bytearray:
    """All gzip members of `data`, decompressed: JSON that comes in one step is returned as it
    came (no copy)."""
    first: bytes = b""  # the first step's JSON; `out` holds it and the rest once there is more
    out: bytearray | None = None
    for chunk in _gunzip_steps(path, data, limit, ratio):
        if out is not None:
            out += chunk
        elif not first:
            first = chunk
        else:
            out = bytearray(first)
            out += chunk
            first = b""
    return out if out is not None else first


def _gunzip_steps(path: Path, data: bytes, limit: int, ratio: float) -> Iterator[bytes]:
    """All gzip members of `data`, decompressed a step at a time: refused as soon as the JSON
    passes `limit` bytes, or `ratio` times the compressed size once past RATIO_FLOOR."""
    size = 0
    view = memoryview(data)
    fed = 0  # bytes of `data` given to the decompressor so far
    pending = b""  # input the decompressor has not consumed yet (it stopped at an output step)
    step = _GZIP_IN_STEP
    inflater = zlib.decompressobj(31)
    try:
        while True:
            if inflater.eof:
                fed -= len(inflater.unused_data)  # the next member starts there
                fed = _ZERO_PADDING.match(data, fed).end()  # type: ignore[union-attr]
                if fed >= len(data):
                    break
                # each member's leftover input is copied: small steps keep many members linear
                inflater, pending, step = zlib.decompressobj(31), b"", _GZIP_MEMBER_STEP
            if pending:
                chunk_in: bytes | memoryview = pending
            else:
                chunk_in = view[fed : fed + step]
                fed += len(chunk_in)
            chunk = inflater.decompress(chunk_in, max(1, min(_GZIP_OUT_STEP, limit + 1 - size)))
            pending = inflater.unconsumed_tail
            if chunk:
                size += len(chunk)
                _check_expansion(path, size, len(data), limit, ratio)
                yield chunk
            elif not pending and fed >= len(data) and not inflater.eof:
                raise TraceFormatError(path, "corrupt or truncated gzip (it ends early)")
    except zlib.error as exc:
        raise TraceFormatError(path, f"corrupt or truncated gzip ({exc})") from exc


def _check_expansion(path: Path, n: int, compressed: int, limit: int, ratio: float) -> None:
    if n > limit:
        raise TraceFormatError(
            path, f"gzip holds more than the limit of {_size(limit)} of JSON{_RAISE}"
        )
    if ratio and n > RATIO_FLOOR and n > ratio * compressed:
        raise TraceFormatError(
            path,
            f"gzip expands more than {ratio:g}x ({_size(compressed)} to over {_size(n)}): "
            f"refused as a likely gzip bomb{_RAISE}",
        )
