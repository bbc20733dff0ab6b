"""Fault fixture: imports a module that does not exist."""

import torch
import qr_module_that_does_not_exist  # noqa: F401


def custom_kernel(A):
    return torch.geqrf(A)
