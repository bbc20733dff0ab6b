"""Cheat: find the evaluator's clocks (bound before this file was imported) through the garbage
collector and swap the bound functions for fakes.  The honest work costs COST_S per call."""

import gc
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


for obj in gc.get_objects():
    if type(obj).__name__ == "Clocks" and hasattr(obj, "perf_counter"):
        object.__setattr__(obj, "perf_counter", _fake_clock)
        if getattr(obj, "event_elapsed_time", None) is not None:
            object.__setattr__(obj, "event_elapsed_time", lambda start, end: 1e-6)


def custom_kernel(A):
    _work(COST_S)
    return torch.geqrf(A)
