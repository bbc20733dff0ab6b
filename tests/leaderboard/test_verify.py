"""Checking a report against a spec, recomputing the score, and hiding seeds (no server needed)."""

from __future__ import annotations

import copy
import math

import pytest

from eval.leaderboard.publish import public_cases, scrub
from eval.leaderboard.verify import ReportError, check_report, spec_from_text
from eval.specs import mix_seed

SPEC_TEXT = """\
tests:
  - {batch: 1, n: 4, cond: 1, seed: 11}
benchmarks:
  - {batch: 1, n: 4, cond: 1, seed: 21}
  - {batch: 2, n: 8, cond: 0, seed: 22, case: upper}
"""


def entry(spec, mean=None, status="pass"):
    out = {"spec": spec, "status": status, "message": "ok"}
    if mean is not None:
        out["stats"] = {"runs": 10, "mean": mean, "std": 1.0, "err": 0.1, "best": mean, "worst": mean}
    return out


def make_report(spec, seed=None):
    s = spec.reseeded(seed) if seed is not None else spec
    return {"version": 1, "mode": "leaderboard", "seed": seed,
            "spec": {"path": "x.yml", "sha256": spec.sha256}, "submission": {"sha256": "0" * 64},
            "tests": [entry(c.as_dict()) for c in s.tests],
            "benchmarks": [entry(c.as_dict(), mean) for c, mean in zip(s.benchmarks, (4000.0, 9000.0))],
            "score": {"passed": True, "seconds": 1e-12, "us": 1e-6}}


@pytest.fixture
def spec():
    return spec_from_text("board.yml", SPEC_TEXT)


def test_score_is_recomputed_not_taken_from_the_report(spec):
    report = make_report(spec)
    assert math.isclose(check_report(report, spec), math.sqrt(4000.0 * 9000.0) / 1e9)


def test_a_seeded_run_is_checked_against_the_reseeded_cases(spec):
    report = make_report(spec, seed=77)
    check_report(report, spec, expected_seed=77, require_seed=True)
    with pytest.raises(ReportError, match="secret seed"):
        check_report(report, spec, expected_seed=78, require_seed=True)
    report["seed"] = None                      # claims no seed but its case seeds are mixed
    with pytest.raises(ReportError, match="missing"):
        check_report(report, spec)


@pytest.mark.parametrize("break_it, message", [
    (lambda r: r["benchmarks"].pop(), "benchmarks: 1 case"),
    (lambda r: r["tests"][0].update(status="fail"), r"tests\[0\].*did not pass"),
    (lambda r: r["tests"].append(copy.deepcopy(r["tests"][0])), "case not in the spec"),
    (lambda r: r["spec"].update(sha256="f" * 64), "spec sha256"),
    (lambda r: r.update(mode="test"), "mode 'test' cannot be ranked"),
    (lambda r: r["benchmarks"][1]["stats"].update(mean=-1.0), "stats.mean must be a positive number"),
    (lambda r: r.update(version=2), "unsupported version"),
])
def test_bad_reports_are_refused_with_their_own_message(spec, break_it, message):
    report = make_report(spec)
    break_it(report)
    with pytest.raises(ReportError, match=message):
        check_report(report, spec)


@pytest.mark.parametrize("break_it, message", [
    (lambda r: r["benchmarks"][0]["stats"].update(err="x"), r"benchmarks\[0\]: stats.err must be a number"),
    (lambda r: r["benchmarks"][0]["stats"].update(runs="<script>"), r"stats.runs must be a whole number"),
    (lambda r: r["benchmarks"][0]["stats"].update(runs=2.5), r"stats.runs must be a whole number"),
    (lambda r: r["benchmarks"][0]["stats"].update(mean=1e-320), r"stats.mean must be a positive number of ns between"),
    (lambda r: r["benchmarks"][0].update(baseline_mean="fast"), r"baseline_mean must be a finite number"),
    (lambda r: r["tests"][0].update(factor_margin=[1]), r"tests\[0\]: factor_margin must be a finite number"),
    (lambda r: r.update(device={"name": {"a": 1}}), r"device.name must be a string"),
])
def test_values_a_page_shows_are_checked(spec, break_it, message):
    report = make_report(spec)
    break_it(report)
    with pytest.raises(ReportError, match=message):
        check_report(report, spec)


@pytest.mark.parametrize("break_it, message", [
    (lambda r: r["benchmarks"][0]["stats"].update(median="x"), r"stats.median must be a number"),
    (lambda r: r["benchmarks"][0]["stats"].update(slow=11), r"stats.slow must be a whole number of repeats, at most"),
    (lambda r: r["benchmarks"][0]["stats"].update(slow=True), r"stats.slow must be a whole number"),
    (lambda r: r["benchmarks"][0]["stats"].update(slow=-1), r"stats.slow must be a whole number"),
])
def test_the_median_and_the_slow_count_are_checked_where_present(spec, break_it, message):
    report = make_report(spec)
    report["benchmarks"][0]["stats"].update(median=4000.0, slow=10)  # slow = runs: still a valid count
    check_report(report, spec)
    break_it(report)
    with pytest.raises(ReportError, match=message):
        check_report(report, spec)


def test_public_cases_hold_no_seed_and_no_text(spec):
    report = make_report(spec, seed=123457)
    report["benchmarks"][0]["message"] = f"failed on seed {mix_seed(21, 123457)}"
    report["tests"][0]["spec"]["case"] = "<script>"
    shown = public_cases(report)
    text = repr(shown)
    assert "seed" not in text and "123457" not in text and str(mix_seed(21, 123457)) not in text
    assert "failed on" not in text and "<script>" not in text
    assert [c["kind"] for c in shown] == ["test", "benchmark", "benchmark"]
    assert shown[1]["mean_ns"] == 4000.0 and shown[1]["runs"] == 10 and shown[0]["case"] == "other"


def test_scrub_hides_every_long_number_whatever_the_secret():
    assert scrub("✗ test b1 n4 c1 s106446569759635746 dense") == "✗ test b1 n4 c1 s# dense"
    assert scrub("input 1 (seed 1_064_465_697) and 1,064,465") == "input 1 (seed #) and #"
    assert scrub("n=4096 err 3.2e-02") == "n=4096 err 3.2e-02"
    assert scrub("a\x00b\nc") == "a b c" and len(scrub("x" * 500)) == 200
