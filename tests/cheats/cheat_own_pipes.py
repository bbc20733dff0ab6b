"""Cheat: write into every pipe the child itself holds (multiprocessing's exit sentinel among them:
the parent's end becomes readable as if the child had died), then wait before replying.  An evaluator
that trusts the sentinel and then waits for the child's exit blocks forever.  The answer is zeros."""

import os
import stat
import time

import torch


def _write_to_own_pipes():
    for fd in range(3, 1024):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, b"check: pass\n")
        except OSError:
            pass


def custom_kernel(A):
    _write_to_own_pipes()
    time.sleep(0.5)  # let the parent act on the sentinel before the reply arrives
    return torch.zeros_like(A), torch.zeros(A.shape[:-1], dtype=A.dtype, device=A.device)
