"""eval.gates: the benchmark's batched float64 re-check against the contest's own check, on CPU."""

from __future__ import annotations

import pytest
import torch

import reference
from eval import gates
from eval.gates import LEAF, fast_gates, upper_triangular_inverse
from eval.runner import CONFIRM_ABOVE


@pytest.mark.parametrize("n", [1, 7, LEAF, LEAF + 1, 3 * LEAF - 5, 4 * LEAF])
def test_upper_triangular_inverse_is_the_inverse(n, monkeypatch):
    monkeypatch.setattr(gates, "SOLVE_BELOW", 1)  # every size through the blocked inverse
    gen = torch.Generator().manual_seed(n)
    M = torch.triu(torch.randn(3, n, n, generator=gen, dtype=torch.float64))
    M.diagonal(dim1=-2, dim2=-1).copy_(1 + torch.rand(3, n, generator=gen, dtype=torch.float64))
    T = upper_triangular_inverse(M)
    assert T.shape == M.shape
    assert torch.equal(T, torch.triu(T))
    expected = torch.linalg.inv(M)
    assert torch.allclose(T, expected, rtol=1e-9, atol=1e-9 * float(expected.abs().max()))


def test_upper_triangular_inverse_keeps_extra_batch_dimensions(monkeypatch):
    monkeypatch.setattr(gates, "SOLVE_BELOW", 1)
    M = torch.eye(LEAF + 3, dtype=torch.float64).repeat(2, 3, 1, 1) * 2
    assert torch.equal(upper_triangular_inverse(M), M / 4)


@pytest.mark.parametrize("case", reference.CASES)
def test_fast_gates_agree_with_the_contest_check(case):
    for n in (1, 5, 24):
        A = reference.generate_input(4, n, 2, 9, case, device="cpu")
        H, tau = torch.geqrf(A)
        other = torch.geqrf(reference.generate_input(4, n, 2, 10, case, device="cpu"))  # a replayed output
        outputs = {"geqrf": (H, tau), "negated tau": (H, -tau),
                   "perturbed R": (H + torch.triu(torch.full_like(H, 1e-3)), tau), "replayed": other,
                   "NaN": (H.masked_fill(torch.eye(n, dtype=torch.bool), float("nan")), tau)}
        for name, (h, t) in outputs.items():
            exact = reference.check_details(A, (h, t))
            factor, orth = fast_gates(A, h, t)
            factor_margin, orth_margin = float(factor.max()), float(orth.max())
            assert (max(factor_margin, orth_margin) <= 1) == exact.ok, (case, n, name, exact.message)
            if exact.ok:  # same gates: margins agree to within float32 rounding of the contest's Q,
                # far below CONFIRM_ABOVE, above which the contest's check is asked
                assert abs(factor_margin - exact.factor_margin) < 0.1 * CONFIRM_ABOVE
                assert abs(orth_margin - exact.orth_margin) < 0.1 * CONFIRM_ABOVE

def test_fast_gates_do_not_touch_their_arguments():
    A = reference.generate_input(2, 9, 2, 3, "dense", device="cpu")
    H, tau = torch.geqrf(A)
    H64, tau64 = H.double().masked_fill(torch.eye(9, dtype=torch.bool), float("nan")), tau.double()
    before = H64.clone()
    factor, orth = fast_gates(A, H64, tau64)
    assert torch.equal(H64.isnan(), before.isnan()) and torch.equal(H64.nan_to_num(), before.nan_to_num())
    assert torch.isinf(factor).all() and torch.isinf(orth).all()


def test_fast_gates_see_a_wrong_tau_the_factor_gate_misses():
    """tau off by a relative 1e-4: R and the vectors are right, Q is not orthogonal (the d_k term)."""
    A = reference.generate_input(2, 40, 2, 4, "dense", device="cpu")
    H, tau = torch.geqrf(A)
    factor, orth = fast_gates(A, H, tau * (1 + 1e-4))
    exact = reference.check_details(A, (H, tau * (1 + 1e-4)))
    assert not exact.ok and float(orth.max()) > 1
