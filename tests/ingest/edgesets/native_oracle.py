"""HTA's own graph for each job, run inside an HTA environment (stdlib + hta + pyarrow only).

`python -I native_oracle.py WORKER.py JOBS.json OUT_DIR`: JOBS.json lists {"key", "rank",
"file", "annotation", "instance_id"}. Each job is analyzed by the export of the HTA edge sets
(`hta_worker._analyze`: every CPGraph edge with both endpoints, type, the weight the longest
path used, and its place on the path), written to OUT_DIR/<key>/rank-<rank>.parquet, and its
status to OUT_DIR/<key>/rank-<rank>.json.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import sys
import warnings
from pathlib import Path


def main() -> None:
    worker_path, jobs_path, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    spec = importlib.util.spec_from_file_location("hta_worker", worker_path)
    assert spec is not None and spec.loader is not None
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger().handlers[0].setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    import hta.trace_analysis  # noqa: F401 - imported once, before the jobs

    version = None
    for dist in ("HolisticTraceAnalysis", "traceinsight"):
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    for job in json.loads(jobs_path.read_text()):
        target = out / job["key"]
        target.mkdir(parents=True, exist_ok=True)
        item = {
            "rank": job["rank"],
            "file": job["file"],
            "annotation": job["annotation"],
            "instance_id": job["instance_id"],
        }
        status = worker._analyze(item, target, version)
        (target / f"rank-{job['rank']}.json").write_text(json.dumps(status, sort_keys=True))


if __name__ == "__main__":
    main()
