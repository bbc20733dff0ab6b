"""The parent side of isolation: a ``Session`` runs one submission in a spawned child process.

The parent builds every input with ``reference.generate_input``, keeps its own copy, hands the child a
separate buffer (shared memory on CPU, CUDA IPC on GPU) plus output buffers it owns, and checks what the
child wrote with ``reference.check_details``. The submission is never imported here. Any fault (an
exception, a malformed output, a CUDA error, a hang, the child dying) becomes a failed ``CaseResult`` and
the child is replaced for the next case.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field
from multiprocessing.connection import wait as wait_for
from pathlib import Path
from typing import Callable

import torch
import torch.multiprocessing

import reference
from eval import child as child_module
from eval.gates import fast_gates
from eval.prctl import make_undumpable
from eval.specs import Case
from eval.timing import (Stats, compute_stats, cpu_time_exceeds_clock, is_clock_skew, is_implausibly_fast,
                         make_l2_fill, should_stop)

__all__ = ["Session", "CaseResult", "Stats"]

BENCH_INPUT_BYTES = 256 * 1024 * 1024  # count = clamp(this / input bytes, 1, MAX_BENCH_INPUTS)
MAX_BENCH_INPUTS = 50
BENCH_SEED_STEP = 42  # the contest adds this to the seed before generating each benchmark input
SLOT_ALIGN_FLOATS = 128  # each input starts on a 512-byte boundary, as a separate allocation would
CONFIRM_ABOVE = 0.5  # a fast-check ratio above this is re-checked by reference.check_details
STARTUP_GRACE_S = 60.0  # for the child to import torch, on top of the case timeout
CLOSE_GRACE_S = 2.0
SHM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else None  # None: the default temporary directory
INPUT_MODIFIED = "submission modified its input"
# After the float64 re-check of a pass (``fast_gates``), the parent leaves the GPU idle for this many times
# as long before the next timed repeat. The re-check runs the float64 tensor cores near the power limit; a
# repeat timed right after it runs slower and noisier (n4096 on an H200: +3 % and 2-3 % spread; idle twice
# the re-check's time: as fast as with no re-check, 0.1 %; docs/perf.md, "Evaluator spread").
COOL_DOWN_RATIO = 2.0


@dataclass
class CaseResult:
    case: Case
    kind: str  # "test" | "benchmark" | "profile"
    status: str  # "pass" | "fail" | "timeout"
    message: str  # check message, or one-line fault reason
    stats: Stats | None = None  # benchmark only, ns per call
    factor_margin: float | None = None  # worst scaled factor residual / its gate (< 1 passes)
    orth_margin: float | None = None  # same for orthogonality
    flags: list[str] = field(default_factory=list)  # integrity flags: "input-modified", "clock-skew"
    wall_s: float = 0.0
    # Where this evaluator is stricter than the contest's eval.py and that changed the outcome: why,
    # and the verdict the contest would give ("pass"/"fail"; None: it cannot be told from this run).
    stricter: str = ""
    contest_status: str | None = None
    # Benchmark only: timed repeats charged with device time after their end event (work left running on
    # another stream; the contest's eval.py does not charge it), and that time per call, over all repeats.
    late_repeats: int = 0
    late_ns: float = 0.0
    times_ns: list[float] = field(default_factory=list)  # benchmark only: per call, each timed repeat in order

    def contest_verdict(self) -> str | None:
        """The contest's eval.py's verdict on this case: the same as ours unless ``stricter`` says otherwise."""
        return self.contest_status if self.stricter else self.status


class CaseFault(Exception):
    """A fault that ends the case: ``status`` is "fail" or "timeout", ``reason`` one line."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class _Child:
    process: object
    conn: object
    started: float
    loaded: bool = False
    pending: bytearray = field(default_factory=bytearray)  # reply bytes read but not yet parsed


class ProtocolError(Exception):
    """The child's reply stream is not what ``eval.child.reply`` writes."""


