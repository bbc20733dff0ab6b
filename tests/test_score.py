"""The ranking numbers: geometric mean, GFLOP/s, and the score built from benchmark entries."""

import math

import pytest

from eval.report import score_entry
from eval.score import geometric_mean, gflops, qr_flops, score_seconds


def test_geometric_mean_of_known_values():
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([1.0, 10.0, 100.0]) == pytest.approx(10.0)
    assert geometric_mean([3.5]) == pytest.approx(3.5)


def test_geometric_mean_does_not_overflow_or_underflow():
    assert geometric_mean([1e300, 1e300, 1e300]) == pytest.approx(1e300)
    assert geometric_mean([1e-300] * 4) == pytest.approx(1e-300)


@pytest.mark.parametrize("values", [[], [1.0, 0.0], [2.0, -1.0], [math.inf], [math.nan]])
def test_geometric_mean_rejects_what_has_no_geometric_mean(values):
    with pytest.raises(ValueError):
        geometric_mean(values)


def test_score_is_geometric_mean_of_means_in_seconds():
    assert score_seconds([1e3, 1e5]) == pytest.approx(1e-5)  # ns → s


def test_qr_flops_and_gflops():
    assert qr_flops(1, 3) == pytest.approx(36.0)
    assert qr_flops(640, 512) == pytest.approx(640 * 4 / 3 * 512 ** 3)
    # 4/3 · 1024³ flops in 1 ms → 1431.66 GFLOP/s
    assert gflops(1, 1024, 1e6) == pytest.approx(4 / 3 * 1024 ** 3 / 1e-3 / 1e9)
    assert gflops(10, 1024, 1e6) == pytest.approx(10 * gflops(1, 1024, 1e6))
    with pytest.raises(ValueError):
        gflops(1, 8, 0.0)


def _bench(status, mean):
    stats = {"runs": 3, "mean": mean, "std": 1.0, "err": 1.0, "best": mean, "worst": mean}
    return {"status": status, "stats": stats if status == "pass" else None}


def test_score_entry_passes_only_when_everything_passed():
    tests = [{"status": "pass"}]
    score = score_entry(tests, [_bench("pass", 1e3), _bench("pass", 4e3)])
    assert score["passed"] is True
    assert score["seconds"] == pytest.approx(2e-6)
    assert score["us"] == pytest.approx(2.0)


def test_score_entry_is_null_when_a_benchmark_failed_or_none_ran():
    failed = score_entry([], [_bench("pass", 1e3), _bench("fail", 0)])
    assert failed == {"passed": False, "seconds": None, "us": None}
    only_tests = score_entry([{"status": "pass"}], [])
    assert only_tests == {"passed": True, "seconds": None, "us": None}
    assert score_entry([{"status": "timeout"}], [])["passed"] is False
    assert score_entry([{"status": "pass"}], [], complete=False)["passed"] is False
