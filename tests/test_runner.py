"""The isolated runner on CPU: real spawned children, real faults, real checks."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

import reference
from eval.runner import CaseFault, Session, bench_input_count, bench_seeds, flip_row_signs, timing_reply
from eval.specs import Case

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FAULTS = FIXTURES / "runner_faults.py"
POISON = Case(batch=2, n=13, cond=1, seed=11)  # runner_faults.py misbehaves on n == 13
GOOD = Case(batch=2, n=8, cond=1, seed=12)
SMALL = Case(batch=3, n=12, cond=2, seed=5)


def leftover_shared_files() -> list[str]:
    """Shared-memory buffers this test process made that still exist."""
    shm = Path("/dev/shm")
    return [p.name for p in shm.glob(f"qr-eval-{os.getpid()}-*")] if shm.is_dir() else []


def is_running(pid: int) -> bool:
    """True if ``pid`` is a live process (zombies count as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@pytest.fixture(scope="module")
def geqrf_session():
    with Session(FIXTURES / "geqrf_ok.py", "cpu", timeout_s=60) as session:
        yield session
    assert not any(is_running(pid) for pid in session.child_pids)
    assert leftover_shared_files() == []


# ---- legit submissions ---------------------------------------------------------------------------

def test_geqrf_passes_a_test_case(geqrf_session):
    result = geqrf_session.test(SMALL)
    assert (result.kind, result.status, result.flags) == ("test", "pass", [])
    assert result.message.startswith("ok: batch=3 n=12")
    assert 0 < result.factor_margin < 1 and 0 < result.orth_margin < 1
    assert result.wall_s > 0


def test_geqrf_benchmark_has_sane_stats(geqrf_session):
    progress = []
    result = geqrf_session.benchmark(SMALL, budget_s=10, max_repeats=6,
                                     on_progress=lambda done, most: progress.append((done, most)))
    assert result.status == "pass", result.message
    assert result.flags == []
    stats = result.stats
    assert 3 <= stats.runs <= 6
    assert progress == [(i, 6) for i in range(1, stats.runs + 1)]
    assert 0 < stats.best <= stats.mean <= stats.worst < 1e9  # ns per call: well under a second
    assert stats.err <= stats.std
    assert result.message.startswith("ok: 50 inputs x")
    assert 0 < geqrf_session.defence_fraction() < 1


def test_profile_writes_a_chrome_trace(geqrf_session, tmp_path):
    trace = tmp_path / "trace.json"
    result = geqrf_session.profile(SMALL, str(trace))
    assert result.status == "pass", result.message
    assert str(trace) in result.message
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name") == "custom_kernel" for e in events)


def test_reference_kernel_runs_as_a_baseline():
    with Session(Path(reference.__file__), "cpu", timeout_s=60, entry="ref_kernel") as session:
        result = session.benchmark(GOOD, budget_s=10, max_repeats=3)
    assert result.status == "pass", result.message
    assert result.stats.runs == 3


def test_parent_never_imports_the_submission(geqrf_session):
    geqrf_session.test(GOOD)
    fixture = str(FIXTURES / "geqrf_ok.py")
    assert "submission" not in sys.modules
    assert not any(getattr(m, "__file__", None) == fixture for m in list(sys.modules.values()))


def test_bench_input_count():
    assert bench_input_count(20 * 32 * 32 * 4) == 50
    assert bench_input_count(640 * 512 * 512 * 4) == 1
    assert bench_input_count(16 * 1024 * 1024 * 4) == 4  # 64 MiB inputs: 256 MiB / 64 MiB
    assert bench_input_count(20 * 32 * 32 * 4, max_inputs=2) == 2
    assert bench_input_count(640 * 512 * 512 * 4, max_inputs=2) == 1


def test_benchmark_seeds_add_42_before_each_input_as_the_contest_does():
    assert bench_seeds(1029, 3) == [1071, 1113, 1155]


def test_sign_flips_change_every_matrix_exactly():
    A = reference.generate_input(4, 6, 2, 3, "rankdef", device="cpu")
    flipped = A.clone()
    flip_row_signs(flipped, torch.Generator().manual_seed(0))
    assert torch.equal(flipped.abs(), A.abs())  # exact: only signs change, zero pattern kept
    ratio = torch.where(A != 0, flipped / A, torch.ones_like(A))
    assert torch.all((ratio == 1) | (ratio == -1))
    row_sign = ratio[..., :1]  # column 0 is never zeroed in rankdef
    assert torch.all((ratio == row_sign) | (A == 0))  # whole rows flip together
    for a, f in zip(A, flipped):
        assert not torch.equal(a, f)  # every matrix changes


# ---- faults: each fails with a clear reason, and the next case runs in a fresh child ------------

BAD_CALLS = [
    ("raises", "fail", "ValueError: deliberate failure (runner_faults.py:"),
    ("wrong_shape", "fail", "H has shape (2, 12, 13), expected (2, 13, 13)"),
    ("wrong_dtype", "fail", "H has dtype torch.float64, expected torch.float32"),
    ("not_a_tuple", "fail", "custom_kernel returned a Tensor, expected a tuple (H, tau)"),
    ("returns_list", "fail", "custom_kernel returned a list of length 2, expected a tuple (H, tau)"),
    ("returns_dispatch_subclass", "fail", "H is a Lazy with its own __torch_dispatch__"),
    ("returns_nan", "fail", "H contains NaN or Inf"),
    ("sleeps", "timeout", "timed out after 5 s during the call (child process killed)"),
    ("exits", "fail", "child process exited with code 3 during the call"),
    ("sys_exit", "fail", "SystemExit: 0 (runner_faults.py:"),
    ("segfaults", "fail", "child process was killed by SIGSEGV during the call"),
    ("sigkill", "fail", "child process was killed by SIGKILL during the call"),
]


@pytest.mark.parametrize("entry, status, message", BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_fault_fails_the_case_and_the_next_case_runs(entry, status, message):
    with Session(FAULTS, "cpu", timeout_s=5 if entry == "sleeps" else 30, entry=entry) as session:
        bad = session.test(POISON)
        good = session.test(GOOD)
    assert (bad.status, bad.kind) == (status, "test")
    assert message in bad.message
    assert "\n" not in bad.message
    assert good.status == "pass", good.message
    # A fault replaces the child; a wrong answer (NaN) is only a failed check, the child stays.
    assert len(session.child_pids) == (1 if entry == "returns_nan" else 2)
    assert not any(is_running(pid) for pid in session.child_pids)
    assert leftover_shared_files() == []


def test_tensor_subclasses_are_accepted_as_the_contest_accepts_them():
    with Session(FAULTS, "cpu", timeout_s=30, entry="returns_plain_subclass") as session:
        tested = session.test(GOOD)
        timed = session.benchmark(GOOD, budget_s=10, max_repeats=3, max_inputs=2)
    assert tested.status == "pass", tested.message
    assert timed.status == "pass", timed.message
    assert timed.message.startswith("ok: 2 inputs x 3 timed repeats")


def test_wrong_values_fail_the_check_in_test_and_benchmark():
    with Session(FAULTS, "cpu", timeout_s=30, entry="wrong_values") as session:
        tested = session.test(POISON)
        timed = session.benchmark(POISON, budget_s=10, max_repeats=3)
    assert tested.status == "fail" and "Q not orthogonal" in tested.message
    assert timed.status == "fail" and timed.stats is None
    assert timed.message.startswith(f"first pass, input 0 (seed {POISON.seed + 42}): ")


def test_fault_in_benchmark_is_reported():
    with Session(FAULTS, "cpu", timeout_s=30, entry="segfaults") as session:
        result = session.benchmark(POISON, budget_s=10, max_repeats=3)
        after = session.benchmark(GOOD, budget_s=10, max_repeats=3)
    assert (result.status, result.kind) == ("fail", "benchmark")
    assert result.message == "child process was killed by SIGSEGV during the untimed first pass"
    assert after.status == "pass", after.message


@pytest.mark.parametrize("fixture, message", [
    ("bad_syntax.py", "SyntaxError in bad_syntax.py line 5: expected ':'"),
    ("missing_module.py", "import failed: ModuleNotFoundError: No module named "
                          "'qr_module_that_does_not_exist' (missing_module.py:3)"),
    ("no_entry.py", "no_entry.py defines no 'custom_kernel'"),
    ("does_not_exist.py", "submission file not found: "),
])
def test_submission_that_cannot_load_fails_every_case(fixture, message):
    with Session(FIXTURES / fixture, "cpu", timeout_s=30) as session:
        first = session.test(GOOD)
        second = session.benchmark(GOOD, budget_s=10, max_repeats=3)
    for result in (first, second):
        assert result.status == "fail"
        assert message in result.message
    assert not any(is_running(pid) for pid in session.child_pids)
    assert leftover_shared_files() == []


def test_hang_kills_the_child_and_everything_it_started(tmp_path, monkeypatch):
    pid_file = tmp_path / "grandchild.pid"
    monkeypatch.setenv("RUNNER_TEST_PID_FILE", str(pid_file))
    with Session(FAULTS, "cpu", timeout_s=5, entry="spawns_and_hangs") as session:
        result = session.test(POISON)
        assert result.status == "timeout"
        grandchild = int(pid_file.read_text())
    assert not is_running(grandchild)
    assert not any(is_running(pid) for pid in session.child_pids)


def test_child_environment_is_clean(monkeypatch):
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    monkeypatch.setenv("POPCORN_FD", str(write_end))
    monkeypatch.setenv("POPCORN_SEED", "1234")
    monkeypatch.setenv("RUNNER_TEST_FD", str(write_end))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    try:
        with Session(FAULTS, "cpu", timeout_s=30, entry="reports_environment") as session:
            result = session.test(GOOD)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert "TRITON_INTERPRET=1 POPCORN_FD=None POPCORN_SEED=None fd_leaked=False" in result.message
    assert os.environ["POPCORN_SEED"] == "1234" and "TRITON_INTERPRET" not in os.environ  # parent untouched


# ---- integrity -----------------------------------------------------------------------------------

def test_input_mutation_is_its_own_failure():
    with Session(FAULTS, "cpu", timeout_s=30, entry="mutates_input") as session:
        tested = session.test(GOOD)
        timed = session.benchmark(GOOD, budget_s=10, max_repeats=3)
    assert tested.status == "fail" and tested.flags == ["input-modified"]
    assert tested.message.startswith("submission modified its input (output check passed: ok: ")
    assert timed.status == "fail" and "input-modified" in timed.flags
    assert timed.message == "submission modified its input (outputs passed every check)"


def test_outputs_replayed_by_buffer_address_fail_the_timed_recheck():
    with Session(FIXTURES / "replay_by_pointer.py", "cpu", timeout_s=30) as session:
        result = session.benchmark(GOOD, budget_s=10, max_repeats=5)
    assert result.status == "fail"
    assert result.message.startswith(f"timed repeat 1, input 0 (seed {GOOD.seed + 42}): ")


def test_no_timed_call_sees_an_input_seen_before():
    # Each input's rows get random signs before every repeat: 2**(batch * n) sign patterns per input. With
    # 8 x 8 matrices (2**16 patterns, 50 inputs, 9 passes) a pattern recurs in about 2 % of runs; with
    # 16 x 16 (2**32) in about 4e-7.
    case = Case(batch=2, n=16, cond=1, seed=12)
    with Session(FIXTURES / "repeat_detector.py", "cpu", timeout_s=30) as session:
        timed = session.benchmark(case, budget_s=10, max_repeats=8)
        assert timed.status == "pass", timed.message
        assert timed.stats.runs == 8
        # The detector does fire on a repeat: the same test case twice in one child.
        session.test(SMALL)
        again = session.test(SMALL)
    assert again.status == "fail" and "saw an input that an earlier call saw" in again.message


def test_clocks_are_bound_before_the_submission_is_imported():
    with Session(FIXTURES / "patches_clock.py", "cpu", timeout_s=30) as session:
        result = session.benchmark(SMALL, budget_s=10, max_repeats=3)
    assert result.status == "pass", result.message
    assert result.stats.best > 0


# ---- CUDA (run on a GPU machine: pytest tests/test_runner.py -k cuda -s) -------------------------

cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
GPU_FAULTS = FIXTURES / "runner_gpu_faults.py"


@cuda_only
def test_cuda_geqrf_test_benchmark_profile(tmp_path):
    with Session(FIXTURES / "geqrf_ok.py", "cuda", timeout_s=120) as session:
        assert session.test(Case(20, 32, 1, 53124)).status == "pass"
        for case in (Case(20, 32, 1, 43214), Case(40, 352, 1, 123456), Case(640, 512, 2, 1029)):
            result = session.benchmark(case, budget_s=10, max_repeats=30)
            assert result.status == "pass", result.message
            assert result.flags == []  # no clock-skew or mutation flag on a legit submission
            print(f"\n{case.spec_str()}: {result.message}; mean {result.stats.mean / 1e3:.1f} us "
                  f"± {result.stats.err / 1e3:.2f}, runs {result.stats.runs}, wall {result.wall_s:.2f} s")
        print(f"defences: {100 * session.defence_fraction():.1f}% of timed-phase wall time")
        trace = tmp_path / "trace.json"
        profiled = session.profile(Case(20, 32, 1, 43214), str(trace))
    assert profiled.status == "pass", profiled.message
    assert any(e.get("name") == "custom_kernel" for e in json.loads(trace.read_text())["traceEvents"])


@cuda_only
@pytest.mark.parametrize("entry, status, message", [
    ("illegal_access", "fail", "illegal memory access"),
    ("out_of_memory", "fail", "OutOfMemoryError"),
    ("gpu_hang", "timeout", "timed out after 10 s"),
])
def test_cuda_fault_fails_the_case_and_the_next_case_runs(entry, status, message):
    with Session(GPU_FAULTS, "cuda", timeout_s=10, entry=entry) as session:
        bad = session.test(POISON)
        good = session.test(GOOD)
    print(f"\n{entry}: {bad.status}: {bad.message}")
    assert bad.status == status and message in bad.message
    assert good.status == "pass", good.message
    assert not any(is_running(pid) for pid in session.child_pids)


@cuda_only
def test_cuda_work_left_on_another_stream_is_timed():
    case = Case(20, 32, 1, 43214)
    with Session(GPU_FAULTS, "cuda", timeout_s=120, entry="side_stream_work") as session:
        result = session.benchmark(case, budget_s=10, max_repeats=5)
    assert result.status == "pass", result.message
    print(f"\nside stream: mean {result.stats.mean / 1e3:.1f} us, flags {result.flags}")
    assert result.stats.mean > 2e6  # ~5 ms of side-stream work per call is inside the time


@cuda_only
def test_cuda_our_submission_passes_with_no_flag():
    submission = Path(__file__).resolve().parent.parent / "submission.py"
    with Session(submission, "cuda", timeout_s=120) as session:
        tested = session.test(Case(16, 512, 2, 32523))
        timed = session.benchmark(Case(60, 1024, 2, 75342), budget_s=10, max_repeats=20)
    print(f"\nsubmission.py: {tested.status} {tested.message}\n"
          f"  {timed.status} {timed.message} {timed.stats}")
    assert tested.status == "pass" and timed.status == "pass"
    assert tested.flags == [] and timed.flags == []


def test_patching_the_child_class_after_import_changes_nothing():
    with Session(FIXTURES / "patches_child_class.py", "cpu", timeout_s=30) as session:
        result = session.benchmark(SMALL, budget_s=10, max_repeats=3)
    assert result.status == "pass", result.message
    assert result.stats.best > 1000  # honest times: a call takes microseconds, not a nanosecond


def test_timing_reply_reads_the_late_time_and_refuses_impossible_ones():
    assert timing_reply({"event_ns": 5e3, "host_ns": 9e3}) == (5e3, 9e3, 0.0)  # no late time: none charged
    assert timing_reply({"event_ns": 5e3, "host_ns": 9e3, "late_ns": 2e3}) == (5e3, 9e3, 2e3)
    for bad in ({"event_ns": 5e3, "host_ns": 9e3, "late_ns": 6e3},  # more late time than the whole repeat
                {"event_ns": 5e3, "host_ns": 9e3, "late_ns": -1.0}, {"event_ns": float("nan"), "host_ns": 1.0},
                {"event_ns": 1.0}, [1.0, 2.0], None):
        with pytest.raises(CaseFault, match="timing reply was malformed"):
            timing_reply(bad)


def test_forged_timing_reply_is_flagged_by_the_parent_round_trip():
    with Session(FIXTURES / "forges_timing.py", "cpu", timeout_s=60) as session:
        result = session.benchmark(GOOD, budget_s=10, max_repeats=3)
    assert result.stats.mean < 1000  # the forgery got through the child...
    assert "clock-skew" in result.flags  # ...but the parent saw each repeat take a second


@pytest.mark.parametrize("entry", ["garbage", "pickle_bomb"])
def test_bytes_written_into_the_pipe_fail_the_case_and_run_nothing(entry, tmp_path, monkeypatch):
    marker = tmp_path / "unpickled"
    monkeypatch.setenv("RUNNER_TEST_MARKER", str(marker))
    with Session(FIXTURES / "writes_to_pipe.py", "cpu", timeout_s=20, entry=entry) as session:
        bad = session.test(GOOD)
        after = session.test(GOOD)  # a fresh child; the same cheat garbles this reply too
    assert bad.status == "fail" and "the child's reply was garbled" in bad.message, bad.message
    assert after.status == "fail" and bad.wall_s < 20
    assert not marker.exists()  # the parent never unpickles what the child sends


def test_work_moved_after_the_clock_is_flagged_by_the_childs_cpu_time():
    with Session(FIXTURES / "late_work.py", "cpu", timeout_s=60) as session:
        result = session.benchmark(GOOD, budget_s=10, max_repeats=3)
    assert result.status == "pass", result.message  # the outputs are right...
    assert "clock-skew" in result.flags  # ...but the child used far more CPU than its clock admits
    reported_ns = sum(event_ns for event_ns, _ in session.last_repeat_times)
    assert session.last_child_cpu_ns > 5 * reported_ns


def test_child_cannot_open_the_parents_descriptors(tmp_path, monkeypatch):
    with open(tmp_path / "protocol.txt", "w") as protocol:
        monkeypatch.setenv("RUNNER_TEST_FD", str(protocol.fileno()))
        with Session(FAULTS, "cpu", timeout_s=30, entry="opens_parent_descriptor") as session:
            result = session.test(GOOD)
    assert "parent descriptor denied" in result.message, result.message
    assert (tmp_path / "protocol.txt").read_text() == ""
