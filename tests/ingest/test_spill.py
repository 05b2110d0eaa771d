"""`Spill`: rows set aside on disk by key and read back per key set, in `order_by` order, as
the rows that were added (the column-for-column comparison of block reading with a whole
parse on the shared traces is in test_read)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tracegraph.ingest import spill as spill_module
from tracegraph.ingest.spill import Spill


def rows(ev_idx: list[int], tag: str) -> pa.Table:
    return pa.table(
        {
            "ev_idx": pa.array(ev_idx, pa.int64()),
            "name": pa.array([f"{tag}{i}" for i in ev_idx], pa.string()),
            "dur": pa.array([None if i % 3 == 0 else i * 10 for i in ev_idx], pa.int64()),
        }
    )


@pytest.mark.parametrize("in_memory", [False, True])
def test_a_key_set_comes_back_whole_and_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_memory: bool
) -> None:
    """Pieces of two keys, written to disk (or still held) out of order, come back as exactly
    the rows added, sorted by ev_idx, one chunk per column; the other key stays."""
    if not in_memory:
        monkeypatch.setattr(spill_module, "BUFFER_BYTES", 1)  # every add is written at once
    spill = Spill(tmp_path / "x.spill", order_by="ev_idx")
    rng = np.random.default_rng(0)
    wanted: list[pa.Table] = []
    for i in range(6):
        part = rows(sorted(rng.choice(10_000, 50, replace=False).tolist()), f"p{i}")
        key = ("rank", i % 2)
        spill.add(key, part)
        if key == ("rank", 0):
            wanted.append(part)
    spill.add(("rank", 1), rows([20_000], "other"))
    try:
        got = spill.take([("rank", 0)])
        assert got is not None
        expected = pa.concat_tables(wanted).sort_by("ev_idx")
        assert got.equals(expected)
        assert all(column.num_chunks == 1 for column in got.columns)
        assert spill.keys() == [("rank", 1)]
        if not in_memory:  # the pieces read back are gone from disk
            assert len(list(spill.folder.iterdir())) == 4  # rank 1's four pieces
    finally:
        spill.close()
    assert not spill.folder.exists()


def test_rows_already_in_order_are_not_sorted_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key's rows on disk are older than those still held: read back in that order, rows set
    aside in file order come back as added without a sort (which would hold a second copy)."""
    spill = Spill(tmp_path / "x.spill", order_by="ev_idx")
    parts = [rows(list(range(i * 10, i * 10 + 10)), "a") for i in range(3)]
    spill.add(("rank", 0), parts[0])
    spill.add(("rank", 0), parts[1])
    spill._write(spill.keys())
    spill.add(("rank", 0), parts[2])  # still held

    def no_sort(*args: object, **kwargs: object) -> None:
        raise AssertionError("rows already in order were sorted")

    monkeypatch.setattr(spill_module.pc, "sort_indices", no_sort)
    try:
        got = spill.take([("rank", 0)])
        assert got is not None and got.equals(pa.concat_tables(parts).combine_chunks())
    finally:
        spill.close()


def test_a_keys_first_bytes_are_written_plain_and_the_rest_compressed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small pieces skip LZ4 (costly on them), until a key has PLAIN_UP_TO bytes on disk; the
    plain and compressed pieces of a key come back as the rows added."""
    if not pa.Codec.is_available("lz4"):
        pytest.skip("this pyarrow has no LZ4")
    parts = [
        pa.table(
            {
                "ev_idx": pa.array(range(i * 4096, (i + 1) * 4096), pa.int64()),
                "dur": pa.array([7] * 4096, pa.int64()),
            }
        )  # fmt: skip
        for i in range(4)
    ]
    piece_bytes = parts[0].nbytes
    monkeypatch.setattr(spill_module, "PLAIN_UP_TO", 2 * piece_bytes)
    monkeypatch.setattr(spill_module, "BUFFER_BYTES", 1)  # every add is written at once
    spill = Spill(tmp_path / "x.spill", order_by="ev_idx")
    try:
        for part in parts:
            spill.add(("rank", 0), part)
        sizes = [path.stat().st_size for path in spill.pieces[("rank", 0)]]
        assert all(size >= piece_bytes for size in sizes[:2])  # as they are
        assert all(size < piece_bytes / 3 for size in sizes[2:])  # LZ4: regular numbers shrink
        got = spill.take([("rank", 0)])
        assert got is not None and got.equals(pa.concat_tables(parts).combine_chunks())
    finally:
        spill.close()
