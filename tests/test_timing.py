"""The timing helpers: statistics, the stop rule, the clock-skew test, L2 flush sizing, bound clocks."""

import math
import time

import pytest
import torch

from eval import timing


def test_stats_of_known_durations():
    stats = timing.compute_stats([1.0, 2.0, 3.0, 4.0])
    assert stats.runs == 4
    assert stats.mean == 2.5
    assert stats.std == pytest.approx(math.sqrt(5 / 3))  # sample standard deviation
    assert stats.err == pytest.approx(math.sqrt(5 / 3) / 2)
    assert (stats.best, stats.worst) == (1.0, 4.0)
    assert stats.median == 2.5
    assert stats.slow == 2  # 3 and 4 are over 1.1 x 2.5


def test_slow_repeats_are_counted_against_the_median():
    stats = timing.compute_stats([100.0] * 9 + [110.0, 111.0, 400.0])
    assert stats.median == 100.0
    assert stats.slow == 2  # 110 is exactly 1.1 x the median: not slow
    assert stats.mean > 1.2 * stats.median  # one slow repeat in twelve moves the mean, not the median


def test_stats_of_one_duration_have_no_spread():
    s = timing.compute_stats([7.0])
    assert (s.runs, s.mean, s.std, s.err, s.best, s.worst, s.median, s.slow) == (1, 7.0, 0.0, 0.0, 7.0, 7.0, 7.0, 0)


def test_stats_need_durations():
    with pytest.raises(ValueError, match="no durations"):
        timing.compute_stats([])


def test_stop_rule_waits_for_three_repeats_and_a_tenth_of_a_second():
    steady = [1000.0, 1000.0]
    assert not timing.should_stop(steady, elapsed_s=50.0, budget_s=10, max_repeats=200)
    assert not timing.should_stop(steady * 2, elapsed_s=0.05, budget_s=10, max_repeats=200)
    assert timing.should_stop(steady * 2, elapsed_s=0.2, budget_s=10, max_repeats=200)  # err = 0


def test_stop_rule_keeps_going_while_noisy_and_cheap():
    noisy = [1000.0, 3000.0, 1000.0, 3000.0]
    assert not timing.should_stop(noisy, elapsed_s=1.0, budget_s=10, max_repeats=200)


def test_stop_rule_stops_at_budget_time_limit_and_max_repeats():
    noisy = [1e9, 3e9, 1e9, 3e9]  # 2 s per call on average: 8 s measured
    assert not timing.should_stop(noisy, elapsed_s=9.0, budget_s=10, max_repeats=200)
    assert timing.should_stop(noisy, elapsed_s=9.0, budget_s=7, max_repeats=200)
    cheap_noisy = [1000.0, 3000.0, 1000.0, 3000.0]
    assert timing.should_stop(cheap_noisy, elapsed_s=121.0, budget_s=10, max_repeats=200)
    assert timing.should_stop(cheap_noisy, elapsed_s=0.0, budget_s=10, max_repeats=4)
    assert timing.should_stop([5.0], elapsed_s=0.0, budget_s=10, max_repeats=1)


def test_clock_skew_only_for_a_large_gap():
    assert not timing.is_clock_skew(event_ns=9e6, host_ns=10e6)  # honest: close to host time
    assert not timing.is_clock_skew(event_ns=20e3, host_ns=60e3)  # tiny case: launch latency only
    assert timing.is_clock_skew(event_ns=1e6, host_ns=10e6)  # work hidden from the events


def test_l2_flush_is_twice_the_cache():
    assert timing.l2_flush_bytes(50 * 2 ** 20) == 100 * 2 ** 20
    assert timing.l2_flush_bytes(None) == 2 * timing.L2_FALLBACK_BYTES
    assert timing.l2_flush_bytes(0) == 2 * timing.L2_FALLBACK_BYTES


def test_no_l2_fill_on_cpu():
    fill = timing.make_l2_fill(torch.device("cpu"))
    assert fill() is None  # a no-op, not an error


def test_bound_clock_survives_a_patched_perf_counter(monkeypatch):
    clocks = timing.bind_clocks(cuda=False)
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    first = clocks.perf_counter()
    time.sleep(0.01)
    assert clocks.perf_counter() - first >= 0.009
    assert time.perf_counter() == 0.0  # the patch is in place, the bound clock ignores it


def test_parent_round_trip_cross_check():
    assert not timing.is_implausibly_fast(reported_ns=3e6, round_trip_ns=9e6)  # small case, busy host
    assert not timing.is_implausibly_fast(reported_ns=900e6, round_trip_ns=1000e6)  # honest
    assert timing.is_implausibly_fast(reported_ns=1e3, round_trip_ns=1000e6)  # reported ≪ taken


def test_cpu_time_bound():
    ms = 1e6
    assert not timing.cpu_time_exceeds_clock(cpu_ns=25 * ms, reported_ns=10 * ms, repeats=10, cores=2)
    assert not timing.cpu_time_exceeds_clock(cpu_ns=170 * ms, reported_ns=10 * ms, repeats=1, cores=16)
    assert timing.cpu_time_exceeds_clock(cpu_ns=140 * ms, reported_ns=10 * ms, repeats=10, cores=2)
