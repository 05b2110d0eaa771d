"""An ingest's per-file work as Ray tasks (`ingest --ray auto|local|ADDRESS`).

The same work as the local process pool (`parallel.prepare_file`), on a Ray cluster: each task
parses one file and prepares its ranks; the main process takes the outcomes in file order and
loads them in its one transaction. A task writes its ranks' archive rows where its node sees
the run's partial archive (this machine, or a shared disk) and sends them back where it does
not; it spills to its own node's temp folder. The trace files must be readable at the same
path on every node (NFS, or a local instance). A summary's files (`ingest --summary`) go in
tasks of several files (`BATCH_FILES`): their outcomes are kilobytes, and the driver's cost is
per task.
A task is retried where its worker or node is lost (the work is pure), never on a trace error.
A local instance (`--ray local`) ends with the ingest, a killed one too (`lifeline.Reaper`).

Ray is an optional extra (`tracegraph[ray]`); only this module imports it.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import IngestError, TracegraphError
from .lifeline import Reaper
from .parallel import (
    FileBatches,
    FileOutcome,
    InBatch,
    WorkerLost,
    prepare_file,
    prepare_files,
)
from .prepare import Summariser

if TYPE_CHECKING:
    from .parse_options import ParseOptions
    from .pipeline import TraceFile

TASK_RETRIES = 2  # a lost worker or node; a trace error is raised at once
# A summary's files go to Ray in tasks of up to BATCH_FILES files (`parallel.FileBatches`): its
# outcomes are kilobytes, and a task per small file costs the driver ~3.5 ms a file
BATCH_FILES = 16


class RayFilePool:
    """Files prepared as Ray tasks, `slots` at once (default: the cluster's CPUs)."""

    def __init__(
        self,
        address: str,
        jobs: int | None = None,
        archive: tuple[Path, str] | None = None,
        summarise: Summariser | None = None,
    ) -> None:
        self.summarise = summarise
        self.ray = _ray()
        self.started = False
        # a local instance's daemons killed should this process be (see `lifeline`)
        self.reaper = Reaper() if address == "local" and not self.ray.is_initialized() else None
        try:
            self.started = _connect(self.ray, address)
            cpus = int(self.ray.cluster_resources().get("CPU", 1))
            self.slots = max(1, jobs if jobs is not None else cpus)
            self.task = self.ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(prepare_file)
            self.batch_task = self.ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(prepare_files)
        except BaseException:  # an interrupt during start-up too: no Ray processes left behind
            if self.started or (address == "local" and self.ray.is_initialized()):
                self.ray.shutdown()
            self._stop_reaper()
            raise
        self.refs: list[Any] = []
        self.archive = archive or (None, None)
        # summaries: files batched; enough in flight to keep every CPU busy
        self.batches: FileBatches | None = None
        if summarise is not None:
            self.batches = FileBatches(self._send, self._get, BATCH_FILES)
            self.slots *= BATCH_FILES

    def submit(self, source: TraceFile, options: ParseOptions, run: str, run_idx: int) -> object:
        # the node's own temp folder for spills: this machine's may not exist there
        spill_here = replace(options, spill_at=None)
        in_folder = source.folder is not None
        args = (source.path, in_folder, spill_here, run, run_idx, *self.archive, None,
                self.summarise)  # fmt: skip
        if self.batches is not None:
            return self.batches.add(args, source.path)
        ref = self.task.remote(*args)
        self.refs.append(ref)
        return ref

    def _send(self, jobs: list[tuple[object, ...]]) -> Any:
        ref = self.batch_task.remote(jobs)
        self.refs.append(ref)
        return ref

    def result(self, handle: object) -> FileOutcome:
        if isinstance(handle, InBatch):
            assert self.batches is not None
            return self.batches.result(handle)
        outcome = self._get(handle)
        assert isinstance(outcome, FileOutcome)
        return outcome

    def _get(self, handle: object) -> Any:
        exceptions = self.ray.exceptions
        try:
            outcome = self.ray.get(handle)
        except exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, TracegraphError):  # the task's own error (a bad trace)
                raise cause from None
            why = _first_line(cause) if isinstance(cause, BaseException) else _first_line(exc)
            raise WorkerLost(f"a Ray task failed ({type(cause).__name__}: {why}); is "
                             "tracegraph installed on every node?") from exc  # fmt: skip
        except exceptions.RayError as exc:
            raise WorkerLost(
                f"a Ray worker or node was lost while files were prepared ({_first_line(exc)})"
            ) from exc
        self.refs.remove(handle)
        return outcome

    def close(self, failed: bool) -> None:
        if failed:
            for ref in self.refs:
                self.ray.cancel(ref, force=True)
        self.refs.clear()
        if self.started:
            self.ray.shutdown()
        self._stop_reaper()

    def _stop_reaper(self) -> None:
        if self.reaper is not None:
            self.reaper.stop()
            self.reaper = None


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise IngestError(
            "--ray needs Ray, which is not installed: pip install 'tracegraph[ray]'"
        ) from None
    return ray


