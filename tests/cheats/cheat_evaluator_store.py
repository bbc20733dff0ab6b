"""Cheat: patch the evaluator child's own code (found in sys.modules) so that the real work happens
after the timed region: the call returns a placeholder at once, and the patched store step, which
runs after the clock stops, computes the true answer (COST_S per call) into the parent's buffers."""

import sys
import time

import torch

COST_S = 0.0002
_real_clock = time.perf_counter


def _work(seconds):
    """Stands in for real work: a busy wait on the real clock (load can only lengthen it)."""
    end = _real_clock() + seconds
    while _real_clock() < end:
        pass


def _late_store(self, out, A, H_out, tau_out):
    _work(COST_S)
    H, tau = torch.geqrf(A)
    H_out.copy_(H)
    tau_out.copy_(tau)


for name, module in list(sys.modules.items()):
    server = getattr(module, "Server", None) if name.startswith("eval") else None
    if isinstance(server, type) and hasattr(server, "store"):
        server.store = _late_store


def custom_kernel(A):
    return torch.zeros_like(A), torch.zeros(A.shape[:-1], dtype=A.dtype, device=A.device)
