"""The JSON report (version 1) from real CLI runs, and the table drawn from it."""

from __future__ import annotations

import hashlib
import json
import re
import statistics

import pytest
from rich.console import Console

from conftest import FIXTURES, run_eval
from eval.report import _stats_dict, render_report
from eval.score import gflops
from eval.specs import mix_seed
from eval import timing

TINY_SPEC = ("test_timeout: 120\nbenchmark_timeout: 120\n"
             "tests:\n  - {batch: 2, n: 8, cond: 1, seed: 3}\n  - {batch: 1, n: 7, cond: 0, seed: 4, case: mixed}\n"
             "benchmarks:\n  - {batch: 2, n: 8, cond: 1, seed: 5, case: rankdef}\n")


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def tiny_spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "tiny.yml"
    path.write_text(TINY_SPEC)
    return path


@pytest.fixture(scope="module")
def benchmark_run(tiny_spec, tmp_path_factory):
    """One real ``benchmark --baseline --json`` run of a torch.geqrf submission."""
    report_path = tmp_path_factory.mktemp("out") / "sub" / "bench.json"
    done = run_eval("benchmark", "--submission", FIXTURES / "cli_geqrf.py", "--specs", tiny_spec,
                    "--baseline", "--json", report_path, "--device", "cpu")
    assert done.returncode == 0, done.stdout + done.stderr
    return done, json.loads(report_path.read_text())


@pytest.fixture(scope="module")
def test_run(tiny_spec, tmp_path_factory):
    """One real ``test --seed 7 --json`` run of a submission that the linter has something to say about."""
    folder = tmp_path_factory.mktemp("lint")
    submission = folder / "submission_gc.py"
    submission.write_text("import gc\nimport torch\n\n\ndef custom_kernel(A):\n    return torch.geqrf(A)\n")
    report_path = folder / "test.json"
    done = run_eval("test", "--submission", submission, "--specs", tiny_spec, "--seed", 7,
                    "--json", report_path)
    assert done.returncode == 0, done.stdout + done.stderr
    return done, json.loads(report_path.read_text()), submission


def test_report_has_every_top_level_field(benchmark_run, tiny_spec):
    _, report = benchmark_run
    assert list(report) == ["version", "mode", "submission", "spec", "seed", "device", "started_at",
                            "wall_s", "warnings", "tests", "benchmarks", "score", "defences", "phases",
                            "settings"]
    assert report["version"] == 1
    assert report["mode"] == "benchmark"
    assert report["submission"] == {"path": str(FIXTURES / "cli_geqrf.py"),
                                    "sha256": sha256(FIXTURES / "cli_geqrf.py")}
    assert report["spec"] == {"path": str(tiny_spec), "sha256": sha256(tiny_spec)}
    assert report["seed"] is None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", report["started_at"])
    assert report["wall_s"] > 0
    assert report["warnings"] == []
    assert report["tests"] == []
    defences = report["defences"]
    assert 0 < defences["seconds"] < defences["timed_wall_s"] <= report["wall_s"]
    (phase,) = report["phases"]  # the contest limits the whole benchmark run: the spec's 120 s
    assert phase["mode"] == "benchmark" and phase["limit_s"] == 120 and phase["passed"] is True
    assert 0 < phase["wall_s"] <= report["wall_s"]
    assert report["settings"] == {"budget_s": 1.0, "max_repeats": 10, "max_inputs": None,
                                  "pass_budget_s": 1.0}  # a CPU run's bounds


def test_report_device_names_versions(benchmark_run):
    import torch

    device = benchmark_run[1]["device"]
    assert set(device) == {"kind", "name", "torch", "triton", "cuda"}
    assert device["kind"] == "cpu"
    assert device["torch"] == torch.__version__
    assert device["name"]
    assert device["cuda"] == torch.version.cuda


def test_benchmark_entry_has_stats_gflops_speedup_and_margins(benchmark_run):
    _, report = benchmark_run
    (entry,) = report["benchmarks"]
    assert entry["spec"] == {"batch": 2, "n": 8, "cond": 1, "seed": 5, "case": "rankdef"}
    assert entry["status"] == "pass"
    assert entry["message"]
    stats = entry["stats"]
    assert set(stats) == {"runs", "mean", "std", "err", "best", "worst", "median", "slow"}
    assert stats["runs"] >= 3
    assert 0 < stats["best"] <= stats["mean"] <= stats["worst"]
    assert entry["gflops"] == pytest.approx(gflops(2, 8, stats["mean"]))
    assert entry["baseline_mean"] > 0
    assert entry["speedup"] == pytest.approx(entry["baseline_mean"] / stats["mean"])
    assert 0 <= entry["factor_margin"] < 1 and 0 <= entry["orth_margin"] < 1
    assert entry["flags"] == []
    assert entry["late"] == {"repeats": 0, "ns_per_call": 0.0}  # nothing runs after a CPU call returns
    times = entry["times_ns"]  # every timed repeat in order: what the stats summarise
    assert len(times) == stats["runs"]
    assert min(times) == pytest.approx(stats["best"], abs=0.1) and max(times) == pytest.approx(stats["worst"], abs=0.1)
    assert sum(times) / len(times) == pytest.approx(stats["mean"], abs=0.1)  # times_ns are rounded to 0.1 ns
    assert stats["median"] == pytest.approx(statistics.median(times), abs=0.1)
    assert stats["slow"] == sum(1 for t in times if t > 1.1 * stats["median"] + 0.1)
    assert entry["wall_s"] > 0
    score = report["score"]
    assert score["passed"] is True
    assert score["seconds"] == pytest.approx(stats["mean"] / 1e9)
    assert score["us"] == pytest.approx(stats["mean"] / 1e3)


