"""The child process: the only place a submission is imported and run.

``main`` is the target of a ``spawn``ed process (see ``eval.runner.Session``). It binds the clocks, then
imports the submission and serves the parent's requests over a pipe. Tensors come from the parent
(shared memory on CPU, CUDA IPC on GPU); the child writes the submission's outputs into buffers the
parent owns and never sees the checker or the parent's pristine inputs.

Replies are JSON, never pickles (the parent must not unpickle anything a submission could have
written): ``["ok", payload]`` or ``["fault", one-line reason]``; after a fault the child exits, since a
failed call (CUDA errors especially) may leave the process unusable.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import math
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

import reference
from eval import timing
from eval.prctl import die_with_parent

REMOVED_ENV = ("POPCORN_FD", "POPCORN_SEED")
STRICTER_MARK = "(the contest's checker accepts it; this evaluator does not)"
MAX_REASON_CHARS = 300


@dataclass(frozen=True)
class SharedFile:
    """A float32 CPU buffer the parent shares as a file in /dev/shm (mapped, not copied).

    On CPU the parent sends these instead of tensors: torch's own CPU sharing passes descriptors through
    a listener in the parent that unpickles what connecting processes send, which a submission could use.
    """
    path: str
    shape: tuple

    def open(self) -> torch.Tensor:
        size = math.prod(self.shape)
        tensor = torch.from_file(self.path, shared=True, size=size, dtype=torch.float32).view(self.shape)
        with contextlib.suppress(OSError):
            os.unlink(self.path)  # mapped now: the name is not needed (the parent unlinks it too)
        return tensor


def materialize(arg):
    """A request argument as the child uses it: shared files become tensors, lists are mapped."""
    if isinstance(arg, SharedFile):
        return arg.open()
    if isinstance(arg, list):
        return [materialize(a) for a in arg]
    return arg


def reply(conn, status: str, payload) -> None:
    """Send one reply to the parent: a length-prefixed JSON ``[status, payload]``."""
    conn.send_bytes(json.dumps([status, payload]).encode())


class Fault(Exception):
    """A submission fault, already phrased as a one-line reason."""


def one_line(text: str) -> str:
    line = " ".join(str(text).strip().splitlines()[:1]) if str(text).strip() else ""
    return line if len(line) <= MAX_REASON_CHARS else line[:MAX_REASON_CHARS - 3] + "..."


def describe_exception(exc: BaseException, submission_path: str) -> str:
    """``Type: first line of the message (file.py:line)``, pointing at the submission's innermost frame."""
    text = f"{type(exc).__name__}: {one_line(exc)}" if str(exc).strip() else type(exc).__name__
    where = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(frame.filename) == submission_path:
            where = f"{Path(frame.filename).name}:{frame.lineno}"
    return one_line(f"{text} ({where})" if where else text)


def load_entry(submission_path: str, entry: str):
    """Import the submission file as module ``submission`` and return its ``entry`` callable."""
    path = Path(submission_path)
    if not path.is_file():
        raise Fault(f"submission file not found: {submission_path}")
    sys.path.insert(0, str(path.parent))  # a submission may import modules next to it, as in the contest
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise Fault(f"SyntaxError in {path.name} line {exc.lineno}: {exc.msg}") from None
    except BaseException as exc:  # noqa: BLE001 - any import-time failure is the submission's fault
        raise Fault(f"import failed: {describe_exception(exc, str(path))}") from None
    fn = getattr(module, entry, None)
    if fn is None:
        raise Fault(f"{path.name} defines no '{entry}'")
    if not callable(fn):
        raise Fault(f"'{entry}' in {path.name} is not callable")
    return fn


def python_dispatch_problem(name: str, t, dispatch_keys, python_key) -> str | None:
    """Stricter than the contest: a tensor whose operations run Python (``__torch_dispatch__``) has no
    data of its own; reading it would run the submission's code after the clock stopped."""
    if dispatch_keys(t).has(python_key):
        return (f"{name} is a {type(t).__name__} with its own __torch_dispatch__: its data would be computed "
                f"when read, after the clock stopped {STRICTER_MARK}")
    return None


