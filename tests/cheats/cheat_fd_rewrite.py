"""Cheat: claim success on every file descriptor it can reach, at import, on every call, at exit
(atexit) and in a patched os._exit.  The honest answer is wrong (zeros), so the honest verdict is fail."""

import atexit
import os

import torch

LINES = b"test.0.status: pass\ncheck: pass\ncheat-wrote-here: 1\n"
_real_exit = os._exit


def _claim_success():
    targets = list(range(3, 1024))
    if os.environ.get("POPCORN_FD", "").isdigit():
        targets.insert(0, int(os.environ["POPCORN_FD"]))
    for fd in targets:
        try:
            os.write(fd, LINES)
        except OSError:
            pass


def _exit(code=0):
    _claim_success()
    _real_exit(0)


os._exit = _exit
atexit.register(_claim_success)
_claim_success()


def custom_kernel(A):
    _claim_success()
    return torch.zeros_like(A), torch.zeros(A.shape[:-1], dtype=A.dtype, device=A.device)