def _connect(ray: Any, address: str) -> bool:
    """Join the cluster at `address` ('auto': the one running here, 'local': a new instance on
    this machine); True when this call connected (and so disconnects at the end). A Ray that
    the caller initialized itself is used as it is."""
    _check_answers(ray, address)
    if ray.is_initialized():
        return False
    quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
    try:
        if address == "local":
            ray.init(include_dashboard=False, **quiet)
        else:
            ray.init(address=address, **quiet)
    except ConnectionError as exc:
        hint = " (start one: `ray start --head`; or --ray local)" if address == "auto" else ""
        raise IngestError(
            f"--ray {address}: no Ray cluster to join{hint}: {_first_line(exc)}"
        ) from None
    except (ValueError, RuntimeError) as exc:
        raise IngestError(f"--ray {address}: {_first_line(exc)}") from None
    return True


def _check_answers(ray: Any, address: str) -> None:
    """A HOST:PORT where nothing listens, or where something other than Ray's GCS answers, is
    an error now: Ray itself retries for minutes (measured: an HTTP server given as the address
    kept `ray.init` waiting over 150 s; a gRPC server, or an HTTP/2 listener that sends one
    SETTINGS frame, minutes too)."""
    if address in ("auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise IngestError(f"--ray {address}: not auto, local, HOST:PORT or ray://HOST:PORT")
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S) as conn:
            speaks_grpc = _answers_http2(conn)  # at once, where not (Ray's client takes 15 s)
    except OSError as exc:
        raise IngestError(f"--ray {address}: no Ray cluster answers there ({exc})") from None
    if not speaks_grpc:
        raise IngestError(
            f"--ray {address}: something answers there, but not a Ray cluster (no gRPC); "
            "give the head node's GCS address (`ray start --head` prints it)"
        )
    if not _gcs_answers(ray, address):
        raise IngestError(
            f"--ray {address}: a gRPC server answers there, but not a Ray cluster (no GCS "
            f"reply in {GCS_REPLY_TIMEOUT_S:g} s); give the head node's GCS address"
        )


CONNECT_TIMEOUT_S = 5.0
GCS_REPLY_TIMEOUT_S = 3.0
# An HTTP/2 client's connection preface and an empty SETTINGS frame: a gRPC server (Ray's GCS
# is one) answers with a SETTINGS frame of its own; an HTTP/1 server, or another protocol, not.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_SETTINGS = 0x04


def _answers_http2(conn: socket.socket) -> bool:
    """Whether the server at the other end of `conn` answers an HTTP/2 preface in kind."""
    try:
        conn.sendall(_HTTP2_PREFACE)
        head = b""
        while len(head) < 9:  # a frame header: length (3), type (1), flags (1), stream (4)
            chunk = conn.recv(9 - len(head))
            if not chunk:
                return False
            head += chunk
    except OSError:  # a timeout, or the server reset the connection
        return False
    return head[3] == _SETTINGS


def _gcs_answers(ray: Any, address: str) -> bool:
    """Whether a GCS at `address` answers Ray's first request (its cluster id) in time."""
    client_type = getattr(ray._raylet, "InnerGcsClient", None)  # the one ray.init uses
    if client_type is None:  # a Ray without it (private): ray.init's own wait decides
        return True
    try:
        with _stderr_silenced():  # its C++ logs a warning line when no reply comes
            client = client_type.standalone(address, None, int(GCS_REPLY_TIMEOUT_S * 1000))
            return not client.cluster_id.is_nil()
    except Exception:  # RayError, or whatever a private client raises: no GCS reply
        return False


@contextmanager
def _stderr_silenced() -> Iterator[None]:
    """File descriptor 2 points at /dev/null meanwhile (C++ code writes there directly)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