class Server:
    """Runs the submission on the parent's requests."""

    def __init__(self, submission_path: str, device: torch.device, clocks: timing.Clocks):
        self.fn = None  # set once the submission is imported, after everything here is bound
        self.path = submission_path
        self.device = device
        self.clocks = clocks
        # Bound before the submission runs, like the clocks: what reads its outputs never runs its code.
        self.copy = torch.Tensor.copy_
        self.output_problem = reference.output_problem
        self.as_plain = torch._C.TensorBase.as_subclass  # C level: no subclass method or property runs
        self.no_torch_function = torch._C.DisableTorchFunction
        self.no_torch_dispatch = torch._C._DisableTorchDispatch
        self.dispatch_keys = torch._C._dispatch_keys
        self.python_key = torch._C.DispatchKey.Python
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.stream = torch.cuda.current_stream(device)
            self.start_event = clocks.new_event()
            self.end_event = clocks.new_event()
            self.late_event = clocks.new_event()
        # The contest's own L2 fill before each timed repeat (the parent flushes L2 too, out of the
        # submission's reach; this fill keeps the contest's shape: the start event queued behind it).
        self.fill_l2 = timing.make_l2_fill(device)
        self.bench = None  # (inputs, H_all, tau_all) between bench-setup and bench-release
        self.previous = None  # the last pass's outputs, freed inside the next timed region as the contest does
        # Bound now, before the submission is imported, so patching this class later changes nothing.
        self.handlers = {"call": self.do_call, "bench-setup": self.do_bench_setup,
                         "bench-run": self.do_bench_run, "bench-release": self.do_bench_release,
                         "profile": self.do_profile}

    def call(self, A):
        try:
            return self.fn(A)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and friends are faults too
            raise Fault(describe_exception(exc, self.path)) from None

    def plain_outputs(self, out, batch: int, n: int, device):
        """``(H, tau)`` as plain tensors, read without running any of the submission's code, or a Fault.

        The contest's form rules (``reference.output_problem``; finiteness is the parent's check) plus
        one stricter rule: no tensor whose data is computed by Python when read."""
        kind = type(out)
        if not issubclass(kind, tuple) or tuple.__len__(out) != 2:
            length = f" of length {(tuple if issubclass(kind, tuple) else list).__len__(out)}" \
                if issubclass(kind, (tuple, list)) else ""
            raise Fault(f"custom_kernel returned a {kind.__name__}{length}, expected a tuple (H, tau)")
        plain = []
        with self.no_torch_function(), self.no_torch_dispatch():
            for name, item in zip(("H", "tau"), (tuple.__getitem__(out, 0), tuple.__getitem__(out, 1))):
                if not issubclass(type(item), torch.Tensor):
                    raise Fault(f"{name} must be a torch.Tensor, got {type(item).__name__}")
                problem = python_dispatch_problem(name, item, self.dispatch_keys, self.python_key)
                if problem:
                    raise Fault(problem)
                plain.append(self.as_plain(item, torch.Tensor))
        problem = self.output_problem(tuple(plain), batch, n, device, finite=False)
        if problem:
            raise Fault(problem)
        return plain

    def store(self, out, A, H_out, tau_out) -> None:
        H, tau = self.plain_outputs(out, A.shape[0], A.shape[-1], A.device)
        with torch.no_grad(), self.no_torch_function(), self.no_torch_dispatch():
            self.copy(H_out, H)
            self.copy(tau_out, tau)

    def sync(self) -> None:
        self.clocks.synchronize()

    def settle(self) -> None:
        """Wait for the submission's queued device work; a device error surfacing here is its fault."""
        try:
            self.clocks.synchronize()
        except BaseException as exc:  # noqa: BLE001 - e.g. an illegal memory access in its kernel
            raise Fault(describe_exception(exc, self.path)) from None

    # ---- requests -------------------------------------------------------------------------

    def do_call(self, A, H_out, tau_out):
        out = self.call(A)
        self.settle()
        self.store(out, A, H_out, tau_out)
        self.sync()
        return None

    def do_bench_setup(self, slab, batch: int, n: int, H_all, tau_all):
        """The case's inputs: one row of ``slab`` each (rows are 512-byte aligned, like separate allocations)."""
        numel = batch * n * n
        inputs = [row[:numel].view(batch, n, n) for row in slab]
        self.bench = (inputs, H_all, tau_all)
        self.previous = None
        return None

    def do_bench_run(self, timed: bool):
        """One pass over every input: untimed (the first pass), or timed in the contest's shape.

        Timed on CUDA, as the contest's eval.py: synchronize, the L2 fill, the start event (queued
        behind the fill), the calls, the previous pass's outputs freed, the end event on the same
        stream. Work still running on another stream when the end event completes is measured too
        (``late_ns``): the contest would not count it."""
        inputs, H_all, tau_all = self.bench
        clocks = self.clocks
        times = None
        if not timed:
            outs = [self.call(x) for x in inputs]
            self.settle()
        elif self.cuda:
            self.sync()
            self.fill_l2()
            host_start = clocks.perf_counter()
            clocks.event_record(self.start_event, self.stream)
            outs = [self.call(x) for x in inputs]
            self.previous = None
            clocks.event_record(self.end_event, self.stream)
            event_ms, late_ms = self.settle_timed()
            host_end = clocks.perf_counter()
            times = {"event_ns": (event_ms + late_ms) * 1e6, "host_ns": (host_end - host_start) * 1e9,
                     "late_ns": late_ms * 1e6}
        else:
            host_start = clocks.perf_counter()
            outs = [self.call(x) for x in inputs]
            self.previous = None
            host_end = clocks.perf_counter()
            elapsed_ns = (host_end - host_start) * 1e9
            times = {"event_ns": elapsed_ns, "host_ns": elapsed_ns, "late_ns": 0.0}
        for i, (out, x) in enumerate(zip(outs, inputs)):
            self.store(out, x, H_all[i], tau_all[i])
        self.previous = outs
        self.sync()
        return times

    def settle_timed(self) -> tuple[float, float]:
        """After the end event: ``(start→end ms, late ms)``. Late time is work the device still ran
        after the end event completed (another stream), measured only when the device-wide wait took
        longer than ``timing.LATE_ALLOWANCE_S``, so an honest run is charged nothing."""
        clocks = self.clocks
        try:
            clocks.event_synchronize(self.end_event)
            ended = clocks.perf_counter()
            clocks.synchronize()
            idle = clocks.perf_counter()
        except BaseException as exc:  # noqa: BLE001 - e.g. an illegal memory access in its kernel
            raise Fault(describe_exception(exc, self.path)) from None
        late_ms = 0.0
        if idle - ended > timing.LATE_ALLOWANCE_S:
            clocks.event_record(self.late_event, self.stream)
            clocks.event_synchronize(self.late_event)
            late_ms = clocks.event_elapsed_time(self.end_event, self.late_event)
        return clocks.event_elapsed_time(self.start_event, self.end_event), late_ms

    def do_bench_release(self):
        self.bench = None
        self.previous = None
        return None

    def do_profile(self, A, H_out, tau_out, trace_path: str):
        from torch.profiler import ProfilerActivity, profile, record_function

        self.call(A.clone())  # warm-up (compilation, autotuning) outside the trace
        self.settle()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        nvtx = torch.cuda.nvtx.range("custom_kernel") if self.cuda else contextlib.nullcontext()
        with profile(activities=activities) as prof:
            with nvtx, record_function("custom_kernel"):
                out = self.call(A)
                self.settle()
        prof.export_chrome_trace(trace_path)
        self.store(out, A, H_out, tau_out)
        self.sync()
        return None

    def serve(self, conn) -> None:
        handlers = self.handlers
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                return
            command, args = request[0], [materialize(a) for a in request[1:]]
            if command == "exit":
                os._exit(0)  # nothing to flush; skip the slow interpreter teardown
            try:
                payload = handlers[command](*args)
            except Fault as fault:
                reply(conn, "fault", str(fault))
                return
            except BaseException as exc:  # noqa: BLE001 - report, never hang the parent
                reply(conn, "fault", f"evaluator child error: {describe_exception(exc, self.path)}")
                return
            reply(conn, "ok", payload)


