"""Fault fixture: does not parse."""

import torch


def custom_kernel(A)
    return torch.geqrf(A)
