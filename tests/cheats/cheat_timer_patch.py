"""Cheat: replace the clocks (time.perf_counter & co, CUDA events, synchronize) with fakes that say
almost no time passed.  The honest work costs COST_S per call."""

import time

import torch

COST_S = 0.0002
_real_clock = time.perf_counter
_ticks = [0]


def _work(seconds):
    """Stands in for real work: a busy wait on the real clock (load can only lengthen it)."""
    end = _real_clock() + seconds
    while _real_clock() < end:
        pass


def _fake_clock():
    _ticks[0] += 1
    return _ticks[0] * 1e-9


def _fake_clock_ns():
    _ticks[0] += 1
    return _ticks[0]


time.perf_counter = time.monotonic = time.time = time.process_time = _fake_clock
time.perf_counter_ns = time.monotonic_ns = time.time_ns = _fake_clock_ns
torch.cuda.Event.elapsed_time = lambda self, other: 1e-6
torch.cuda.synchronize = lambda *args, **kwargs: None


def custom_kernel(A):
    _work(COST_S)
    return torch.geqrf(A)
