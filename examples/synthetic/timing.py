"""What the simulated work costs (ns): mean CPU durations, the GPU's launch latency, python
frames' own time, the NCCL ring's speed and how long a collective never completed runs."""

# Mean CPU-side durations, jittered by ±20 % and scaled on the straggler.
OP_PRE_NS = 5_000
OP_POST_NS = 3_000
OP_GAP_NS = 2_000
LAUNCH_NS = 6_000
MEMCPY_RT_NS = 9_000
MEMSET_RT_NS = 7_000
EVENT_RECORD_NS = 2_500
STREAM_WAIT_NS = 2_000
SYNC_TAIL_NS = 3_000
DATALOADER_NS = 40_000
HANDOFF_NS = 15_000
STEP_GAP_NS = 30_000
KERNEL_LATENCY_NS = 1_500  # a launch's end to its kernel's earliest start
PY_FRAME_NS = 2_000
NCCL_BUS_GBPS = 180  # bytes per ns
NCCL_LATENCY_NS = 18_000
UNMATCHED_HANG_NS = 50_000_000  # a collective some rank never enters: runs to the trace's end
