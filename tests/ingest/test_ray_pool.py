"""`ingest --ray`: files prepared as tasks on a Ray cluster (a local instance the tests start,
`ray.init(num_cpus=2)`) give the database, archive and errors one process gives."""

from __future__ import annotations

import gzip
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tracegraph import open as open_graph
from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.ingest.errors import IngestError, TraceFormatError
from tracegraph.ingest.pipeline import IngestOptions, ingest

from ..conftest import TRACES, needs_traces
from .test_parallel import archived, dump, kill_leaves_nothing, kill_mid_ingest

ray = pytest.importorskip("ray", reason="the ray extra (tracegraph[ray]) is not installed")


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local Ray instance of 2 CPUs for this module; its address."""
    context = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield context.address_info["gcs_address"]
    finally:
        ray.shutdown()


def one_and_ray(paths: list[Path], tmp_path: Path) -> tuple[Path, Path]:
    one, on_ray = tmp_path / "one.kuzu", tmp_path / "ray.kuzu"
    ingest(paths, one, IngestOptions(run="job", jobs=1))
    result = ingest(paths, on_ray, IngestOptions(run="job", ray="auto"))
    assert len(result.work) == len(result.ranks)  # one file per rank, each prepared by a task
    assert all(w.work_s > 0 and w.peak_rss_bytes > 0 for w in result.work)
    return one, on_ray


def test_ray_gives_the_database_one_process_gives(cluster: str, tmp_path: Path) -> None:
    config = SyntheticConfig(ranks=4, steps=2, layers=2, python_stacks=True, annotate=True)
    folder = tmp_path / "traces"
    files = write_per_rank(config, folder)
    gzipped = folder / "rank3.trace.json.gz"
    gzipped.write_bytes(gzip.compress(files[3].read_bytes()))
    files[3].unlink()
    one, on_ray = one_and_ray([folder], tmp_path)
    want = dump(one)
    assert len(want["Kernel"]) > 100
    assert dump(on_ray) == want
    got, kept = archived(on_ray), archived(one)
    assert got.keys() == kept.keys() and all(got[k].equals(kept[k]) for k in kept)


@needs_traces
def test_ray_gives_the_same_database_on_a_real_job(cluster: str, tmp_path: Path) -> None:
    one, on_ray = one_and_ray([TRACES / "cpu_ddp_2r"], tmp_path)
    assert dump(on_ray) == dump(one)


def test_a_task_error_is_the_error_one_process_gives(cluster: str, tmp_path: Path) -> None:
    job = tmp_path / "job"
    files = write_per_rank(SyntheticConfig(ranks=3, steps=1, layers=1), job)
    (job / "meta.json").write_text('{"world_size": 3}')  # no trace: skipped, as without Ray
    result = ingest([job], tmp_path / "skip.kuzu", IngestOptions(ray="auto"))
    assert ("meta.json", "not a trace (no traceEvents)") in result.skipped

    data = gzip.compress(files[1].read_bytes())
    (job / files[1].name).unlink()
    (job / "rank1.json.gz").write_bytes(data[: len(data) // 2])
    errors = []
    for options in (IngestOptions(jobs=1), IngestOptions(ray="auto")):
        db = tmp_path / f"broken-{options.ray}.kuzu"
        with pytest.raises(TraceFormatError) as caught:
            ingest([job], db, options)
        errors.append((caught.value.path, caught.value.reason))
        assert not db.exists()  # nothing half-written
    assert errors[0] == errors[1] and "gzip" in errors[0][1]


def test_a_summary_on_ray_is_one_process_summary(
    cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Summaries go in tasks of several files (3 here, over 7 files: the last task short): the
    same database, the same summary tables, and a bad file's own error in its place, passed
    over with keep_going as in one process."""
    from tracegraph.ingest import ray_pool
    from tracegraph.queries.report.summary_tier import SUMMARY_TIER

    monkeypatch.setattr(ray_pool, "BATCH_FILES", 3)
    job = tmp_path / "job"
    files = write_per_rank(SyntheticConfig(ranks=7, steps=2, layers=1), job)
    one, on_ray = tmp_path / "one.kz", tmp_path / "ray.kz"
    ingest([job], one, IngestOptions(run="job", jobs=1, summarise=SUMMARY_TIER))
    ingest([job], on_ray, IngestOptions(run="job", ray="auto", summarise=SUMMARY_TIER))
    assert dump(on_ray) == dump(one)
    assert open_graph(on_ray).report().to_json() == open_graph(one).report().to_json()
    files[4].write_text(files[4].read_text()[:1000])  # cut short, in the second task
    kept = {}
    for name, options in (("one", IngestOptions(jobs=1)), ("ray", IngestOptions(ray="auto"))):
        with pytest.raises(TraceFormatError, match="rank4"):
            ingest([job], tmp_path / f"bad-{name}.kz", replace(options, summarise=SUMMARY_TIER))
        db = tmp_path / f"kept-{name}.kz"
        going = replace(options, summarise=SUMMARY_TIER, keep_going=True, run="job")
        kept[name] = ingest([job], db, going)
    assert [r.rank for r in kept["ray"].ranks] == [0, 1, 2, 3, 5, 6]
    assert kept["ray"].skipped == kept["one"].skipped
    assert dump(tmp_path / "kept-ray.kz") == dump(tmp_path / "kept-one.kz")


