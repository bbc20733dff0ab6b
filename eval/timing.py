"""Clocks, the L2 flush, the benchmark's stop rule and its statistics.

``bind_clocks`` is called in the child *before* the submission is imported: the returned object holds
the original timing functions, so a submission that later replaces ``time.perf_counter``,
``torch.cuda.Event`` or ``torch.cuda.synchronize`` cannot change what the evaluator measures.
Everything else here is a small pure function.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

# Stop rule constants (the contest's): more than MIN_REPEATS repeats and MIN_SECONDS spent, then stop
# once the standard error is below REL_ERR of the mean, the budget is used up, or MAX_SECONDS passed.
MIN_REPEATS = 2
MIN_SECONDS = 0.1
REL_ERR = 0.001
MAX_SECONDS = 120.0

# A repeat whose device-event time is below this fraction of its host wall time is flagged, provided
# the gap is also larger than CLOCK_SKEW_MIN_GAP_NS (so launch latency on tiny cases never trips it).
CLOCK_SKEW_RATIO = 0.5
CLOCK_SKEW_MIN_GAP_NS = 200_000.0

# The parent's own cross-check of the child's report: a timed repeat whose reported time is below
# this fraction of the parent's round trip for it, by more than this gap, is flagged as well. The
# gap is large because the round trip also holds the child's output hand-over and, on a busy CPU,
# scheduling delays; it catches a child that reports grossly less time than it took.
ROUND_TRIP_RATIO = 0.5
ROUND_TRIP_MIN_GAP_NS = 250e6

# The kernel's CPU accounting of the child, read by the parent, bounds what the child may report: the
# CPU time it used during timed requests may not exceed (cores + 1) × the reported time plus
# CPU_SLACK_NS per repeat (output hand-over, reply). Work moved outside the timed region, or a clock
# the submission faked, shows up as CPU time the reported time cannot account for.
CPU_SLACK_NS = 2e6

L2_FALLBACK_BYTES = 64 * 1024 * 1024  # used when the device does not report its L2 size
L2_FILL_BYTES = 256 * 1024 * 1024  # the contest's L2 clear: a 256 MiB int64 buffer filled with 42

# Work on another stream that the device still runs after the end event completed is added to the
# repeat's time when waiting for the whole device took longer than this (an honest run's wait is a
# few microseconds, so it is charged nothing).
LATE_ALLOWANCE_S = 20e-6

# A timed repeat slower than this times the median is counted as slow in the report: the contest ranks by the
# mean, so a few slow calls (a stalled host, a busy device) weigh on a score as much as a slower kernel.
SLOW_REPEAT_RATIO = 1.1


@dataclass
class Stats:
    """Per-call times in nanoseconds over the timed repeats."""
    runs: int
    mean: float
    std: float
    err: float
    best: float
    worst: float
    median: float
    slow: int  # repeats slower than SLOW_REPEAT_RATIO × the median


@dataclass(frozen=True)
class Clocks:
    """Timing functions captured before any submission code ran."""
    perf_counter: Callable[[], float]
    cuda: bool
    event_class: type | None = None
    event_record: Callable | None = None
    event_synchronize: Callable | None = None
    event_elapsed_time: Callable | None = None
    device_synchronize: Callable[[], None] | None = None

    def synchronize(self) -> None:
        if self.cuda:
            self.device_synchronize()

    def new_event(self):
        return self.event_class(enable_timing=True)


def bind_clocks(cuda: bool) -> Clocks:
    """Capture the clock functions now (call this before importing the submission)."""
    if not cuda:
        return Clocks(perf_counter=time.perf_counter, cuda=False)
    event_class = torch.cuda.Event
    # The C-level synchronize if this build exposes it: torch.cuda.synchronize looks it up on torch._C
    # at call time, which a submission could replace.
    device_synchronize = getattr(torch._C, "_cuda_synchronize", None) or torch.cuda.synchronize
    return Clocks(perf_counter=time.perf_counter, cuda=True, event_class=event_class,
                  event_record=event_class.record, event_synchronize=event_class.synchronize,
                  event_elapsed_time=event_class.elapsed_time, device_synchronize=device_synchronize)


def l2_flush_bytes(l2_bytes: int | None) -> int:
    """Size of a buffer whose writing evicts the whole L2: at least twice the L2 size."""
    if not l2_bytes or l2_bytes <= 0:
        l2_bytes = L2_FALLBACK_BYTES
    return 2 * int(l2_bytes)


def _nothing() -> None:
    return None


def make_l2_fill(device: torch.device) -> Callable[[], None]:
    """A function that evicts the L2 as the contest does: fill a 256 MiB int64 buffer (or twice the L2,
    if larger) with 42 on the current stream, without waiting. The buffer is made once and bound to the
    function. On CPU it does nothing."""
    if device.type != "cuda":
        return _nothing
    props = torch.cuda.get_device_properties(device)
    size = max(L2_FILL_BYTES, l2_flush_bytes(getattr(props, "L2_cache_size", None)))
    buffer = torch.empty(size // 8, dtype=torch.int64, device=device)
    return functools.partial(torch.Tensor.fill_, buffer, 42)


def compute_stats(durations_ns: Sequence[float]) -> Stats:
    """Mean, sample standard deviation, standard error, best, worst and median of per-call times (ns), and how
    many repeats were slow (over SLOW_REPEAT_RATIO × the median)."""
    runs = len(durations_ns)
    if runs == 0:
        raise ValueError("no durations to summarise")
    mean = sum(durations_ns) / runs
    if runs > 1:
        variance = sum((d - mean) ** 2 for d in durations_ns) / (runs - 1)
    else:
        variance = 0.0
    std = math.sqrt(variance)
    err = std / math.sqrt(runs)
    median = statistics.median(durations_ns)
    slow = sum(1 for d in durations_ns if d > SLOW_REPEAT_RATIO * median)
    return Stats(runs=runs, mean=mean, std=std, err=err, best=min(durations_ns), worst=max(durations_ns),
                 median=median, slow=slow)


def should_stop(durations_ns: Sequence[float], elapsed_s: float, budget_s: float, max_repeats: int) -> bool:
    """The contest's stop rule for timed repeats.

    Stop at ``max_repeats``; otherwise only after more than two repeats and 0.1 s, and then once the
    standard error is below 0.1% of the mean, or mean × runs exceeds the budget, or 120 s have passed.
    """
    runs = len(durations_ns)
    if runs >= max_repeats:
        return True
    if runs <= MIN_REPEATS or elapsed_s <= MIN_SECONDS:
        return False
    stats = compute_stats(durations_ns)
    if stats.mean > 0 and stats.err < REL_ERR * stats.mean:
        return True
    if stats.mean * stats.runs * 1e-9 > budget_s:
        return True
    return elapsed_s > MAX_SECONDS


def is_clock_skew(event_ns: float, host_ns: float) -> bool:
    """True when the device clock says the region took implausibly less than the host saw."""
    return event_ns < CLOCK_SKEW_RATIO * host_ns and host_ns - event_ns > CLOCK_SKEW_MIN_GAP_NS


def is_implausibly_fast(reported_ns: float, round_trip_ns: float) -> bool:
    """True when the child reports far less time than the parent saw the whole request take."""
    return (reported_ns < ROUND_TRIP_RATIO * round_trip_ns
            and round_trip_ns - reported_ns > ROUND_TRIP_MIN_GAP_NS)


def cpu_time_exceeds_clock(cpu_ns: float, reported_ns: float, repeats: int, cores: int) -> bool:
    """True when the child burned more CPU time during timed requests than its clock can explain."""
    return cpu_ns > (cores + 1) * reported_ns + CPU_SLACK_NS * repeats
