"""The sync-kinds phase (`SyntheticConfig.sync_demo`): at the end of every step, every kind of
CUDA synchronization on each of the rank's devices and streams, each with its ``cuda_sync``
event."""

from __future__ import annotations

from .config import COMPUTE_STREAM
from .events import (
    CBID_DEVICE_SYNC,
    CBID_EVENT_SYNC,
    CBID_MEMCPY,
    CBID_STREAM_SYNC,
    CBID_STREAM_WAIT_EVENT,
    CPU_OP,
    RankEvents,
    format_us,
)
from .model import K_CLAMP, K_GEMM_FWD, K_LAYER_NORM, Kernel, quote
from .timing import KERNEL_LATENCY_NS, LAUNCH_NS, STREAM_WAIT_NS, SYNC_TAIL_NS


class SyncKindsPhase(RankEvents):
    """A rank that can end its steps with the sync-kinds phase."""

    def _free_at(self, device: int, stream: int) -> int:
        """When (device, stream) is done with what was queued on it."""
        if device == self.device and stream in self.free:
            return self.free[stream]
        return self.side_free.get((device, stream), 0)

    def _set_free(self, device: int, stream: int, t: int) -> None:
        """(device, stream) is done with what was queued on it at `t`."""
        if device == self.device and stream in self.free:
            self.free[stream] = t
        else:
            self.side_free[device, stream] = t

    def _demo_launch(self, device: int, stream: int, k: Kernel, after: int = 0) -> int:
        """cudaLaunchKernel now onto (device, stream), its kernel starting no earlier than
        `after`; returns the kernel's end."""
        ts = self.t
        dur = self.cpu(LAUNCH_NS)
        corr, ext = self.corr, self.stack[-1][6]
        assert ext is not None
        self.corr += 1
        start = max(ts + dur + KERNEL_LATENCY_NS, self._free_at(device, stream), after)
        kdur = self.gpu_dur(int(k.mean_ns * self.gpu_scale))
        self._set_free(device, stream, start + kdur)
        self.out.append(self.launch_text(k, stream, ts, dur, start, kdur, ext, corr, device=device))
        self.t = ts + dur
        return start + kdur

    def _blocking_copy(self, device: int) -> None:
        """A blocking cudaMemcpy DtoH on (device, 7): the call returns once the copy is done;
        Kineto writes a 'Stream Sync' cuda_sync event for it."""
        ts, s = self.t, COMPUTE_STREAM
        start = max(ts + KERNEL_LATENCY_NS, self._free_at(device, s))
        gdur, nbytes = max(1_000, self.gpu_dur(8_000)), 4096
        end = start + gdur + self.cpu(SYNC_TAIL_NS)
        _, corr, ext = self.runtime("cudaMemcpy", CBID_MEMCPY, end - ts)
        gpu_pid = self.gpu_pid + device - self.device
        self.out.append(
            f'{{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", '
            f'"pid": {gpu_pid}, "tid": {s}, "ts": {format_us(start)}, "dur": {format_us(gdur)}, '
            f'"args": {{"External id": {ext}, "device": {device}, "context": 1, "stream": {s}, '
            f'"correlation": {corr}, "bytes": {nbytes}, '
            f'"memory bandwidth (GB/s)": {nbytes / gdur:.6f}{self.ra}}}}}'
        )
        self.out.append(
            f'{{"ph": "s", "id": {corr}, {self.loc}, "ts": {format_us(ts)}, '
            f'"cat": "ac2g", "name": "ac2g"}},\n'
            f'{{"ph": "f", "id": {corr}, "pid": {gpu_pid}, "tid": {s}, '
            f'"ts": {format_us(start)}, "cat": "ac2g", "name": "ac2g", "bp": "e"}}'
        )
        self._set_free(device, s, start + gdur)
        self.cuda_sync("Stream Sync", s, ts + 1_000, end, corr, ext, device=device)

    def sync_kinds_phase(self) -> None:
        """Every sync kind on every device and stream of the rank (see SyntheticConfig)."""
        self.gap()
        self.open_op(CPU_OP, quote("tracegraph::sync_kinds"))
        streams = self.cfg.demo_streams
        for d in self.cfg.devices(self.rank):
            for s in streams:  # work on every stream
                self.gap()
                self._demo_launch(d, s, K_LAYER_NORM)
            for s in streams[1:]:  # stream 7 waits for the work just queued on s
                self.gap()
                ready = self._demo_launch(d, s, K_LAYER_NORM)
                record_corr, event_id = self.record_event()
                dur = self.cpu(STREAM_WAIT_NS)
                ts, corr, ext = self.runtime("cudaStreamWaitEvent", CBID_STREAM_WAIT_EVENT, dur)
                self.cuda_sync(
                    "Stream Wait Event",
                    COMPUTE_STREAM,
                    ts + 500,
                    ts + dur,
                    corr,
                    ext,
                    (s, record_corr, event_id),
                    device=d,
                )
                self._demo_launch(d, COMPUTE_STREAM, K_CLAMP, after=ready)
            last = streams[-1]  # the host waits for an event recorded on the last stream
            self.gap()
            self._demo_launch(d, last, K_GEMM_FWD)
            record_corr, event_id = self.record_event()
            ts, end, corr, ext = self.host_wait(
                "cudaEventSynchronize", CBID_EVENT_SYNC, self._free_at(d, last)
            )
            self.cuda_sync(
                "Event Sync",
                -1,
                ts + 1_000,
                end,
                corr,
                ext,
                (last, record_corr, event_id),
                device=d,
            )
            for s in streams:  # and for each stream
                self.gap()
                self._demo_launch(d, s, K_GEMM_FWD)
                ts, end, corr, ext = self.host_wait(
                    "cudaStreamSynchronize", CBID_STREAM_SYNC, self._free_at(d, s)
                )
                self.cuda_sync("Stream Sync", s, ts + 1_000, end, corr, ext, device=d)
            if self.cfg.blocking_copy:
                self.gap()
                self._blocking_copy(d)
            self.gap()
            until = max(self._free_at(d, s) for s in streams)
            ts, end, corr, ext = self.host_wait("cudaDeviceSynchronize", CBID_DEVICE_SYNC, until)
            self.cuda_sync("Context Sync", -1, ts + 1_000, end, corr, ext, device=d)
        self.close_op()
