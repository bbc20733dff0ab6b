"""The numbers a run is ranked by: geometric mean of benchmark times, achieved GFLOP/s."""

from __future__ import annotations

import math
from collections.abc import Iterable

NS_PER_S = 1e9


def geometric_mean(values: Iterable[float]) -> float:
    """Geometric mean of positive numbers (computed in log space, so no overflow)."""
    values = list(values)
    if not values:
        raise ValueError("geometric mean of no values")
    if any(not v > 0 or math.isinf(v) for v in values):
        raise ValueError(f"geometric mean needs positive finite values, got {values}")
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def qr_flops(batch: int, n: int) -> float:
    """Floating-point operations of a Householder QR of ``batch`` n×n matrices: 4/3·n³ each."""
    return batch * 4.0 / 3.0 * float(n) ** 3


def gflops(batch: int, n: int, mean_ns: float) -> float:
    """Achieved GFLOP/s for one call taking ``mean_ns`` nanoseconds."""
    if not mean_ns > 0:
        raise ValueError(f"mean time must be positive, got {mean_ns}")
    return qr_flops(batch, n) / (mean_ns / NS_PER_S) / 1e9


def score_seconds(means_ns: Iterable[float]) -> float:
    """The contest's score: geometric mean of the benchmark means, in seconds."""
    return geometric_mean(m / NS_PER_S for m in means_ns)
