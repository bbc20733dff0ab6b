"""Both gates of many outputs at once, in float64 matrix products only: the benchmark's re-check.

``reference.check_details`` is the contest's check, one matrix at a time (``householder_product`` forms Q in
float32, matrix by matrix on CUDA). A benchmark re-checks every timed output, so here the same two ratios
come from batched float64 products, for the Q that ``(H, tau)`` stands for:

    Q = H_0 … H_{n-1} = I − V T Vᵀ,   T⁻¹ = striu(VᵀV) + diag(1/τ)          (compact WY)

with V the unit lower triangular matrix of the stored vectors (a reflector with τ = 0 is the identity: its
column of V is zeroed and its 1/τ set to 1, which leaves T⁻¹ invertible and the product unchanged). With
W = T Vᵀ:

    QᵀA = A − Wᵀ (Vᵀ A)                    the factor gate's residual is triu(H) − QᵀA
    QᵀQ − I = Wᵀ diag(d) W,  d_k = ‖v_k‖² − 2/τ_k    (exactly: G − T⁻ᵀ − T⁻¹ = diag(d))

so the orthogonality residual comes without the cancellation of forming QᵀQ and subtracting I.

T is the inverse of an upper triangular matrix, built bottom-up from its diagonal blocks:
inv([[M11, M12], [0, M22]]) = [[T11, −T11 M12 T22], [0, T22]]; the leaves are small triangular solves, every
level above them is two batched products (a T smaller than SOLVE_BELOW is one triangular solve, cheaper
there). Everything else is a batched product, at the float64 rate of the tensor cores on a Hopper GPU; the
whole re-check is about 10 n³ flops per matrix.
"""

from __future__ import annotations

import math

import torch

import reference

LEAF = 64  # diagonal blocks of T inverted by a triangular solve; larger blocks by products
SOLVE_BELOW = 512  # a smaller T is one triangular solve (its padding and levels would cost more)


def upper_triangular_inverse(M: torch.Tensor) -> torch.Tensor:
    """The inverse of each upper triangular matrix in ``M`` ``[..., n, n]`` (diagonal nonzero)."""
    n = M.shape[-1]
    if n < SOLVE_BELOW:
        eye = torch.eye(n, dtype=M.dtype, device=M.device)
        return torch.linalg.solve_triangular(M, eye.expand_as(M), upper=True)
    leaves = math.ceil(n / LEAF)
    p = LEAF * 2 ** math.ceil(math.log2(leaves))  # padded with the identity: inv(diag(M, I)) = diag(T, I)
    batch = M.shape[:-2]
    P = torch.eye(p, dtype=M.dtype, device=M.device).repeat(*batch, 1, 1).reshape(-1, p, p)
    P[:, :n, :n] = M.reshape(-1, n, n)
    T = torch.zeros_like(P)
    B = P.shape[0]

    def blocks(X, size, row, col):
        """View of the diagonal-pair blocks of X: block (row, col) of each 2·size × 2·size diagonal block."""
        return X.as_strided((B, p // (2 * size), size, size), (p * p, 2 * size * (p + 1), p, 1),
                            X.storage_offset() + row * size * p + col * size)

    leaf = torch.eye(LEAF, dtype=M.dtype, device=M.device)
    diagonal = P.as_strided((B, p // LEAF, LEAF, LEAF), (p * p, LEAF * (p + 1), p, 1))
    T.as_strided(diagonal.shape, diagonal.stride()).copy_(
        torch.linalg.solve_triangular(diagonal, leaf.expand_as(diagonal), upper=True))
    size = LEAF
    while size < p:
        T12 = -(blocks(T, size, 0, 0) @ blocks(P, size, 0, 1)) @ blocks(T, size, 1, 1)
        blocks(T, size, 0, 1).copy_(T12)
        size *= 2
    return T[:, :n, :n].reshape(*batch, n, n)


def fast_gates(A: torch.Tensor, H: torch.Tensor, tau: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per matrix of ``A``, ``H`` ``[count, n, n]`` and ``tau`` ``[count, n]``, both gates' ratios
    (residual / allowed; at most 1 passes), fast on a GPU.

    The contest forms Q in float32 (``householder_product``); its ratios differ from these by that
    product's rounding, far below the gates, so a caller re-checks a ratio near a gate with
    ``reference.check_details`` before any verdict (``eval.runner``'s ``CONFIRM_ABOVE``). A matrix whose
    output is not finite gets ratio inf.
    """
    n = A.shape[-1]
    H64, tau64 = H.to(torch.float64, copy=True), tau.to(torch.float64, copy=True)
    finite = torch.isfinite(H64).flatten(1).all(1) & torch.isfinite(tau64).all(1)
    H64 = torch.nan_to_num_(H64, nan=0.0, posinf=0.0, neginf=0.0)
    tau64 = torch.nan_to_num_(tau64, nan=0.0, posinf=0.0, neginf=0.0)
    active = tau64 != 0
    inv_tau = torch.where(active, 1 / torch.where(active, tau64, 1.0), 1.0)
    V = torch.tril(H64, -1)
    V.diagonal(dim1=-2, dim2=-1).fill_(1.0)
    V.mul_(active.unsqueeze(-2))
    G = V.mT @ V
    d = torch.where(active, torch.diagonal(G, dim1=-2, dim2=-1) - 2 * inv_tau, 0.0)
    M = torch.triu(G, 1)
    M.diagonal(dim1=-2, dim2=-1).copy_(inv_tau)
    del G
    W = upper_triangular_inverse(M) @ V.mT
    del M
    A64 = A.double()
    allowed = (reference.FACTOR_RTOL * reference.EPS32 * n * reference.norm1(A64)).clamp(
        min=torch.finfo(torch.float64).tiny)
    X = V.mT @ A64
    del V
    # triu(H) − QᵀA = (triu(H) − A) + Wᵀ (Vᵀ A)
    diff = torch.baddbmm(torch.triu(H64) - A64, W.mT, X)
    del X, A64, H64
    factor_res = reference.norm1(diff)
    del diff
    factor = torch.where(factor_res == 0, 0.0, factor_res / allowed)
    orth = reference.norm1(W.mT @ (d.unsqueeze(-1) * W)) / (reference.ORTH_RTOL * reference.EPS32 * n)
    inf = torch.tensor(math.inf, dtype=torch.float64, device=A.device)
    return (torch.where(finite, factor, inf).nan_to_num(nan=math.inf, posinf=math.inf),
            torch.where(finite, orth, inf).nan_to_num(nan=math.inf, posinf=math.inf))
