"""The native builder re-reads a trace as the ingest read it (when its column cache is gone)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.explorer.cli import main

CONFIG = SyntheticConfig(ranks=1, steps=2, layers=2)


def test_a_file_ingested_with_rank_over_a_bad_distributed_info_rebuilds(
    tmp_path: Path, capsys
) -> None:
    (path,) = write_per_rank(CONFIG, tmp_path / "traces")
    text = path.read_text()
    head, tail = text.split('"distributedInfo"', 1)
    path.write_text(head + '"distributedInfo"' + tail.replace('"rank": 0', '"rank": "abc"', 1))
    db = tmp_path / "run.kuzu"
    assert main(["ingest", str(path), "--db", str(db)]) == 2  # the file's rank is unusable
    assert main(["ingest", str(path), "--db", str(db), "--rank", "5"]) == 0
    shutil.rmtree(db.with_name(db.name + ".native-cache"))  # the builder must re-read the file
    capsys.readouterr()
    assert main(["edges", str(db), "--native"]) == 0
    out = capsys.readouterr().out
    assert "rank 5: critical path" in out
