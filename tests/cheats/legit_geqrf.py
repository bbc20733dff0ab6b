"""Legit: the reference factorization. Must pass everywhere with no flag and no lint warning."""

import torch


def custom_kernel(A):
    return torch.geqrf(A)
