"""GPU-only (collected where CUDA exists): the entry's prepared call paths give the plain path's numbers.

On a GPU, ``custom_kernel`` keeps one prepared chain per (batch, n, device, alignment of A): a graph replay
(``_GraphedQR``) or launches made straight from the recorded compiled kernels (``_DirectQR``).  Each is checked
against the same kernels launched through Triton's own path (``_factor``), on several inputs of one shape, on an
input whose data is not 16-byte aligned, and for a fresh output every call with the input left untouched.
"""

import importlib.util
from pathlib import Path

import pytest
import torch

import reference

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("submission_gpu", ROOT / "submission.py")
sub = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sub)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

# (batch, n, the prepared path): one launch; a latency-bound chain; a large input launched directly; split panels.
SHAPES = [(20, 32, "_DirectQR"), (40, 176, "_GraphedQR"), (30, 600, "_DirectQR"), (2, 1100, "_GraphedQR")]


def _plain(A):
    H, tau = sub._outputs(A)
    sub._factor(A, H, tau)
    return H, tau


@pytest.mark.parametrize("batch,n,path", SHAPES)
def test_prepared_path_matches_the_plain_launches(batch, n, path):
    for seed in (1, 2, 3):  # the first call prepares, the later ones replay
        A = reference.generate_input(batch, n, 2, seed, "mixed", device="cuda")
        before = A.clone()
        H, tau = sub.custom_kernel(A)
        H_plain, tau_plain = _plain(A)
        assert torch.equal(A, before)
        assert reference.check_implementation(A, (H, tau))[0]
        if n <= sub.MAX_REGISTER_PANEL_ROWS:  # (split panels add their partial sums atomically, in any order)
            assert torch.equal(H, H_plain) and torch.equal(tau, tau_plain)
    key = (batch, n, A.device, True)
    assert type(sub._prepared[key]).__name__ == path
    H2, _ = sub.custom_kernel(A)
    assert H2.data_ptr() != H.data_ptr()


@pytest.mark.parametrize("batch,n,path", SHAPES[:3])
def test_unaligned_input_gets_its_own_chain(batch, n, path):
    storage = torch.empty(batch * n * n + 1, dtype=torch.float32, device="cuda")
    A = storage[1:].view(batch, n, n)  # 4 bytes past a 16-byte boundary
    A.copy_(reference.generate_input(batch, n, 2, 5, "dense", device="cuda"))
    assert A.data_ptr() % 16 != 0
    out = sub.custom_kernel(A)
    assert reference.check_implementation(A, out)[0]
    assert (batch, n, A.device, False) in sub._prepared
