"""GPU-only (collected where CUDA exists): split panels with many slices, on small inputs.

A panel taller than ``max_register_rows`` is split in slices of rows over several programs of each launch, which
add up each reflector's folded sums in global memory (``_reflect_split_panel``).  The CPU tests reach that path at
small n too, but only the GPU runs a launch's programs at once; here the slices are many (up to 35 a matrix), the
batch fills more programs than the GPU has multiprocessors, n is not a multiple of 16 (no shuffles), and a
prepared chain's buffers (its sums must start cleared) serve three calls of ``custom_kernel`` in a row.  Every
output must pass the checker.
"""

from pathlib import Path

import pytest
import torch

import reference
from conftest import load_module

ROOT = Path(__file__).resolve().parents[2]
sub = load_module(ROOT / "submission.py")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.parametrize("batch,n,width,max_rows,case", [
    (1, 300, 32, 64, "dense"),  # slices of 32 rows (the entry's, under max_rows): up to 10 programs a matrix
    (40, 300, 32, 64, "rowscale"),  # 40 x 10 programs, more than the multiprocessors
    (3, 130, 16, 16, "nearrank"),  # slices of 16 rows, up to 9 programs a matrix
    (2, 1100, 32, 1024, "mixed"),  # the entry's limit: panels of 1100 to 1036 rows in 35 slices of 32
])
def test_split_panels_pass_the_check(batch, n, width, max_rows, case):
    for seed in (1, 2, 3):
        A = reference.generate_input(batch, n, 2, seed, case, device="cuda")
        H, tau = sub.qr_blocked(A, panel_width=width, max_register_rows=max_rows)
        ok, message = reference.check_implementation(A, (H, tau))
        assert ok, f"seed {seed}: {message}"


def test_tall_input_through_custom_kernel():
    A = reference.generate_input(3, 2100, 2, 4, "mixed", device="cuda")
    for _ in range(3):  # prepared (a graph, whose sums buffer each replay must find cleared), then replayed
        ok, message = reference.check_implementation(A, sub.custom_kernel(A))
        assert ok, message
