"""GPU-only (collected where CUDA exists): the register panels' one-shuffle column (``SHUFFLE``) is exact.

A panel's column j reaches the lanes of its row by one shuffle from the lane that holds it when the panel was
loaded with 16-byte loads (n % 16 == 0, an aligned pointer), and by a sum over the row's lanes otherwise.  Both
are exact, so a panel factored either way gives the same bits (V's parts, stored through the same marks,
included); and every path of the entry that takes the shuffle (narrow and wide register panels, one or several
programs a multiprocessor, split panels), or does not (n % 16 != 0, an input 4 bytes past a 16-byte boundary),
passes the contest's checks with room to spare.
"""

from pathlib import Path

import pytest
import torch

import reference
from conftest import load_module

ROOT = Path(__file__).resolve().parents[2]
sub = load_module(ROOT / "submission.py")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("rows,tiles,nb,warps", [(16, 1, 16, 1), (128, 1, 16, 2), (256, 1, 32, 8), (512, 1, 32, 4),
                                                (1024, 1, 32, 8), (16, 6, 16, 2), (64, 7, 32, 4), (128, 6, 32, 8)])
def test_a_panel_factored_with_and_without_the_shuffle_gives_the_same_bits(rows, tiles, nb, warps):
    batch, n, k0 = 3, rows * tiles + 32, 32  # a panel below the first, as tall as its tiles (n - k0 = rows tiles)
    A = reference.generate_input(batch, n, 2, 3, "mixed", device="cuda")
    out = {}
    for shuffle in (True, False):
        H = A.clone()
        tau = torch.zeros(batch, n, device="cuda")
        T = torch.zeros(batch, nb, nb, device="cuda")
        V_parts = torch.zeros(batch, 2, n, nb, dtype=torch.bfloat16, device="cuda")
        counters = torch.zeros(1, dtype=torch.int32, device="cuda")
        sub._factor_panel[(batch,)](H, H, tau, T, V_parts, n, k0, counters, 0, ROWS=rows, TILES=tiles, NB=nb,
                                    V_WIDTH=nb, WRITE_T=True, SHUFFLE=shuffle, BF16X3=True, FLAGS=False, PDL=False,
                                    num_warps=warps)
        out[shuffle] = (H, tau, T, V_parts)
    for shuffled, summed in zip(out[True], out[False]):
        assert torch.equal(shuffled, summed)
    H, tau, T, V_parts = out[True]
    assert bool((tau[:, k0:k0 + nb] != 0).any())  # the panel was factored
    # V's parts: the panel's vectors (1 on the diagonal, 0 above) to bf16's 2⁻¹⁶, hi the nearest bf16
    V = torch.tril(H[:, k0:, k0:k0 + nb], -1) + torch.eye(n - k0, nb, device="cuda")
    hi, lo = V_parts[:, 0, :n - k0].float(), V_parts[:, 1, :n - k0].float()
    assert torch.equal(hi, V.bfloat16().float())
    assert bool(((V - hi - lo).abs() <= V.abs() * 2.0 ** -16).all())


@pytest.mark.parametrize("batch,n", [(40, 176), (40, 512), (200, 256), (60, 600), (3, 1088), (3, 1100)])
@pytest.mark.parametrize("aligned", [True, False])
def test_every_panel_path_passes_with_margins_below_a_tenth(batch, n, aligned):
    for seed, case in enumerate(("rowscale", "rankdef", "mixed")):
        A = reference.generate_input(batch, n, 2, seed, case, device="cuda")
        if not aligned:
            A = torch.empty(A.numel() + 1, device="cuda")[1:].view(A.shape).copy_(A)
            assert A.data_ptr() % 16 != 0
        r = reference.check_details(A, sub.custom_kernel(A))
        assert r.ok and r.factor_margin < 0.1 and r.orth_margin < 0.1, (case, r.message)
