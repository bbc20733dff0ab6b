"""The command line through real ``python -m eval`` subprocesses: help, defaults, exit codes,
bad input, compare and profile."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import FIXTURES, REPO_ROOT, clean_env, run_eval

COMMANDS = ["test", "benchmark", "leaderboard", "profile", "compare"]


def tiny_spec(tmp_path, *, test_timeout=120, tests=("{batch: 2, n: 8, cond: 1, seed: 3}",),
              benchmarks=("{batch: 2, n: 8, cond: 1, seed: 5}",)):
    path = tmp_path / "tiny.yml"
    path.write_text(f"test_timeout: {test_timeout}\nbenchmark_timeout: 120\n"
                    "tests:\n" + "".join(f"  - {t}\n" for t in tests) +
                    "benchmarks:\n" + "".join(f"  - {b}\n" for b in benchmarks))
    return path


def test_main_help_lists_every_command_and_the_exit_codes():
    done = run_eval("--help")
    assert done.returncode == 0
    for command in COMMANDS:
        assert command in done.stdout
    assert "113" in done.stdout and "114" in done.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    done = run_eval(command, "--help")
    assert done.returncode == 0, done.stderr
    assert f"Usage: python -m eval {command}" in done.stdout
    if command != "compare":
        for option in ("--submission", "--specs", "--seed", "--json", "--baseline", "--device",
                       "--popcorn-fd", "CASESFILE"):
            assert option in done.stdout, option


def test_defaults_run_the_cpu_spec_and_pass_with_geqrf(tmp_path):
    """No --specs on a CPU machine: specs/cpu.yml (every case kind); torch.geqrf passes it all."""
    report_path = tmp_path / "r.json"
    done = run_eval("test", "--submission", FIXTURES / "cli_geqrf.py", "--json", report_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    assert report["spec"]["path"] == str(REPO_ROOT / "specs" / "cpu.yml")
    assert len(report["tests"]) == 12
    assert all(t["status"] == "pass" for t in report["tests"])


def test_wrong_tau_exits_112_with_the_reason(tmp_path):
    spec = tiny_spec(tmp_path)
    done = run_eval("test", "--submission", FIXTURES / "cli_wrong_tau.py", "--specs", spec)
    assert done.returncode == 112
    assert "fail" in done.stdout
    assert "factor residual too large" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_hang_past_the_timeout_exits_114(tmp_path):
    spec = tiny_spec(tmp_path, test_timeout=3)
    done = run_eval("test", "--submission", FIXTURES / "cli_sleep.py", "--specs", spec, timeout=120)
    assert done.returncode == 114, done.stdout + done.stderr
    assert "timeout" in done.stdout


@pytest.mark.parametrize("args,env,expected", [
    (["--submission", "no_such_submission.py"], {}, "--submission: no such file: no_such_submission.py"),
    (["--device", "cuda"], {}, "--device cuda: no CUDA device is available here"),
    (["--device", "tpu"], {}, "'tpu' is not one of"),
    (["--seed", "abc"], {}, "'abc' is not a valid integer"),
    ([], {"POPCORN_SEED": "x1"}, "POPCORN_SEED='x1' is not an integer"),
    (["--specs", "specs/cpu.yml", "specs/cpu.yml"], {}, "either as an argument or as --specs"),
], ids=["missing-submission", "no-cuda", "bad-device", "bad-seed", "bad-env-seed", "two-specs"])
def test_bad_options_give_one_clear_error_line(args, env, expected):
    if "--submission" not in args:
        args = [*args, "--submission", FIXTURES / "cli_geqrf.py"]
    done = run_eval("test", *args, env=clean_env(**env), timeout=60)
    assert done.returncode == 2
    assert expected in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_compare_alternates_submissions_and_reports_scores_and_ratios(tmp_path):
    spec = tiny_spec(tmp_path)
    report_path = tmp_path / "compare.json"
    done = run_eval("compare", FIXTURES / "cli_geqrf.py", FIXTURES / "cli_wrong_tau.py",
                    "--specs", spec, "--json", report_path)
    assert done.returncode == 112, done.stdout + done.stderr
    geqrf, wrong = str(FIXTURES / "cli_geqrf.py"), str(FIXTURES / "cli_wrong_tau.py")
    assert f"{wrong}: score — (a benchmark failed)" in done.stdout
    summary = json.loads(report_path.read_text())
    assert summary["mode"] == "compare"
    first, second = summary["submissions"]
    assert first["path"] == geqrf and first["score"]["seconds"] > 0
    stats = first["benchmarks"][0]["stats"]  # the median and the slow repeats, as in a benchmark report
    assert stats["slow"] == sum(1 for t in first["benchmarks"][0]["times_ns"] if t > 1.1 * stats["median"] + 0.1)
    assert (f"({stats['slow']} slow)" in done.stdout) == (stats["slow"] > 0)
    assert f"{geqrf}: score {first['score']['seconds']:.6g} s" in done.stdout
    assert "1.000× the time of" in done.stdout
    assert second["score"]["seconds"] is None
    assert [b["status"] for b in second["benchmarks"]] == ["fail"]


def test_compare_needs_at_least_one_submission():
    done = run_eval("compare")
    assert done.returncode == 2
    assert "Missing argument" in done.stderr


def test_profile_saves_a_trace(tmp_path):
    spec = tiny_spec(tmp_path)
    trace = tmp_path / "trace.json"
    done = run_eval("profile", "--submission", FIXTURES / "cli_geqrf.py", "--specs", spec,
                    "--trace", trace)
    assert done.returncode == 0, done.stdout + done.stderr
    assert trace.stat().st_size > 0
    assert f"trace: {trace}" in done.stdout


# ---- the contest's limits, loops and ranked run ---------------------------------------------

def write_submission(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("import time\nimport torch\n\n" + body)
    return path


def test_the_mode_limit_covers_the_whole_run_import_included(tmp_path):
    """The contest limits a whole run of a mode; the import and the calls take 1.5 s each, so a run of 8
    cases passes the 7 s test limit and times out as the contest's would. (The child's own start, torch's
    import, takes 1-2 s on a CPU machine: the first case still passes within the limit.)"""
    submission = write_submission(tmp_path, "slowish.py", "time.sleep(1.5)\n\n\ndef custom_kernel(A):\n"
                                                          "    time.sleep(1.5)\n    return torch.geqrf(A)\n")
    spec = tiny_spec(tmp_path, test_timeout=7, tests=[f"{{batch: 1, n: 4, cond: 0, seed: {s}}}" for s in range(8)])
    report_path = tmp_path / "r.json"
    done = run_eval("test", "--submission", submission, "--specs", spec, "--json", report_path, timeout=120)
    assert done.returncode == 114, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    statuses = [t["status"] for t in report["tests"]]
    assert statuses[:1] == ["pass"] and statuses[-1] == "timeout", statuses
    assert "not run: the run's 7 s limit (import included) was used up" in report["tests"][-1]["message"]
    (phase,) = report["phases"]
    assert phase["mode"] == "test" and phase["limit_s"] == 7 and phase["passed"] is False
    assert "test run:" in done.stdout and "of its 7 s limit" in done.stdout


def test_max_repeats_and_budget_bound_the_timed_loops_in_benchmark_and_leaderboard(tmp_path):
    spec = tiny_spec(tmp_path)
    slow = write_submission(tmp_path, "slow.py", "def custom_kernel(A):\n    time.sleep(0.05)\n"
                                                 "    return torch.geqrf(A)\n")
    # The contest's stop rule: past 2 repeats and 0.1 s, stop once mean x runs exceeds the budget.
    for mode, submission, args, runs in (
            ("benchmark", FIXTURES / "cli_geqrf.py", ["--max-repeats", "4"], {4}),
            ("leaderboard", FIXTURES / "cli_geqrf.py", ["--max-repeats", "5"], {5}),
            ("leaderboard", slow, ["--budget", "0.01", "--max-repeats", "50"], {3})):
        report_path = tmp_path / f"{mode}.json"
        done = run_eval(mode, "--submission", submission, "--specs", spec, "--json", report_path, *args)
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads(report_path.read_text())
        assert {b["stats"]["runs"] for b in report["benchmarks"]} == runs, (mode, args)


def test_leaderboard_with_a_task_file_is_the_ranked_run_test_benchmark_leaderboard(tmp_path):
    spec = tiny_spec(tmp_path)
    report_path = tmp_path / "r.json"
    done = run_eval("leaderboard", "--submission", FIXTURES / "cli_geqrf.py", "--specs", spec, "--json", report_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    assert [(p["mode"], p["limit_s"], p["passed"]) for p in report["phases"]] == [
        ("test", 120, True), ("benchmark", 120, True), ("leaderboard", 900, True)]
    assert len(report["tests"]) == 1 and len(report["benchmarks"]) == 1
    # a failed test run stops the ranked run there
    done = run_eval("leaderboard", "--submission", FIXTURES / "cli_wrong_tau.py", "--specs", spec,
                    "--json", report_path)
    assert done.returncode == 112
    report = json.loads(report_path.read_text())
    assert [p["mode"] for p in report["phases"]] == ["test"] and report["benchmarks"] == []


def test_off_a_terminal_each_case_prints_a_line_as_it_finishes(tmp_path):
    """Output is a pipe here: the first case's line must arrive while the second case still runs."""
    submission = write_submission(tmp_path, "second_is_slow.py", "def custom_kernel(A):\n"
                                  "    if A.shape[-1] == 9:\n        time.sleep(20)\n    return torch.geqrf(A)\n")
    spec = tiny_spec(tmp_path, tests=("{batch: 2, n: 8, cond: 1, seed: 3}", "{batch: 2, n: 9, cond: 1, seed: 3}"))
    process = subprocess.Popen([sys.executable, "-m", "eval", "test", "--submission", str(submission),
                                "--specs", str(spec)], cwd=REPO_ROOT, env=clean_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        first = process.stdout.readline()
        still_running = process.poll() is None
    finally:
        process.kill()
        process.wait()
    assert first.startswith("pass    test  b2 n8 c1 s3 dense"), first
    assert still_running


def test_loop_bounds_the_contests_cpu_and_quick():
    from eval.cli import loop_bounds

    def bounds(mode, device, **given):
        options = {"budget": None, "max_repeats": None, "max_inputs": None, "quick": False, **given}
        return tuple(loop_bounds(mode, device, **options).as_dict().values())

    assert bounds("benchmark", "cuda") == (10.0, 200, None, None)
    assert bounds("leaderboard", "cuda") == (30.0, 1000, None, None)
    assert bounds("benchmark", "cuda", quick=True) == (1.0, 20, None, None)
    assert bounds("leaderboard", "cpu") == (1.0, 10, None, 1.0)
    assert bounds("leaderboard", "cuda", budget=2.0, max_repeats=7, max_inputs=3) == (2.0, 7, 3, None)
