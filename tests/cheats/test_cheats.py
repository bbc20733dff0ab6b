"""Every known way to cheat the clock or the check, run through the real evaluator on CPU.

Each fixture in this folder is a small submission carrying one attack.  The test copies it into a
temporary folder, writes a tiny spec (n <= 16), runs ``python -m eval MODE … --device cpu`` as a
subprocess and reads the JSON report (and, for the protocol attacks, the ``key: value`` file).  An
attack must fail with the expected message, or be flagged, or be timed at its true cost: the
timing attacks pay ``COST_S`` per honest call (a sleep, so CPU load cannot shrink it), and a replay
or a fake clock that the evaluator accepted shows up as a mean far below it.

The legit submissions (``torch.geqrf`` and the repository's ``submission.py``) must pass with no
flag and no lint warning.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
COST_NS = 2e5  # the cheats' honest cost per call (COST_S = 0.0002 in the fixtures)
HONEST_FRACTION = 0.8  # a mean below this fraction of COST_NS means some work escaped the clock
RUN_TIMEOUT_S = 60  # a hung evaluator fails the test instead of hanging the suite
CHECK_FAILED = re.compile(r"factor residual too large|Q not orthogonal|NaN or Inf")
# The runner's verdict when bytes the child wrote on its own reach the parent's control channel.
CHANNEL_TAMPERED = re.compile(r"garbled|wrote to the evaluator's pipe|exit pipe was written to")
INPUT_MODIFIED = "submission modified its input"

EXIT_OK, EXIT_FAIL, EXIT_TIMEOUT = 0, 112, 114

SPEC = """\
test_timeout: {test_timeout}
benchmark_timeout: 120
ranked_timeout: 120
tests:
{tests}
benchmarks:
  - {{batch: 2, n: 8, cond: 1, seed: 4242}}
"""
ONE_TEST = "  - {batch: 2, n: 8, cond: 1, seed: 4141}\n"
TWO_TESTS = ONE_TEST + "  - {batch: 3, n: 12, cond: 2, seed: 4143}\n"


# --------------------------------------------------------------------------------------------
# Running the real evaluator
# --------------------------------------------------------------------------------------------

class Run:
    """One finished ``python -m eval`` run: exit code, output, JSON report, protocol text."""

    def __init__(self, proc: subprocess.CompletedProcess, report_path: Path, popcorn_path: Path | None):
        self.code = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.report = json.loads(report_path.read_text()) if report_path.exists() else None
        self.popcorn = popcorn_path.read_text() if popcorn_path and popcorn_path.exists() else None

    def describe(self) -> str:
        return f"exit {self.code}\nstdout:\n{self.stdout[-3000:]}\nstderr:\n{self.stderr[-3000:]}"

    @property
    def test(self) -> dict:
        assert self.report is not None, self.describe()
        return self.report["tests"][0]

    @property
    def bench(self) -> dict:
        assert self.report is not None, self.describe()
        return self.report["benchmarks"][0]

    def constructs(self) -> set[str]:
        return {w["construct"] for w in self.report["warnings"]}


def install(tmp_path: Path, fixture: str, replace: dict | None = None) -> Path:
    """Copy a fixture into the test's folder (its caches and logs then live there too)."""
    target = tmp_path / fixture
    text = (HERE / fixture).read_text()
    for old, new in (replace or {}).items():
        text = text.replace(old, new)
    target.write_text(text)
    return target