def test_terminal_shows_table_and_score(benchmark_run):
    done, report = benchmark_run
    for column in ("case", "status", "mean ± err", "median", "best", "GFLOP/s", "speed-up", "gate margin"):
        assert column in done.stdout
    assert "b2 n8 c1 s5 rankdef" in done.stdout
    assert f"({report['score']['us']:.1f} µs)" in done.stdout


def test_test_report_records_seed_mixed_cases_margins_and_lint_warnings(test_run):
    done, report, submission = test_run
    assert report["mode"] == "test"
    assert report["seed"] == 7
    assert [t["spec"]["seed"] for t in report["tests"]] == [mix_seed(3, 7), mix_seed(4, 7)]
    assert [t["status"] for t in report["tests"]] == ["pass", "pass"]
    for entry in report["tests"]:
        assert set(entry) == {"spec", "status", "message", "factor_margin", "orth_margin", "flags", "wall_s",
                              "contest"}
        assert entry["contest"] == {"status": "pass", "stricter": None}
        assert 0 <= entry["factor_margin"] < 1
    assert report["benchmarks"] == []
    assert report["score"] == {"passed": True, "seconds": None, "us": None}
    constructs = {w["construct"] for w in report["warnings"]}
    assert "gc" in constructs
    assert all(set(w) >= {"line", "construct", "text"} for w in report["warnings"])
    assert "warning: line 1: gc" in done.stdout


def _report_with(status, margin, message="ok"):
    spec = {"batch": 1, "n": 4, "cond": 0, "seed": 1, "case": "dense"}
    return {"mode": "test", "submission": {"path": "s.py"}, "device": {"name": "cpu"}, "wall_s": 1.0,
            "warnings": [], "benchmarks": [],
            "tests": [{"spec": spec, "status": status, "message": message, "factor_margin": margin,
                       "orth_margin": margin / 2, "flags": ["clock-skew"], "wall_s": 0.1}],
            "score": {"passed": status == "pass", "seconds": None, "us": None}}


def test_table_shows_gate_margin_as_percentage_and_failure_reasons():
    console = Console(record=True, width=200, color_system=None)
    render_report(_report_with("pass", 0.625), console)
    render_report(_report_with("fail", 3.0, "factor residual too large: matrix 0"), console)
    render_report(_report_with("fail", 1e30), console)
    text = console.export_text()
    assert "62.5%" in text and "300.0%" in text and ">9999%" in text
    assert "factor residual too large: matrix 0" in text
    assert "flags: clock-skew" in text
    assert "failed" in text


def test_slow_repeats_show_beside_the_median_and_under_the_table():
    times = [3.8e6] * 180 + [4.5e6] * 15 + [16e6] * 5  # n1024-like: a few stalled calls lift the mean
    stats = timing.compute_stats(times)
    report = _report_with("pass", 0.01)
    report["mode"] = "benchmark"
    report["benchmarks"] = [dict(report["tests"][0], flags=[], stats=_stats_dict(stats))]
    report["score"] = {"passed": True, "seconds": stats.mean / 1e9, "us": stats.mean / 1e3}
    console = Console(record=True, width=250, color_system=None)
    render_report(report, console)
    text = console.export_text()
    assert "(20 slow)" in text
    assert ("benchmark b1 n4 c0 s1 dense: 20 of 200 timed repeats over 1.1× the median; the mean, which the "
            "score uses, is 9.4% above the median") in text
    steady = _report_with("pass", 0.01)  # a report without the median (written before it existed) still renders
    steady["benchmarks"] = [dict(steady["tests"][0], flags=[], stats={"runs": 3, "mean": 5.0, "std": 0.0,
                                                                      "err": 0.0, "best": 5.0, "worst": 5.0})]
    console = Console(record=True, width=250, color_system=None)
    render_report(steady, console)
    assert "slow" not in console.export_text()


def test_table_shows_the_contests_verdict_where_ours_is_stricter():
    console = Console(record=True, width=250, color_system=None)
    report = _report_with("fail", 0.1, "submission modified its input (output check passed: ok)")
    report["tests"][0]["contest"] = {"status": "pass", "stricter": "input-modified: not checked by the contest"}
    report["phases"] = [{"mode": "test", "limit_s": 240, "wall_s": 3.5, "passed": False}]
    render_report(report, console)
    text = console.export_text()
    assert "stricter than the contest (input-modified: not checked by the contest); the contest's eval.py: pass" in text
    assert "test run: 3.5 s of its 240 s limit" in text
