"""Fault fixture: the call faults in a different way for each matrix size n (see FAULTS) and
answers honestly for any other n, so a case after a fault shows whether a fresh child serves it.
Every process that imports this file appends its pid to ``fault_at_call.pids`` next to it, so the
test can see that none is left running."""

import os
import time
from pathlib import Path

import torch

with open(Path(__file__).with_suffix(".pids"), "a") as _pids:
    _pids.write(f"{os.getpid()}\n")


def _raise():
    raise ValueError("deliberate failure in the call")


def _exit():
    os._exit(3)


def _segfault():
    import ctypes
    ctypes.string_at(0)


def _hang():
    while True:
        time.sleep(1)


def _out_of_memory():
    torch.empty(1 << 50, dtype=torch.uint8)


def _garbage():
    return "not a tuple"


FAULTS = {8: _raise, 9: _exit, 10: _segfault, 11: _out_of_memory, 12: _garbage, 13: _hang}


def custom_kernel(A):
    fault = FAULTS.get(A.shape[-1])
    if fault is not None:
        return fault()
    return torch.geqrf(A)
