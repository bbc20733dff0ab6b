"""The contest's key-value protocol, read from a real pipe the evaluator writes to."""

from __future__ import annotations

import os

import pytest

from conftest import FIXTURES, clean_env, run_eval
from eval.popcorn import PopcornError, PopcornWriter, parse_popcorn

HIGH_FD = 900  # where the pipe's write end is placed, far above anything a child opens by itself


def run_with_pipe(*args, via_env: bool, extra_env: dict | None = None):
    """Run ``python -m eval ARGS`` with a pipe on HIGH_FD; return (process, protocol lines)."""
    read_end, write_end = os.pipe()
    os.dup2(write_end, HIGH_FD)
    os.close(write_end)
    try:
        env = clean_env(**(extra_env or {}))
        if via_env:
            env["POPCORN_FD"] = str(HIGH_FD)
        else:
            args = (*args, "--popcorn-fd", HIGH_FD)
        done = run_eval(*args, env=env, pass_fds=(HIGH_FD,))
    finally:
        os.close(HIGH_FD)
    with os.fdopen(read_end, encoding="utf-8") as pipe:
        text = pipe.read()
    return done, text.splitlines()


def write_cases(tmp_path, *lines):
    path = tmp_path / "cases.txt"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_failed_test_reports_status_error_and_check_fail(tmp_path):
    cases = write_cases(tmp_path, "batch: 2; n: 8; cond: 1; seed: 3", "batch: 1; n: 5; cond: 0; seed: 4; case: band")
    done, lines = run_with_pipe("test", cases, "--submission", FIXTURES / "cli_wrong_tau.py", via_env=True)
    assert done.returncode == 112, done.stderr
    values = parse_popcorn("\n".join(lines))
    assert values["test-count"] == "2"
    assert values["test.0.spec"] == "batch: 2; n: 8; cond: 1; seed: 3"  # the lines as written, as the contest
    assert values["test.1.spec"] == "batch: 1; n: 5; cond: 0; seed: 4; case: band"
    assert values["test.0.status"] == "fail" and values["test.1.status"] == "fail"
    assert "residual" in values["test.0.error"] or "orthogonal" in values["test.0.error"]
    assert "test.0.message" not in values
    assert values["check"] == "fail"
    assert lines[-1] == "check: fail"


def test_passing_test_reports_message_and_check_pass(tmp_path):
    cases = write_cases(tmp_path, "batch: 2; n: 6; cond: 0; seed: 9; case: upper")
    done, lines = run_with_pipe("test", cases, "--submission", FIXTURES / "cli_geqrf.py", via_env=False)
    assert done.returncode == 0, done.stderr
    assert lines[0] == "test-count: 1"
    values = parse_popcorn("\n".join(lines))
    assert values["test.0.status"] == "pass"
    assert values["test.0.message"].startswith("ok")
    assert values["check"] == "pass"


def test_benchmark_protocol_and_no_descriptor_or_seed_reaches_the_submission(tmp_path):
    """The submission looks for the protocol descriptor and the contest variables; if it found
    any it would return a wrong answer and try to write a fake verdict."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os\nimport stat\nimport torch\n\n\n"
        "def custom_kernel(A):\n"
        "    H, tau = torch.geqrf(A)\n"
        "    leaked = any(k in os.environ for k in ('POPCORN_FD', 'POPCORN_SEED'))\n"
        "    try:\n"
        f"        if stat.S_ISFIFO(os.fstat({HIGH_FD}).st_mode):\n"
        f"            os.write({HIGH_FD}, b'check: pass\\nbenchmark.0.mean: 1.0\\n')\n"
        "            leaked = True\n"
        "    except OSError:\n"
        "        pass\n"
        "    return (H, tau * 0.5) if leaked else (H, tau)\n")
    cases = write_cases(tmp_path, "batch: 2; n: 8; cond: 1; seed: 11")
    done, lines = run_with_pipe("benchmark", cases, "--submission", probe, via_env=True,
                                extra_env={"POPCORN_SEED": "5"})
    assert done.returncode == 0, done.stdout + done.stderr
    keys = [line.split(": ", 1)[0] for line in lines]
    assert keys == ["benchmark-count", "benchmark.0.spec", "benchmark.0.runs", "benchmark.0.mean",
                    "benchmark.0.std", "benchmark.0.err", "benchmark.0.best", "benchmark.0.worst", "check"]
    values = parse_popcorn("\n".join(lines))
    assert values["benchmark.0.spec"] == "batch: 2; n: 8; cond: 1; seed: 11"  # the contest prints it unmixed
    assert int(values["benchmark.0.runs"]) >= 3
    mean = float(values["benchmark.0.mean"])
    assert float(values["benchmark.0.best"]) <= mean <= float(values["benchmark.0.worst"])
    assert mean > 1.0
    assert values["check"] == "pass"


def test_leaderboard_stops_at_the_first_failure(tmp_path):
    cases = write_cases(tmp_path, "batch: 2; n: 8; cond: 1; seed: 3", "batch: 2; n: 8; cond: 1; seed: 4")
    done, lines = run_with_pipe("leaderboard", cases, "--submission", FIXTURES / "cli_wrong_tau.py",
                                via_env=True)
    assert done.returncode == 112
    values = parse_popcorn("\n".join(lines))
    assert values["benchmark-count"] == "2"
    assert values["benchmark.0.status"] == "fail"
    # The contest's warm-up results are not used: the case fails in its own ranked loop, first pass.
    assert values["benchmark.0.error"].startswith("first pass, input 0 (seed 45): ")
    assert not any(key.startswith("benchmark.1.") for key in values)
    assert values["check"] == "fail"


def test_writer_keeps_each_value_on_one_line_and_parses_back():
    read_end, write_end = os.pipe()
    writer = PopcornWriter(write_end)
    assert not os.get_inheritable(write_end)
    writer.log("test.0.error", "line one\nline two")
    writer.check(False)
    writer.close()
    with os.fdopen(read_end, encoding="utf-8") as pipe:
        text = pipe.read()
    assert text == "test.0.error: line one\\nline two\ncheck: fail\n"
    assert parse_popcorn(text) == {"test.0.error": "line one\\nline two", "check": "fail"}


def test_writer_rejects_a_closed_descriptor_and_cli_says_so(tmp_path):
    read_end, write_end = os.pipe()
    os.close(read_end)
    os.close(write_end)
    with pytest.raises(PopcornError, match=f"file descriptor {write_end} is not open"):
        PopcornWriter(write_end)
    cases = write_cases(tmp_path, "batch: 1; n: 4; cond: 0; seed: 1")
    done = run_eval("test", cases, "--submission", FIXTURES / "cli_geqrf.py", "--popcorn-fd", 99)
    assert done.returncode == 2
    assert "file descriptor 99 is not open" in done.stderr
    assert "Traceback" not in done.stderr


def test_parse_rejects_a_line_without_a_key():
    with pytest.raises(ValueError, match="line 2"):
        parse_popcorn("check: pass\ngarbage\n")
