"""Cheat: fuse queued calls into one.  It keeps references to every input buffer it has seen; the
first call of a round factors all of them at once and later calls return lookups.

Each matrix factored costs COST_S (a busy wait stands in for the work), so the work is the same and an
honest clock must still see COST_S per call; a clock that only sees some calls sees far less.
"""

import time

import torch

COST_S = 0.0002
_real_clock = time.perf_counter
_buffers = {}  # data_ptr -> the input tensor (a reference kept across calls)
_ready = {}  # data_ptr -> output computed ahead of its call


def _work(seconds):
    """Stands in for real work: a busy wait on the real clock (load can only lengthen it)."""
    end = _real_clock() + seconds
    while _real_clock() < end:
        pass


def custom_kernel(A):
    key = A.data_ptr()
    _buffers[key] = A
    if key in _ready:
        return _ready.pop(key)
    for ptr, buffer in _buffers.items():
        _work(COST_S)
        _ready[ptr] = torch.geqrf(buffer)
    return _ready.pop(key)
