"""Parity with the contest: its own reference.py and eval.py, run here on a CPU, against ours.

The contest's public files (``conftest.CONTEST``: ``../shared/contest/qr_v2`` beside the repository)
are loaded at test time, never copied. Its eval.py runs unchanged in a subprocess, with
``tests/fixtures/contest_cpu_shim`` on PYTHONPATH standing in for the few CUDA calls it makes
(documented there). Compared: generated input bits for every case kind, verdicts on good and
corrupted outputs, the benchmark inputs each side generates (seeds), protocol lines per mode, and
exit codes. Without the contest's folder these tests fail; they never skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import reference
from conftest import CONTEST, FIXTURES, REPO_ROOT, clean_env, load_module, require_contest
from test_reference import form_cases

SHIM = FIXTURES / "contest_cpu_shim"
SUBMISSION = FIXTURES / "parity_submission.py"
RUN_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def contest_reference():
    """The contest's reference.py as a module of its own (it imports the contest's task.py)."""
    require_contest()
    sys.path.insert(0, str(CONTEST))
    saved_task = sys.modules.pop("task", None)
    try:
        module = load_module(CONTEST / "reference.py", "contest_reference")
    finally:
        sys.path.remove(str(CONTEST))
        sys.modules.pop("task", None)
        if saved_task is not None:
            sys.modules["task"] = saved_task
    return module


# --------------------------------------------------------------------------------------------
# reference.py: inputs bit for bit, verdicts
# --------------------------------------------------------------------------------------------

SHAPES = [(1, 1, 0), (2, 2, 1), (3, 5, 2), (4, 17, 3), (2, 33, 0), (3, 64, 2), (2, 100, 4)]


@pytest.mark.parametrize("case", reference.CASES)
def test_generated_inputs_are_the_contests_bit_for_bit(contest_reference, case):
    for batch, n, cond in SHAPES:
        for seed in (0, 53124, 770001):
            ours = reference.generate_input(batch, n, cond, seed, case, device="cpu")
            theirs = contest_reference.generate_input(batch, n, cond, seed, case)
            assert ours.shape == theirs.shape and ours.dtype == theirs.dtype == torch.float32
            assert ours.is_contiguous() and theirs.is_contiguous()
            assert torch.equal(ours.view(torch.int32), theirs.view(torch.int32)), (case, batch, n, cond, seed)


def gate_cases():
    A = reference.generate_input(3, 24, 2, 7, "mixed", device="cpu")
    H, tau = torch.geqrf(A)
    replayed = torch.geqrf(reference.generate_input(3, 24, 2, 8, "mixed", device="cpu"))
    return A, [("geqrf", (H, tau)), ("negated tau", (H, -tau)), ("tau x 1.01", (H, tau * 1.01)),
               ("tau x 0.5", (H, tau * 0.5)), ("perturbed R", (H + torch.triu(torch.full_like(H, 1e-3)), tau)),
               ("leakage", (H + torch.tril(torch.full_like(H, 1e-3), -1), tau)), ("replayed", replayed),
               ("zero tau", (H, torch.zeros_like(tau)))]


def test_verdicts_on_good_and_corrupted_outputs_are_the_contests(contest_reference):
    A, outputs = gate_cases()
    H, tau = torch.geqrf(A)
    outputs += [(name, build(H.clone(), tau.clone())) for name, build, _, _ in form_cases()]
    for name, output in outputs:
        ours, message = reference.check_implementation(A, output)
        theirs, their_message = contest_reference.check_implementation(A, output)
        assert ours == theirs, f"{name}: ours {ours} ({message}), contest {theirs} ({their_message})"
    assert {name for name, _ in outputs} >= {"geqrf", "replayed", "list-refused: the contest requires a tuple"}


def test_a_zero_matrix_gets_the_contests_verdicts(contest_reference):
    A = torch.zeros(2, 5, 5)
    H, tau = torch.geqrf(A)
    nudged = H.clone()
    nudged[0, 0, 0] = 1e-30
    for output in ((H, tau), (nudged, tau)):
        assert reference.check_implementation(A, output)[0] == contest_reference.check_implementation(A, output)[0]


# --------------------------------------------------------------------------------------------
# eval.py: the contest's and ours, mode by mode, on the same cases file and submission
# --------------------------------------------------------------------------------------------

class Run:
    def __init__(self, code: int, protocol: str, log: list[str], stderr: str, report: dict | None):
        self.code = code
        self.lines = [line for line in protocol.splitlines() if line]
        self.values = dict(line.split(": ", 1) for line in self.lines)
        self.log = log  # "n hash" per call, in call order
        self.stderr = stderr
        self.report = report

    def keys(self) -> list[str]:
        return [line.split(": ", 1)[0] for line in self.lines]

    def inputs(self, n: int) -> list[str]:
        """The distinct inputs of size n, in the order first seen."""
        seen = []
        for line in self.log:
            size, digest = line.split()
            if int(size) == n and digest not in seen:
                seen.append(digest)
        return seen


def run_side(side: str, mode: str, cases_text: str, tmp_path, seed: int | None = None) -> Run:
    """``eval.py MODE cases`` as the contest runs it (``side="contest"``), or ``python -m eval`` (ours)."""
    require_contest()
    folder = tmp_path / side
    folder.mkdir(exist_ok=True)
    cases = folder / f"{mode}.txt"
    cases.write_text(cases_text)
    protocol, log, report = folder / f"{mode}.popcorn", folder / f"{mode}.log", folder / f"{mode}.json"
    env = clean_env(PARITY_LOG=str(log))
    env.pop("PYTHONPATH", None)
    if seed is not None:
        env["POPCORN_SEED"] = str(seed)
    if side == "contest":
        submission_dir = folder / "entry"
        submission_dir.mkdir(exist_ok=True)
        (submission_dir / "submission.py").write_text(SUBMISSION.read_text())
        env["PYTHONPATH"] = os.pathsep.join([str(SHIM), str(submission_dir)])
        command, cwd = [sys.executable, str(CONTEST / "eval.py"), mode, str(cases)], folder
    else:
        command = [sys.executable, "-m", "eval", mode, str(cases), "--submission", str(SUBMISSION),
                   "--device", "cpu", "--json", str(report)]
        cwd = REPO_ROOT
    fd = os.open(protocol, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    env["POPCORN_FD"] = str(fd)
    try:
        done = subprocess.run(command, cwd=cwd, env=env, pass_fds=(fd,), capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S)
    finally:
        os.close(fd)
    return Run(done.returncode, protocol.read_text(), log.read_text().splitlines() if log.exists() else [],
               done.stderr, json.loads(report.read_text()) if report.exists() else None)


def both(mode: str, cases_text: str, tmp_path, seed: int | None = None) -> tuple[Run, Run]:
    return run_side("contest", mode, cases_text, tmp_path, seed), run_side("ours", mode, cases_text, tmp_path, seed)


def case_keys(run: Run, prefix: str, index: int) -> list[str]:
    return [k for k in run.keys() if k.startswith(f"{prefix}.{index}.")]


TEST_CASES = [
    "batch: 2; n: 8; cond: 1; seed: 3",
    "batch: 2; n: 9; cond: 1; seed: 4",
    "batch: 2; n: 10; cond: 1; seed: 5",
    "batch: 2; n: 11; cond: 1; seed: 6; case: band",
    "batch: 2; n: 12; cond: 1; seed: 7",
    "batch: 3;n: 13 ; cond: 0; seed: 8; case: mixed",
    "batch: 2; n: 15; cond: 2; seed: 9; case: rankdef",
]
MUTATES_INPUT = 5  # index of the n = 13 case: right answer, input overwritten


def test_test_mode_protocol_verdicts_and_exit_code(tmp_path):
    contest, ours = both("test", "\n".join(TEST_CASES) + "\n", tmp_path)
    assert contest.code == ours.code == 112, (contest.stderr[-2000:], ours.stderr[-2000:])
    assert contest.lines[0] == ours.lines[0] == f"test-count: {len(TEST_CASES)}"
    for i, line in enumerate(TEST_CASES):
        assert contest.values[f"test.{i}.spec"] == ours.values[f"test.{i}.spec"] == line
        if i == MUTATES_INPUT:
            continue
        assert case_keys(contest, "test", i) == case_keys(ours, "test", i), i
        assert contest.values[f"test.{i}.status"] == ours.values[f"test.{i}.status"], (i, ours.values)
    assert [contest.values[f"test.{i}.status"] for i in range(len(TEST_CASES))] == \
        ["pass", "fail", "fail", "pass", "fail", "pass", "fail"]
    # Stricter on purpose: ours refuses the overwritten input; its report gives the contest's verdict.
    assert ours.values[f"test.{MUTATES_INPUT}.status"] == "fail"
    contest_view = ours.report["tests"][MUTATES_INPUT]["contest"]
    assert contest_view["status"] == contest.values[f"test.{MUTATES_INPUT}.status"] == "pass"
    assert "input-modified" in contest_view["stricter"]
    assert [t["contest"]["status"] for t in ours.report["tests"]] == \
        [contest.values[f"test.{i}.status"] for i in range(len(TEST_CASES))]
    assert contest.lines[-1] == ours.lines[-1] == "check: fail"


BENCH_CASES = ["batch: 2; n: 8; cond: 1; seed: 3", "batch: 3; n: 11; cond: 2; seed: 5; case: mixed",
               "batch: 2; n: 9; cond: 1; seed: 4"]


def test_benchmark_mode_protocol_and_the_inputs_each_side_generates(tmp_path):
    """With a secret seed, as a ranked run has: both sides mix it in, then add 42 per input."""
    contest, ours = both("benchmark", "\n".join(BENCH_CASES) + "\n", tmp_path, seed=77)
    assert contest.code == ours.code == 112, (contest.stderr[-2000:], ours.stderr[-2000:])
    assert contest.keys() == ours.keys()
    assert [contest.values[f"benchmark.{i}.spec"] for i in range(3)] == BENCH_CASES
    assert [ours.values[f"benchmark.{i}.spec"] for i in range(3)] == BENCH_CASES
    assert ours.values["benchmark.2.status"] == contest.values["benchmark.2.status"] == "fail"
    for n in (8, 11):  # ours times at most 2 inputs per case on a CPU: the contest's first two
        assert len(contest.inputs(n)) > 2
        assert ours.inputs(n)[:2] == contest.inputs(n)[:2], n
    assert contest.lines[-1] == ours.lines[-1] == "check: fail"


def test_leaderboard_mode_protocol_stops_at_the_first_failure(tmp_path):
    contest, ours = both("leaderboard", "\n".join(BENCH_CASES[:1] + BENCH_CASES[2:] + BENCH_CASES[1:2]) + "\n",
                         tmp_path)
    assert contest.code == ours.code == 112, (contest.stderr[-2000:], ours.stderr[-2000:])
    assert contest.keys() == ours.keys()
    assert ours.keys()[:2] == ["benchmark-count", "benchmark.0.spec"]
    assert not any(k.startswith("benchmark.2.") for k in ours.keys())
    assert ours.values["benchmark.1.status"] == "fail"


@pytest.mark.parametrize("first, code", [(BENCH_CASES[0], 0), (BENCH_CASES[2], 112)], ids=["pass", "fail"])
def test_profile_mode_protocol_and_exit_code(tmp_path, first, code):
    contest, ours = both("profile", f"{first}\n{BENCH_CASES[1]}\n", tmp_path)
    assert contest.code == ours.code == code, (contest.stderr[-2000:], ours.stderr[-2000:])
    assert contest.keys() == ours.keys()
    assert contest.values["benchmark-count"] == ours.values["benchmark-count"] == "2"
    assert contest.values["benchmark.0.spec"] == ours.values["benchmark.0.spec"] == first


BAD_CASES_FILES = {
    "blank line": "batch: 2; n: 8; cond: 1; seed: 3\n\nbatch: 2; n: 8; cond: 1; seed: 4\n",
    "comment line": "# cases\nbatch: 2; n: 8; cond: 1; seed: 3\n",
    "trailing semicolon": "batch: 2; n: 8; cond: 1; seed: 3;\n",
    "no colon": "batch 2; n: 8; cond: 1; seed: 3\n",
}


@pytest.mark.parametrize("what", list(BAD_CASES_FILES))
def test_a_bad_cases_file_exits_113_on_both_sides(tmp_path, what):
    contest, ours = both("test", BAD_CASES_FILES[what], tmp_path)
    assert contest.code == ours.code == 113, (what, contest.stderr[-500:], ours.stderr[-500:])
    assert ours.lines == [] and ours.log == [] and contest.log == []
    assert ours.stderr.startswith("bad spec: ") and "Traceback" not in ours.stderr