def evaluate(tmp_path: Path, submission: Path, mode: str, *, tests: str = ONE_TEST,
             test_timeout: float = 60, popcorn: str | None = None, name: str = "run") -> Run:
    """Run the evaluator for real on ``submission``; ``popcorn`` is None, "option" or "env"."""
    spec = tmp_path / f"{name}_spec.yml"
    spec.write_text(SPEC.format(tests=tests, test_timeout=test_timeout))
    report = tmp_path / f"{name}_report.json"
    args = [sys.executable, "-m", "eval", mode, "--submission", str(submission), "--specs", str(spec),
            "--json", str(report), "--device", "cpu"]
    env = {k: v for k, v in os.environ.items() if k not in ("POPCORN_FD", "POPCORN_SEED")}
    popcorn_path, fds = None, ()
    if popcorn:
        popcorn_path = tmp_path / f"{name}_popcorn.txt"
        fd = os.open(popcorn_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        fds = (fd,)
        if popcorn == "option":
            args += ["--popcorn-fd", str(fd)]
        else:
            env["POPCORN_FD"] = str(fd)
    try:
        proc = subprocess.run(args, cwd=REPO_ROOT, env=env, pass_fds=fds, capture_output=True,
                              text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the evaluator did not finish within {RUN_TIMEOUT_S} s on {submission.name} ({mode})")
    finally:
        for fd in fds:
            os.close(fd)
    return Run(proc, report, popcorn_path)


def is_running(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie waiting to be reaped does not count)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return not re.search(r"^State:\s+[ZX]", status, re.M)


# --------------------------------------------------------------------------------------------
# What an honest outcome looks like
# --------------------------------------------------------------------------------------------

def assert_check_failed(run: Run, entry: dict) -> None:
    assert run.code == EXIT_FAIL, run.describe()
    assert entry["status"] == "fail", entry
    assert CHECK_FAILED.search(entry["message"]), entry["message"]


def assert_rejected(run: Run, entry: dict) -> None:
    """The case failed: on the check, or because the child tampered with its channel to the parent."""
    assert run.code == EXIT_FAIL, run.describe()
    assert entry["status"] == "fail", entry
    assert CHECK_FAILED.search(entry["message"]) or CHANNEL_TAMPERED.search(entry["message"]), entry["message"]


def assert_caught_or_true_cost(run: Run) -> None:
    """A replay was rejected by the check, or nothing was replayed and every call paid its cost."""
    bench = run.bench
    if bench["status"] == "fail":
        assert_check_failed(run, bench)
        return
    assert run.code == EXIT_OK, run.describe()
    mean = bench["stats"]["mean"]
    assert mean >= HONEST_FRACTION * COST_NS, (
        f"passed at {mean / 1e6:.3f} ms per call, below the honest {COST_NS / 1e6:.1f} ms: "
        f"work escaped the clock ({bench['message']})")


def assert_true_cost_or_flagged(run: Run) -> None:
    """The clock could not be faked: the mean is the true cost, or the run is flagged clock-skew."""
    bench = run.bench
    assert bench["status"] == "pass", run.describe()
    mean = bench["stats"]["mean"]
    assert mean >= HONEST_FRACTION * COST_NS or "clock-skew" in bench["flags"], (
        f"reported {mean / 1e6:.6f} ms per call for work that takes {COST_NS / 1e6:.1f} ms, "
        f"flags {bench['flags']}")


def assert_honest_protocol(run: Run) -> None:
    """The protocol output is the evaluator's alone: it says fail, and nothing the child wrote."""
    assert run.popcorn is not None, run.describe()
    text = [line for line in run.popcorn.splitlines() if line.strip()]  # what a reader parses
    assert not [line for line in text if "cheat-wrote-here" in line], f"the child wrote protocol lines: {text}"
    lines = dict(line.split(": ", 1) for line in text if ": " in line)  # later lines win
    assert lines.get("test.0.status") == "fail", text
    assert lines.get("check") == "fail" and "check: pass" not in text, text


# --------------------------------------------------------------------------------------------
# The attacks
# --------------------------------------------------------------------------------------------

def attack_cache_identity(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_cache_identity.py"), "benchmark")
    assert_caught_or_true_cost(run)
    return run


def attack_cache_content(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_cache_content.py"), "benchmark")
    assert_caught_or_true_cost(run)
    return run


def attack_fused_calls(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_fused_calls.py"), "benchmark")
    assert_caught_or_true_cost(run)
    return run


def attack_background_thread(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_background_thread.py"), "benchmark")
    assert_check_failed(run, run.bench)
    assert run.bench["message"].startswith("timed repeat"), run.bench["message"]
    return run


def attack_disk_by_content(tmp_path):
    submission = install(tmp_path, "cheat_disk_by_content.py")
    first = evaluate(tmp_path, submission, "benchmark", name="first")
    assert first.bench["status"] == "pass", first.describe()
    assert len(list((tmp_path / "disk_cache_content").iterdir())) > 0  # the cache was written
    run = evaluate(tmp_path, submission, "benchmark", name="second")
    assert_caught_or_true_cost(run)
    return run


def attack_disk_by_index(tmp_path):
    submission = install(tmp_path, "cheat_disk_by_index.py")
    first = evaluate(tmp_path, submission, "benchmark", name="first")
    assert first.bench["status"] == "pass", first.describe()
    run = evaluate(tmp_path, submission, "benchmark", name="second")
    assert_caught_or_true_cost(run)
    return run


def attack_gc_nan(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_gc_nan.py"), "test")
    assert_check_failed(run, run.test)
    assert "NaN" in run.test["message"]
    return run


def attack_fd_rewrite(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_fd_rewrite.py"), "test", popcorn="env")
    assert_rejected(run, run.test)
    assert_honest_protocol(run)
    return run


def attack_parent_files(tmp_path):
    submission = install(tmp_path, "cheat_parent_fds.py", {'TARGETS = ("files", "pipes")': 'TARGETS = ("files",)'})
    run = evaluate(tmp_path, submission, "test", popcorn="option")
    assert_rejected(run, run.test)
    assert_honest_protocol(run)
    return run


def attack_parent_pipes(tmp_path):
    submission = install(tmp_path, "cheat_parent_fds.py", {'TARGETS = ("files", "pipes")': 'TARGETS = ("pipes",)'})
    run = evaluate(tmp_path, submission, "test", popcorn="option")
    assert_rejected(run, run.test)
    assert_honest_protocol(run)
    return run


def attack_own_pipes(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_own_pipes.py"), "test")  # a hang fails it
    assert_rejected(run, run.test)
    return run


def attack_timer_patch(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_timer_patch.py"), "benchmark")
    assert_true_cost_or_flagged(run)
    return run


def attack_torch_patch(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_torch_patch.py"), "test")
    assert_check_failed(run, run.test)
    return run


def attack_mutate_input(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_mutate_input.py"), "test")
    test = run.test
    assert run.code == EXIT_FAIL and test["status"] == "fail", run.describe()
    assert INPUT_MODIFIED in test["message"] and "input-modified" in test["flags"], test
    assert test["factor_margin"] < 1 and test["orth_margin"] < 1, test  # the output itself is right
    return run


def attack_mutate_input_benchmark(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_mutate_input.py"), "benchmark")
    bench = run.bench
    assert run.code == EXIT_FAIL and bench["status"] == "fail", run.describe()
    assert INPUT_MODIFIED in bench["message"] and "input-modified" in bench["flags"], bench
    return run


def attack_mutate_to_match(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_mutate_to_match.py"), "test")
    assert_check_failed(run, run.test)
    assert INPUT_MODIFIED in run.test["message"] and "input-modified" in run.test["flags"], run.test
    return run


def attack_return_input(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_return_input.py"), "test")
    test = run.test
    assert run.code == EXIT_FAIL and test["status"] == "fail", run.describe()
    assert "input-modified" in test["flags"] and INPUT_MODIFIED in test["message"], test
    assert test["factor_margin"] < 1, test
    return run


def attack_evaluator_verdict(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_evaluator_verdict.py"), "test")
    assert_check_failed(run, run.test)
    return run


def attack_evaluator_clocks(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_evaluator_clocks.py"), "benchmark")
    assert_true_cost_or_flagged(run)
    return run


def attack_evaluator_store(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_evaluator_store.py"), "benchmark")
    assert_true_cost_or_flagged(run)
    return run


def attack_forged_reply(tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "cheat_forged_reply.py"), "test")
    assert_rejected(run, run.test)
    return run


# attack -> (its check, the lint constructs its source must raise)
ATTACKS = {
    "cache-by-identity": (attack_cache_identity, set()),
    "cache-by-content": (attack_cache_content, set()),
    "fused-calls": (attack_fused_calls, set()),
    "background-thread": (attack_background_thread, {"threading"}),
    "disk-replay-by-content": (attack_disk_by_content, {"torch.save", "torch.load", "pathlib"}),
    "disk-replay-by-index": (attack_disk_by_index, {"torch.save", "torch.load", "pathlib"}),
    "gc-nan": (attack_gc_nan, {"gc"}),
    "fd-rewrite": (attack_fd_rewrite, {"atexit", "os._exit", "os.write", "monkey-patch"}),
    "parent-files": (attack_parent_files, {"os.listdir", "os.open", "os.write"}),
    "parent-pipes": (attack_parent_pipes, {"os.listdir", "os.open", "os.write"}),
    "own-pipes": (attack_own_pipes, {"os.write"}),
    "timer-patch": (attack_timer_patch, {"monkey-patch", "torch.cuda.Event"}),
    "torch-patch": (attack_torch_patch, {"monkey-patch"}),
    "mutate-input": (attack_mutate_input, set()),
    "mutate-input-benchmark": (attack_mutate_input_benchmark, set()),
    "mutate-to-match": (attack_mutate_to_match, set()),
    "return-input": (attack_return_input, set()),
    "evaluator-verdict": (attack_evaluator_verdict, {"importlib", "sys.modules", "setattr"}),
    "evaluator-clocks": (attack_evaluator_clocks, {"gc"}),
    "evaluator-store": (attack_evaluator_store, {"sys.modules"}),
    "forged-reply": (attack_forged_reply, {"gc", "multiprocessing"}),
}


@pytest.mark.parametrize("attack", list(ATTACKS), ids=list(ATTACKS))
def test_attack_is_defeated(attack, tmp_path):
    check, constructs = ATTACKS[attack]
    run = check(tmp_path)
    assert constructs <= run.constructs(), f"lint missed {constructs - run.constructs()}"


# --------------------------------------------------------------------------------------------
# Zero false positives
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["test", "benchmark"])
def test_geqrf_passes_with_no_flag(mode, tmp_path):
    run = evaluate(tmp_path, install(tmp_path, "legit_geqrf.py"), mode)
    assert run.code == EXIT_OK, run.describe()
    entries = run.report["tests"] + run.report["benchmarks"]
    assert entries and all(e["status"] == "pass" and e["flags"] == [] for e in entries), entries
    assert run.report["warnings"] == []
    if mode == "benchmark":
        assert run.bench["stats"]["runs"] >= 3


def test_our_submission_passes_with_no_flag(tmp_path):
    submission = REPO_ROOT / "submission.py"
    if not submission.exists():
        pytest.skip("submission.py is not written yet")
    run = evaluate(tmp_path, submission, "test", tests="  - {batch: 2, n: 16, cond: 1, seed: 4145}\n")
    assert run.code == EXIT_OK, run.describe()
    assert run.test["status"] == "pass" and run.test["flags"] == [], run.test
    assert run.report["warnings"] == []


# --------------------------------------------------------------------------------------------
# Faults: a clear one-line reason, a fresh child for the next case, the right exit code
# --------------------------------------------------------------------------------------------

# n of the case -> (status, the one-line reason it must give); fault_at_call.py faults by n, and
# the last case (n = 14) is honest: after five faults in a row a fresh child must still serve it.
CALL_FAULTS = {
    "exception": (8, "fail", r"^ValueError: deliberate failure in the call \(fault_at_call\.py:\d+\)$"),
    "os-exit": (9, "fail", r"exited with code 3"),
    "segfault": (10, "fail", r"killed by SIGSEGV"),
    "out-of-memory": (11, "fail", r"^RuntimeError: .*(allocate|memory)"),
    "garbage-output": (12, "fail", r"expected a tuple \(H, tau\)"),
    "next-case": (14, "pass", r"^ok: "),
}
# A hang uses up the run's time limit, as in the contest, whose runner kills the whole eval.py run:
# the hung case and every later one are timeouts. (n = 13 hangs.)
HANG_FAULTS = {
    "hang": (13, "timeout", r"^timed out: the run's 5 s limit \(import included\) was reached during the call "
                            r"\(child process killed\)$"),
    "after-hang": (14, "timeout", r"^not run: the run's 5 s limit \(import included\) was used up$"),
}


def faults_run(tmp_path_factory, name: str, faults: dict, test_timeout: float):
    tmp_path = tmp_path_factory.mktemp(name)
    tests = "".join(f"  - {{batch: 2, n: {n}, cond: 1, seed: {4200 + n}}}\n" for n, _, _ in faults.values())
    submission = install(tmp_path, "fault_at_call.py")
    return evaluate(tmp_path, submission, "test", tests=tests, test_timeout=test_timeout), submission


@pytest.fixture(scope="module")
def call_faults_run(tmp_path_factory):
    """One evaluator run over a case per fault, then an honest case (run once for the module)."""
    return faults_run(tmp_path_factory, "call_faults", CALL_FAULTS, test_timeout=120)


@pytest.fixture(scope="module")
def hang_run(tmp_path_factory):
    return faults_run(tmp_path_factory, "hang", HANG_FAULTS, test_timeout=5)


@pytest.mark.parametrize("fault", list(CALL_FAULTS) + list(HANG_FAULTS), ids=list(CALL_FAULTS) + list(HANG_FAULTS))
def test_fault_fails_its_case_with_a_clear_reason(fault, call_faults_run, hang_run):
    run, _ = hang_run if fault in HANG_FAULTS else call_faults_run
    n, status, reason = {**CALL_FAULTS, **HANG_FAULTS}[fault]
    result = next(t for t in run.report["tests"] if t["spec"]["n"] == n)
    assert result["status"] == status, result
    assert re.search(reason, result["message"]), result["message"]
    assert "\n" not in result["message"], result["message"]


@pytest.mark.parametrize("which", ["faults", "hang"])
def test_faults_end_with_the_right_exit_code_and_nothing_left_running(which, call_faults_run, hang_run):
    run, submission = hang_run if which == "hang" else call_faults_run
    faults = HANG_FAULTS if which == "hang" else CALL_FAULTS
    assert run.code == (EXIT_TIMEOUT if which == "hang" else EXIT_FAIL), run.describe()
    assert "Traceback" not in run.stderr, run.describe()
    assert [t["spec"]["n"] for t in run.report["tests"]] == [n for n, _, _ in faults.values()]
    pids = [int(p) for p in submission.with_suffix(".pids").read_text().split()]
    assert len(set(pids)) == (1 if which == "hang" else len(faults)), pids  # a fresh child after every fault
    assert not [pid for pid in pids if is_running(pid)], "a child process is still running"


IMPORT_FAULTS = {
    "syntax-error": ("fault_syntax.py", r"SyntaxError in fault_syntax\.py line 6"),
    "missing-module": ("fault_missing_module.py", r"ModuleNotFoundError: .*qr_module_that_does_not_exist"),
    "no-custom-kernel": ("fault_no_entry.py", r"defines no 'custom_kernel'"),
}


@pytest.mark.parametrize("fault", list(IMPORT_FAULTS), ids=list(IMPORT_FAULTS))
def test_import_fault_fails_every_case_with_its_reason(fault, tmp_path):
    fixture, reason = IMPORT_FAULTS[fault]
    run = evaluate(tmp_path, install(tmp_path, fixture), "test", tests=TWO_TESTS)
    assert run.code == EXIT_FAIL, run.describe()
    assert [t["status"] for t in run.report["tests"]] == ["fail", "fail"], run.report["tests"]
    for test in run.report["tests"]:
        assert re.search(reason, test["message"]) and "\n" not in test["message"], test["message"]
    assert "Traceback" not in run.stderr, run.describe()
    if fault == "syntax-error":
        assert [w["construct"] for w in run.report["warnings"]] == ["syntax error"]