def test_the_cli_joins_a_cluster_by_its_address(cluster: str, tmp_path: Path) -> None:
    files = write_per_rank(SyntheticConfig(ranks=2, steps=1, layers=1), tmp_path / "job")
    db = tmp_path / "cli.kuzu"
    done = tracegraph("ingest", str(files[0].parent), "--db", str(db), "--ray", cluster)
    assert done.returncode == 0, done.stderr
    assert dump(db) == dump(one_process(files, tmp_path))


def one_process(files: list[Path], tmp_path: Path) -> Path:
    db = tmp_path / "one.kuzu"
    ingest([files[0].parent], db, IngestOptions(jobs=1))
    return db


def test_no_cluster_is_one_line_and_exit_2(tmp_path: Path) -> None:
    files = write_per_rank(SyntheticConfig(ranks=1, steps=1, layers=1), tmp_path / "job")
    db = tmp_path / "none.kuzu"
    done = tracegraph("ingest", str(files[0]), "--db", str(db), "--ray", free_address())
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "no Ray cluster answers" in done.stderr
    assert not db.exists()
    with pytest.raises(IngestError, match="not auto, local, HOST:PORT"):
        ingest(files, db, IngestOptions(ray="somewhere"))


def tracegraph(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    cli = shutil.which("tracegraph", path=os.path.dirname(sys.executable))
    assert cli is not None
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=timeout)


def free_address() -> str:
    """A local port that was free a moment ago, as HOST:PORT."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_a_service_that_is_not_ray_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """An HTTP server given as the cluster's address: refused at once (Ray's own connect kept
    waiting over 150 s), while the test above joins a real GCS through the same check."""
    import http.server

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        files = write_per_rank(SyntheticConfig(ranks=1, steps=1, layers=1), tmp_path / "job")
        db = tmp_path / "http.kuzu"
        address = f"127.0.0.1:{server.server_address[1]}"
        done = tracegraph("ingest", str(files[0]), "--db", str(db), "--ray", address)
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "not a Ray cluster" in done.stderr
    assert not db.exists()


def test_an_http2_server_that_is_not_ray_is_refused_in_seconds(tmp_path: Path) -> None:
    """A listener that answers an HTTP/2 client's preface with a SETTINGS frame, and then
    nothing, as any gRPC server would: no GCS reply, so refused within seconds (the check was
    that SETTINGS frame; Ray's own connect then kept waiting for minutes)."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def settings_only() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            held.append(conn)
            conn.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")  # SETTINGS, empty

    threading.Thread(target=settings_only, daemon=True).start()
    files = write_per_rank(SyntheticConfig(ranks=1, steps=1, layers=1), tmp_path / "job")
    db = tmp_path / "h2.kuzu"
    address = f"127.0.0.1:{server.getsockname()[1]}"
    started = time.monotonic()
    try:
        done = tracegraph("ingest", str(files[0]), "--db", str(db), "--ray", address, timeout=60)
    finally:
        server.close()
        for conn in held:
            conn.close()
    assert time.monotonic() - started < 30
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "no GCS reply" in done.stderr
    assert not db.exists()


def test_a_killed_ingest_leaves_no_ray_daemon(tmp_path: Path) -> None:
    """kill -9 of `ingest --ray local` mid-work: none of the local instance's processes is left
    a few seconds later (Ray's raylet agents outlived the raylet, which dies with the driver)."""
    folder = tmp_path / "job"
    write_per_rank(SyntheticConfig(ranks=8, steps=10, layers=8), folder)
    agents = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")

    def agents_up(processes: list[str]) -> bool:
        return all(any(p.startswith(agent) for p in processes) for agent in agents)

    session = kill_mid_ingest(folder, tmp_path / "x.kuzu", ["--ray", "local"], agents_up)
    kill_leaves_nothing(session, within_s=5.0)
