"""Cheat: return at once and finish the output on a background thread (CPU stand-in for GPU work
left running on a side queue that the end event does not wait for).  Honest the first time it sees a
buffer (the untimed pass), so it is the timed outputs that are incomplete when the call returns.

Worded without the one word the contest's upload server refuses anywhere in a file (eval/upload_rules.py),
so the evaluator runs it instead of refusing it at the door."""

import threading
import time

import torch

DELAY_S = 0.02
_seen = set()


def _finish(A, H, tau):
    time.sleep(DELAY_S)
    h, t = torch.geqrf(A)
    H.copy_(h)
    tau.copy_(t)


def custom_kernel(A):
    if A.data_ptr() not in _seen:
        _seen.add(A.data_ptr())
        return torch.geqrf(A)
    H = torch.zeros_like(A)
    tau = torch.zeros(A.shape[:-1], dtype=A.dtype, device=A.device)
    threading.Thread(target=_finish, args=(A.clone(), H, tau), daemon=True).start()
    return H, tau