def drop_ptrace_capability() -> None:
    """Give up CAP_SYS_PTRACE (held when running as root), for this process and anything it execs.

    With the parent marked non-dumpable (``eval.prctl.make_undumpable``), a process without
    this capability cannot open ``/proc/<parent>/fd/*``: the submission cannot write into the
    evaluator's descriptors (its protocol file, its pipes). Best effort; Linux only.
    """
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, CAP_SYS_PTRACE = 24, 38, 19
        libc.prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0)
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]

        header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3
        if libc.capget(ctypes.byref(header), data) == 0:
            keep = ~(1 << CAP_SYS_PTRACE) & 0xFFFFFFFF
            data[0].effective &= keep
            data[0].permitted &= keep
            data[0].inheritable &= keep
            libc.capset(ctypes.byref(header), data)


def main(conn, submission_path: str, entry: str, device_name: str) -> None:
    """Entry point of the spawned child."""
    os.setpgrp()  # own process group, so the parent can kill anything the submission starts
    die_with_parent()
    device = torch.device(device_name)
    if device.type == "cpu":  # not yet tried with CUDA IPC, which may rely on it
        drop_ptrace_capability()
    for name in REMOVED_ENV:
        os.environ.pop(name, None)
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.cuda.init()
    clocks = timing.bind_clocks(device.type == "cuda")
    submission_path = os.path.abspath(submission_path)
    server = Server(submission_path, device, clocks)
    reply(conn, "ready", os.getpid())
    try:
        server.fn = load_entry(submission_path, entry)
    except Fault as fault:
        reply(conn, "import-error", str(fault))
        return
    reply(conn, "loaded", None)
    server.serve(conn)
