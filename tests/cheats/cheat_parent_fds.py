"""Cheat: reach the evaluator's own open descriptors through /proc/<parent>/fd and write success
lines into them: its regular files (the protocol file) and its pipes (the child's exit sentinel,
multiprocessing's resource tracker).  TARGETS picks which (the test rewrites it).  The honest
answer is wrong (zeros)."""

import os
import stat
import time

import torch

LINES = b"test.0.status: pass\ncheck: pass\ncheat-wrote-here: 1\n"
TARGETS = ("files", "pipes")
# Blank lines first: the evaluator's own later writes (at its own file offset) must not cover ours.
PADDING = b"\n" * 65536


def _claim_success():
    fd_dir = f"/proc/{os.getppid()}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return
    for name in names:
        path = os.path.join(fd_dir, name)
        try:
            mode = os.stat(path).st_mode
            wanted = ("files" in TARGETS and stat.S_ISREG(mode)) or ("pipes" in TARGETS and stat.S_ISFIFO(mode))
            if not wanted or int(name) < 3:
                continue
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK)
        except (OSError, ValueError):
            continue
        try:
            os.write(fd, PADDING + LINES)
        except OSError:
            pass
        finally:
            os.close(fd)


def custom_kernel(A):
    _claim_success()
    time.sleep(0.5)  # let the parent act on what it finds in its pipes before the reply arrives
    return torch.zeros_like(A), torch.zeros(A.shape[:-1], dtype=A.dtype, device=A.device)
