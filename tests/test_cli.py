"""The command line through real ``python -m eval`` subprocesses: help, defaults, exit codes,
bad input, compare and profile."""

from __future__ import annotations

import json

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
