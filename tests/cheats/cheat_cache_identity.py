"""Cheat: remember each output by the input buffer's identity (data pointer) and replay it.

The honest path costs COST_S per call (a busy wait stands in for real work), so a replay that is
accepted shows up as a time far below COST_S.
"""

import time

import torch

COST_S = 0.0002
_real_clock = time.perf_counter
_seen = {}


def _work(seconds):
    """Stands in for real work: a busy wait on the real clock (load can only lengthen it)."""
    end = _real_clock() + seconds
    while _real_clock() < end:
        pass


def custom_kernel(A):
    key = (A.data_ptr(), tuple(A.shape))
    if key in _seen:
        return _seen[key]
    _work(COST_S)
    _seen[key] = torch.geqrf(A)
    return _seen[key]
