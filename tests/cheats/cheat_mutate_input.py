"""Cheat (or bug): a correct answer, but the input is used as scratch space and left changed."""

import torch


def custom_kernel(A):
    H, tau = torch.geqrf(A)
    A.mul_(-3.0)
    return H, tau