REPLY_STATUSES = ("ready", "loaded", "import-error", "ok", "fault")
MAX_REPLY_BYTES = 64 * 1024


def take_reply(pending: bytearray):
    """Remove and return the first complete reply in ``pending`` (``[status, payload]``), or None.

    Replies are a 4-byte big-endian length and that many bytes of JSON. Anything else raises
    ProtocolError: a submission may write to the pipe, and nothing it writes is unpickled or waited on
    past the deadline.
    """
    if len(pending) < 4:
        return None
    size = int.from_bytes(pending[:4], "big", signed=True)
    if not 0 < size <= MAX_REPLY_BYTES:
        raise ProtocolError(f"bad reply length {size}")
    if len(pending) < 4 + size:
        return None
    frame = bytes(pending[4:4 + size])
    del pending[:4 + size]
    try:
        message = json.loads(frame.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError("reply is not JSON") from None
    if not (isinstance(message, list) and len(message) == 2 and message[0] in REPLY_STATUSES):
        raise ProtocolError("reply is not [status, payload]")
    return message


def timing_reply(payload) -> tuple[float, float, float]:
    """``(event_ns, host_ns, late_ns)`` from a timed repeat's reply: finite times ≥ 0, the late time (device
    time after the end event, already inside ``event_ns``) at most the event time; absent means 0."""
    try:
        times = float(payload["event_ns"]), float(payload["host_ns"]), float(payload.get("late_ns", 0.0))
    except (TypeError, KeyError, ValueError, AttributeError):
        times = None
    if times is None or not all(math.isfinite(t) and t >= 0 for t in times) or times[2] > times[0]:
        raise CaseFault("fail", f"the child's timing reply was malformed: {str(payload)[:80]}")
    return times


def process_cpu_ns(pid: int) -> float | None:
    """CPU time the kernel has charged to process ``pid`` (all its threads, live or finished), in ns.

    The larger of two readings: the per-thread scheduler counters (ns resolution, live threads only)
    and utime + stime (clock ticks, includes threads that already ended). None if /proc is unreadable.
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks_ns = (int(fields[11]) + int(fields[12])) * 1e9 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    threads_ns = 0.0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                    threads_ns += int(f.read().split()[0])
    except OSError:
        pass
    return max(ticks_ns, threads_ns)


def bench_input_count(input_bytes: int, max_inputs: int | None = None) -> int:
    """How many distinct inputs a benchmark case uses: the contest's clamp(256 MiB / input bytes, 1, 50),
    at most ``max_inputs`` when given (a CPU run bounds it: each interpreted call takes seconds)."""
    count = max(1, min(MAX_BENCH_INPUTS, BENCH_INPUT_BYTES // max(1, input_bytes)))
    return count if max_inputs is None else max(1, min(count, max_inputs))


def bench_seeds(seed: int, count: int) -> list[int]:
    """The seeds of a benchmark case's inputs: the contest adds 42 before generating each one."""
    return [seed + BENCH_SEED_STEP * (i + 1) for i in range(count)]


def death_reason(process, wait_s: float = 5.0) -> str:
    """One line on how the child died, from its exit code.

    Polls without blocking: the exit sentinel is a pipe the child could have written into, so it
    being readable does not prove the child is gone (and ``join`` would then block in waitpid)."""
    end = time.perf_counter() + wait_s
    while process.is_alive() and time.perf_counter() < end:
        time.sleep(0.01)
    code = process.exitcode
    if code is None:
        return "child process stopped responding (its exit pipe was written to while it still ran)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"child process was killed by {name}"
    return f"child process exited with code {code}"


def flip_row_signs(current: torch.Tensor, generator: torch.Generator) -> None:
    """Multiply every matrix by a random ±1 diagonal matrix on the left (D·A), in place.

    Exact in floating point; keeps conditioning, zero pattern and scaling. At least one row of every
    matrix is flipped, so each matrix changes.
    """
    *lead, n, _ = current.shape
    signs = torch.randint(0, 2, (*lead, n, 1), generator=generator, device=current.device)
    forced = torch.randint(0, n, (*lead, 1, 1), generator=generator, device=current.device)
    signs.scatter_(-2, forced, 0)
    current.mul_(signs.to(current.dtype).mul_(2).sub_(1))


@contextlib.contextmanager
def _child_environment(device: torch.device):
    """The environment the child starts with: no protocol descriptor or seed; Triton's interpreter on CPU."""
    changes = {name: None for name in child_module.REMOVED_ENV}
    if device.type == "cpu":
        changes["TRITON_INTERPRET"] = "1"
    saved = {name: os.environ.get(name) for name in changes}
    try:
        for name, value in changes.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _single_thread(device: torch.device):
    """On CPU, run the parent's checks on one thread: small checks are many times faster without
    thread hand-offs on a busy machine, and idle worker threads do not compete with the timed child."""
    if device.type != "cpu":
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def _without_main_module():
    """Hide the parent's ``__main__`` while spawning, so the child does not re-run the parent's script."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


class Session:
    """Runs cases of one submission, one live child at a time; use as a context manager."""

    def __init__(self, submission: str | Path, device: str, *, timeout_s: float,
                 run_limit_s: float | None = None, entry: str = "custom_kernel"):
        """``timeout_s`` limits each case (after the child's start-up grace); ``run_limit_s``, when given,
        limits everything from now on, the child's start and import included, as the contest limits a
        whole run of one mode: once it is used up, every later case is a timeout without running."""
        self.submission = str(Path(submission).resolve())
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.timeout_s = float(timeout_s)
        self.run_limit_s = run_limit_s
        self.run_deadline = time.perf_counter() + run_limit_s if run_limit_s is not None else None
        self.entry = entry
        self.child_pids: list[int] = []  # every child this session started, for inspection
        self.defence_s = 0.0  # parent time spent on sign flips and re-checks of timed outputs
        self.bench_wall_s = 0.0  # wall time of the timed phases those defences belong to
        self.last_repeat_times: list[tuple[float, float]] = []  # (event ns, host ns) per timed repeat
        self.last_child_cpu_ns = 0.0  # the child's CPU time during the last benchmark's timed requests
        if self.device.type == "cpu":  # not yet tried with CUDA IPC, which may rely on ptrace access
            make_undumpable()  # the child cannot open /proc/<our pid>/fd/*
        self._context = torch.multiprocessing.get_context("spawn")
        self._child: _Child | None = None
        self._files: dict[int, child_module.SharedFile] = {}  # CPU buffers not yet sent, by data_ptr
        self._flip_generator = torch.Generator(device=self.device)
        self._flip_generator.manual_seed(int.from_bytes(os.urandom(8), "little") & (2 ** 63 - 1))
        self._flush_l2 = None  # the parent's own L2 flush (made at the first benchmark: 256 MiB on CUDA)

    # ---- lifetime -----------------------------------------------------------------------------

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the child and anything it started."""
        child, self._child = self._child, None
        if child is None:
            return
        with contextlib.suppress(OSError, ValueError):
            child.conn.send(("exit",))
        death_reason(child.process, wait_s=CLOSE_GRACE_S)
        self._kill(child)
        self._unlink(list(self._files.values()))
        self._files.clear()

    def _kill(self, child: _Child) -> None:
        pid = child.process.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # the child leads its own process group
        with contextlib.suppress(OSError, ValueError, AttributeError):
            child.process.kill()
        death_reason(child.process, wait_s=10)  # reaps it without trusting the exit pipe
        with contextlib.suppress(OSError):
            child.conn.close()
        if self.device.type == "cuda":
            torch.cuda.ipc_collect()

    def _discard_child(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            self._kill(child)

    def _start_child(self) -> _Child:
        parent_conn, child_conn = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=child_module.main, name="eval-child", daemon=True,
            args=(child_conn, self.submission, self.entry, str(self.device)))
        with _child_environment(self.device), _without_main_module():
            process.start()
        child_conn.close()
        self.child_pids.append(process.pid)
        return _Child(process, parent_conn, time.perf_counter())

    # ---- talking to the child -----------------------------------------------------------------

    def _limit(self, start: float, limit_s: float) -> tuple[float, str]:
        """The earlier of ``start + limit_s`` and the run's deadline, with what a timeout then says."""
        if self.run_deadline is not None and self.run_deadline <= start + limit_s:
            return self.run_deadline, f"timed out: the run's {self.run_limit_s:g} s limit (import included) was reached"
        return start + limit_s, f"timed out after {limit_s:g} s"

    def _receive(self, child: _Child, limit: tuple[float, str], what: str):
        """The child's next reply, or a CaseFault for a timeout, a dead child or a garbled reply."""
        deadline, limit_text = limit
        while True:
            try:
                message = take_reply(child.pending)
            except ProtocolError as exc:
                self._discard_child()
                raise CaseFault("fail", f"the child's reply was garbled ({exc}) during {what}: something "
                                        f"in the child wrote to the evaluator's pipe") from None
            if message is not None:
                return message
            remaining = deadline - time.perf_counter()
            ready = wait_for([child.conn, child.process.sentinel], timeout=max(0.0, remaining))
            if child.conn in ready or (ready and child.conn.poll(0)):
                try:
                    data = os.read(child.conn.fileno(), 1 << 16)
                except OSError:
                    data = b""
                if data:
                    child.pending += data
                    continue
            if ready:  # end of the pipe, or only the sentinel: the child is gone
                reason = death_reason(child.process)
                self._discard_child()
                raise CaseFault("fail", f"{reason} during {what}")
            if time.perf_counter() >= deadline:
                self._discard_child()
                raise CaseFault("timeout", f"{limit_text} during {what} (child process killed)")

    def _ready_child(self) -> _Child:
        """A child with the submission imported; starts one if needed.

        Starting is not charged to the case: the child gets STARTUP_GRACE_S plus the case timeout to
        import torch and the submission."""
        if self._child is None:
            self._run_time_left()
            self._child = self._start_child()
        child = self._child
        startup = self._limit(child.started, STARTUP_GRACE_S + self.timeout_s)
        while not child.loaded:
            message = self._receive(child, startup, "the submission's import")
            if message[0] == "import-error":
                self._discard_child()
                raise CaseFault("fail", message[1])
            if message[0] == "loaded":
                child.loaded = True
        return child

    def _run_time_left(self) -> None:
        if self.run_deadline is not None and time.perf_counter() >= self.run_deadline:
            raise CaseFault("timeout", f"not run: the run's {self.run_limit_s:g} s limit (import included) "
                                       f"was used up")

    def _case_deadline(self) -> tuple[float, str]:
        """Start (or reuse) the child, then give the case its limit from now."""
        self._run_time_left()
        self._ready_child()
        return self._limit(time.perf_counter(), self.timeout_s)

    def _request(self, deadline: tuple[float, str], what: str, command: str, *args):
        """Send one request to the child and return its reply's payload; faults raise CaseFault."""
        child = self._ready_child()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the parent's writes to shared buffers are done
        wire = [self._to_wire(a) for a in args]
        try:
            try:
                child.conn.send((command, *wire))
            except (OSError, ValueError):
                reason = death_reason(child.process)
                self._discard_child()
                raise CaseFault("fail", f"{reason} before {what}") from None
            status, payload = self._receive(child, deadline, what)
        finally:
            self._unlink(wire)  # mapped by the child by now (or never needed): the names can go
        if status == "fault":
            self._discard_child()  # the child exits after a fault; a fresh one serves the next case
            raise CaseFault("fail", payload)
        return payload

    # ---- helpers ------------------------------------------------------------------------------

    def _input(self, case: Case, seed: int) -> torch.Tensor:
        return reference.generate_input(case.batch, case.n, case.cond, seed, case=case.case,
                                        device=self.device)

    def _shared(self, source: torch.Tensor | None = None, shape: tuple | None = None) -> torch.Tensor:
        """A float32 buffer the child can map: a copy of ``source``, or NaN of ``shape``.

        On CUDA it is ordinary device memory (sent by CUDA IPC); on CPU a file in /dev/shm, sent by name.
        """
        shape = tuple(source.shape) if source is not None else tuple(shape)
        if self.device.type == "cuda":
            buffer = torch.empty(shape, dtype=torch.float32, device=self.device)
        else:
            fd, path = tempfile.mkstemp(prefix=f"qr-eval-{os.getpid()}-", suffix=".f32", dir=SHM_DIR)
            try:
                os.ftruncate(fd, 4 * math.prod(shape))
            finally:
                os.close(fd)
            buffer = torch.from_file(path, shared=True, size=math.prod(shape), dtype=torch.float32).view(shape)
            self._files[buffer.data_ptr()] = child_module.SharedFile(path, shape)
        if source is not None:
            buffer.copy_(source)
        else:
            buffer.fill_(math.nan)
        return buffer

    def _to_wire(self, arg):
        """A request argument as sent: CPU tensors become the SharedFile they were created as."""
        if isinstance(arg, list):
            return [self._to_wire(a) for a in arg]
        if isinstance(arg, torch.Tensor) and arg.device.type == "cpu":
            shared = self._files.pop(arg.data_ptr(), None)
            if shared is None:
                raise ValueError("internal error: a CPU tensor for the child was not made by _shared")
            return shared
        return arg

    @staticmethod
    def _unlink(wire) -> None:
        for arg in wire:
            if isinstance(arg, list):
                Session._unlink(arg)
            elif isinstance(arg, child_module.SharedFile):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(arg.path)

    def _empty_outputs(self, lead: tuple, n: int):
        """Output buffers owned by the parent, NaN until the child writes them."""
        return self._shared(shape=(*lead, n, n)), self._shared(shape=(*lead, n))

    # ---- modes --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _case_files(self):
        """Remove every shared file a case made once it ends (sent ones are already unlinked)."""
        try:
            yield
        finally:
            self._unlink(list(self._files.values()))
            self._files.clear()

    def test(self, case: Case) -> CaseResult:
        """One call on a fresh input; the output is checked against the parent's untouched copy."""
        with self._case_files():
            return self._test(case)

    def profile(self, case: Case, trace_path: str) -> CaseResult:
        """One warm-up call, then one call under torch.profiler (NVTX ranges on GPU); saves a chrome trace."""
        with self._case_files():
            return self._profile(case, trace_path)

    def benchmark(self, case: Case, *, budget_s: float, max_repeats: int, max_inputs: int | None = None,
                  pass_budget_s: float | None = None,
                  on_progress: Callable[[int, int], None] | None = None) -> CaseResult:
        """Time ``count`` calls per repeat on fresh, sign-flipped inputs; every output is checked.

        ``count`` is the contest's, at most ``max_inputs``; with ``pass_budget_s`` (a CPU run) one call
        is timed first, by the parent, and ``count`` cut so that a pass takes about that long (at
        least one input): fast calls keep all their inputs, interpreted Triton kernels get one."""
        with self._case_files():
            return self._benchmark(case, budget_s, max_repeats, max_inputs, pass_budget_s, on_progress)

    def _test(self, case: Case) -> CaseResult:
        start = time.perf_counter()
        A = self._input(case, case.seed)
        A_child = self._shared(A)
        H, tau = self._empty_outputs((case.batch,), case.n)
        try:
            deadline = self._case_deadline()
            self._request(deadline, "the call", "call", A_child, H, tau)
        except CaseFault as fault:
            return fault_result(case, "test", fault, start)
        return self._verdict(case, "test", A, A_child, H.clone(), tau.clone(), start)

    def _profile(self, case: Case, trace_path: str) -> CaseResult:
        start = time.perf_counter()
        trace_path = str(Path(trace_path).resolve())
        Path(trace_path).parent.mkdir(parents=True, exist_ok=True)
        A = self._input(case, case.seed)
        A_child = self._shared(A)
        H, tau = self._empty_outputs((case.batch,), case.n)
        try:
            deadline = self._case_deadline()
            self._request(deadline, "the profiled call", "profile", A_child, H, tau, trace_path)
        except CaseFault as fault:
            return fault_result(case, "profile", fault, start)
        result = self._verdict(case, "profile", A, A_child, H.clone(), tau.clone(), start)
        if result.status == "pass":
            result.message += f"; trace saved to {trace_path}"
        return result

    def _verdict(self, case, kind, A, A_child, H, tau, start) -> CaseResult:
        with _single_thread(self.device):
            check = reference.check_details(A, (H, tau))
        result = CaseResult(case, kind, "pass" if check.ok else "fail", check.message,
                            factor_margin=check.factor_margin, orth_margin=check.orth_margin)
        if not torch.equal(A_child, A):
            result.flags.append("input-modified")
            result.status = "fail"
            verdict = "output check passed" if check.ok else "output check failed"
            result.message = f"{INPUT_MODIFIED} ({verdict}: {check.message})"
            result.stricter = "input-modified: the contest's eval.py does not look at the input after the call"
            result.contest_status = "pass" if check.ok else "fail"
        result.wall_s = time.perf_counter() - start
        return result

    def _probe_count(self, case: Case, count: int, pass_budget_s: float) -> int:
        """How many inputs fit in ``pass_budget_s``, by the parent's clock on one untimed call."""
        A = self._shared(self._input(case, bench_seeds(case.seed, 1)[0]))
        H, tau = self._empty_outputs((case.batch,), case.n)
        deadline = self._case_deadline()  # starts the child first: its start-up is not the call's time
        sent = time.perf_counter()
        self._request(deadline, "the call that sizes the benchmark", "call", A, H, tau)
        return max(1, min(count, int(pass_budget_s / max(time.perf_counter() - sent, 1e-9))))

    def _benchmark(self, case: Case, budget_s: float, max_repeats: int, max_inputs: int | None,
                   pass_budget_s: float | None, on_progress: Callable[[int, int], None] | None) -> CaseResult:
        start = time.perf_counter()
        numel = case.batch * case.n * case.n
        count = bench_input_count(4 * numel, max_inputs)
        if pass_budget_s is not None and count > 1:
            try:
                count = self._probe_count(case, count, pass_budget_s)
            except CaseFault as fault:
                return fault_result(case, "benchmark", fault, start)
        seeds = bench_seeds(case.seed, count)
        current = torch.stack([self._input(case, s) for s in seeds])  # the parent's copy: [count, batch, n, n]
        slot = -(-numel // SLOT_ALIGN_FLOATS) * SLOT_ALIGN_FLOATS
        slab = self._shared(shape=(count, slot))  # the child's inputs, one row each
        H_all, tau_all = self._empty_outputs((count, case.batch), case.n)
        bench = _BenchState(case, current, slab[:, :numel].view(current.shape), H_all, tau_all, seeds)
        bench.write_inputs()
        if self._flush_l2 is None:
            self._flush_l2 = make_l2_fill(self.device)

        def fail(status, message, stricter=""):
            if not stricter and child_module.STRICTER_MARK in message:
                stricter = message  # a form the contest accepts (see fault_result)
            return CaseResult(case, "benchmark", status, message, factor_margin=bench.factor_margin,
                              orth_margin=bench.orth_margin, flags=bench.flags,
                              wall_s=time.perf_counter() - start, stricter=stricter)

        try:
            deadline = self._case_deadline()
            self._request(deadline, "benchmark setup", "bench-setup", slab, case.batch, case.n, H_all, tau_all)
            self._request(deadline, "the untimed first pass", "bench-run", False)
            with _single_thread(self.device):
                problem = bench.check("first pass")
            if problem:
                return fail("fail", problem)
            durations = []
            late = []  # per repeat and call, the part of durations that is device time after the end event
            child_cpu_ns = 0.0
            self.last_repeat_times = []
            timed_start = time.perf_counter()
            while True:
                t0 = time.perf_counter()
                with _single_thread(self.device):
                    bench.refresh_inputs(self._flip_generator)
                self._cool_down(bench.gates_s)
                self._flush_l2()  # out of the child's reach; _request waits for it before sending
                self.defence_s += time.perf_counter() - t0
                pid = self._child.process.pid if self._child is not None else None
                cpu_before = process_cpu_ns(pid) if pid else None
                sent = time.perf_counter()
                payload = self._request(deadline, f"timed repeat {len(durations) + 1}", "bench-run", True)
                round_trip_ns = (time.perf_counter() - sent) * 1e9
                cpu_after = process_cpu_ns(pid) if cpu_before is not None else None
                if cpu_after is not None:
                    child_cpu_ns += cpu_after - cpu_before
                event_ns, host_ns, late_ns = timing_reply(payload)
                durations.append(event_ns / count)
                late.append(late_ns / count)
                self.last_repeat_times.append((event_ns, host_ns))
                skewed = is_clock_skew(event_ns, host_ns) or is_implausibly_fast(event_ns, round_trip_ns)
                if skewed and "clock-skew" not in bench.flags:
                    bench.flags.append("clock-skew")
                t0 = time.perf_counter()
                with _single_thread(self.device):
                    problem = bench.check(f"timed repeat {len(durations)}")
                self.defence_s += time.perf_counter() - t0
                if problem:
                    return fail("fail", problem, "failed on fresh inputs: the contest's eval.py times the "
                                                 "same inputs every repeat (as the submission left them)")
                if on_progress is not None:
                    on_progress(len(durations), max_repeats)
                if should_stop(durations, time.perf_counter() - timed_start, budget_s, max_repeats):
                    break
            self.bench_wall_s += time.perf_counter() - timed_start
            reported_ns = sum(event_ns for event_ns, _ in self.last_repeat_times)
            if (cpu_time_exceeds_clock(child_cpu_ns, reported_ns, len(durations), len(os.sched_getaffinity(0)))
                    and "clock-skew" not in bench.flags):
                bench.flags.append("clock-skew")
            self.last_child_cpu_ns = child_cpu_ns
            self._request(deadline, "benchmark cleanup", "bench-release")
        except CaseFault as fault:
            return fail(fault.status, fault.reason)
        stats = compute_stats(durations)
        if bench.modified:
            return fail("fail", f"{INPUT_MODIFIED} (outputs passed every check)",
                        "input-modified: the contest's eval.py does not look at the input after the call")
        message = f"ok: {count} inputs x {stats.runs} timed repeats, every output checked"
        late_repeats = sum(1 for t in late if t > 0)
        if late_repeats:
            message += (f"; device time after the end event charged on {late_repeats} of them "
                        f"({sum(late) / len(late) / 1e3:.3g} µs per call on average)")
        result = CaseResult(case, "benchmark", "pass", message, stats=stats,
                            factor_margin=bench.factor_margin, orth_margin=bench.orth_margin,
                            flags=bench.flags, wall_s=time.perf_counter() - start,
                            late_repeats=late_repeats, late_ns=sum(late) / len(late), times_ns=list(durations))
        if result.flags:
            result.stricter = f"flagged {', '.join(result.flags)}: the contest's eval.py has no such check"
            result.contest_status = "pass"
        return result

    def _cool_down(self, gates_s: float) -> None:
        """Wait for the parent's queued GPU work, then leave the GPU idle COOL_DOWN_RATIO × ``gates_s`` (the
        last re-check's float64 products; CUDA only)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            time.sleep(COOL_DOWN_RATIO * gates_s)

    def defence_fraction(self) -> float:
        """Share of the timed phases' wall time spent on sign flips and re-checks."""
        return self.defence_s / self.bench_wall_s if self.bench_wall_s > 0 else 0.0


def fault_result(case: Case, kind: str, fault: CaseFault, start: float) -> CaseResult:
    """The failed case a fault makes; a form the contest accepts but this evaluator refuses says so."""
    stricter = fault.reason if child_module.STRICTER_MARK in fault.reason else ""
    return CaseResult(case, kind, fault.status, fault.reason, wall_s=time.perf_counter() - start, stricter=stricter)


class _BenchState:
    """The parent's side of one benchmark case: its own inputs, the child's buffers, the checks."""

    def __init__(self, case, current, inputs, H_all, tau_all, seeds):
        self.case = case
        self.current = current  # [count, batch, n, n]: what every input must hold
        self.inputs = inputs  # the child's inputs, one view [count, batch, n, n] of its buffer
        self.H_all = H_all
        self.tau_all = tau_all
        self.H_seen = torch.empty_like(H_all)  # snapshots: the child cannot change what is being checked
        self.tau_seen = torch.empty_like(tau_all)
        self.seeds = seeds
        self.flags: list[str] = []
        self.modified = False
        self.factor_margin: float | None = None
        self.orth_margin: float | None = None
        self.gates_s = 0.0  # wall time of the last check's fast_gates, read back included

    def write_inputs(self) -> None:
        self.inputs.copy_(self.current)

    def refresh_inputs(self, generator: torch.Generator) -> None:
        """Flip signs of random rows (D·A) and write every input afresh, undoing any mutation."""
        flip_row_signs(self.current, generator)
        self.write_inputs()

    def check(self, stage: str) -> str | None:
        """Check all outputs of a pass at once; the failing input's message, or None.

        ``fast_gates`` on every matrix (one read back to the host); any input with a ratio above
        ``CONFIRM_ABOVE`` (or a non-finite output) is checked again by ``reference.check_details``,
        the contest's check, whose verdict is the one that counts. Also notes whether the child
        changed its inputs.
        """
        count, batch, n = self.current.shape[0], self.current.shape[1], self.current.shape[-1]
        started = time.perf_counter()
        self.H_seen.copy_(self.H_all)
        self.tau_seen.copy_(self.tau_all)
        try:
            factor, orth = fast_gates(self.current.reshape(count * batch, n, n),
                                      self.H_seen.reshape(count * batch, n, n), self.tau_seen.reshape(count * batch, n))
            per_input = torch.stack([factor.view(count, batch).amax(1), orth.view(count, batch).amax(1)])
        except RuntimeError:  # e.g. out of device memory for the float64 temporaries: the contest's check
            per_input = torch.full((2, count), math.inf, dtype=torch.float64, device=self.current.device)
        changed = (self.inputs != self.current).any().to(torch.float64).view(1)
        summary = torch.cat([per_input.flatten(), changed]).tolist()  # the one wait for the device
        self.gates_s = time.perf_counter() - started
        factors, orths, changed = summary[:count], summary[count:2 * count], summary[-1]
        if changed and not self.modified:
            self.modified = True
            self.flags.append("input-modified")
        for i in range(count):
            if max(factors[i], orths[i]) <= CONFIRM_ABOVE:
                self._note_margins(factors[i], orths[i])
                continue
            exact = reference.check_details(self.current[i], (self.H_seen[i], self.tau_seen[i]))
            self._note_margins(exact.factor_margin, exact.orth_margin)
            if not exact.ok:
                return f"{stage}, input {i} (seed {self.seeds[i]}): {exact.message}"
        return None

    def _note_margins(self, factor_margin: float | None, orth_margin: float | None) -> None:
        if factor_margin is not None:
            self.factor_margin = max(self.factor_margin or 0.0, factor_margin)
        if orth_margin is not None:
            self.orth_margin = max(self.orth_margin or 0.0, orth_margin)
