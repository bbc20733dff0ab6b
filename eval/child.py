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
import functools
import importlib.util
import json
import os
import sys
import math
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

from eval import timing

REMOVED_ENV = ("POPCORN_FD", "POPCORN_SEED")
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


def output_problem(out, shape: tuple, device: torch.device) -> str | None:
    """The reason ``out`` is not an ``(H, tau)`` pair of plain float32 tensors of the right shape."""
    if not isinstance(out, tuple) or len(out) != 2:
        got = f"a {type(out).__name__} of length {len(out)}" if isinstance(out, (tuple, list)) else \
            f"a {type(out).__name__}"
        return f"custom_kernel returned {got}, expected a tuple (H, tau)"
    batch, n = shape[0], shape[-1]
    for name, t, want in (("H", out[0], (batch, n, n)), ("tau", out[1], (batch, n))):
        if type(t) is not torch.Tensor:  # exact type: no lazy subclasses that compute on copy
            return f"{name} is a {type(t).__name__}, expected a torch.Tensor"
        if tuple(t.shape) != want:
            return f"{name} has shape {tuple(t.shape)}, expected {want}"
        if t.dtype != torch.float32:
            return f"{name} has dtype {t.dtype}, expected torch.float32"
        if t.device != device:
            return f"{name} is on {t.device}, expected {device}"
    return None


class Server:
    """Runs the submission on the parent's requests."""

    def __init__(self, submission_path: str, device: torch.device, clocks: timing.Clocks):
        self.fn = None  # set once the submission is imported, after everything here is bound
        self.path = submission_path
        self.device = device
        self.clocks = clocks
        self.copy = torch.Tensor.copy_  # bound before the submission ran, like the clocks
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.stream = torch.cuda.current_stream(device)
            self.start_event = clocks.new_event()
            self.end_event = clocks.new_event()
        # The flush and its buffer are bound together now, like the clocks: replacing eval.timing.flush_l2 or
        # an attribute of this object later changes nothing.
        self.flush_l2 = functools.partial(timing.flush_l2, timing.make_l2_flush_buffer(device))
        self.bench = None  # (inputs, H_all, tau_all) between bench-setup and bench-release
        # Bound now, before the submission is imported, so patching this class later changes nothing.
        self.handlers = {"call": self.do_call, "bench-setup": self.do_bench_setup,
                         "bench-run": self.do_bench_run, "bench-release": self.do_bench_release,
                         "profile": self.do_profile}

    def call(self, A):
        try:
            return self.fn(A)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and friends are faults too
            raise Fault(describe_exception(exc, self.path)) from None

    def store(self, out, A, H_out, tau_out) -> None:
        problem = output_problem(out, tuple(A.shape), A.device)
        if problem:
            raise Fault(problem)
        with torch.no_grad():
            self.copy(H_out, out[0])
            self.copy(tau_out, out[1])

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

    def do_bench_setup(self, inputs, H_all, tau_all):
        self.bench = (inputs, H_all, tau_all)
        return None

    def do_bench_run(self, timed: bool):
        inputs, H_all, tau_all = self.bench
        clocks = self.clocks
        times = None
        if not timed:
            outs = [self.call(x) for x in inputs]
            self.settle()
        elif self.cuda:
            self.sync()
            self.flush_l2()
            self.sync()
            host_start = clocks.perf_counter()
            clocks.event_record(self.start_event, self.stream)
            outs = [self.call(x) for x in inputs]
            self.settle()  # the whole device: work left on any stream is inside the measured time
            clocks.event_record(self.end_event, self.stream)
            clocks.event_synchronize(self.end_event)
            host_end = clocks.perf_counter()
            event_ms = clocks.event_elapsed_time(self.start_event, self.end_event)
            times = {"event_ns": event_ms * 1e6, "host_ns": (host_end - host_start) * 1e9}
        else:
            host_start = clocks.perf_counter()
            outs = [self.call(x) for x in inputs]
            host_end = clocks.perf_counter()
            elapsed_ns = (host_end - host_start) * 1e9
            times = {"event_ns": elapsed_ns, "host_ns": elapsed_ns}
        for i, (out, x) in enumerate(zip(outs, inputs)):
            self.store(out, x, H_all[i], tau_all[i])
        del outs
        self.sync()
        return times

    def do_bench_release(self):
        self.bench = None
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

    With the parent marked non-dumpable (see ``eval.runner.protect_parent``), a process without
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


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process if the thread that started it goes away (best effort)."""
    with contextlib.suppress(Exception):
        import ctypes
        import signal
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def main(conn, submission_path: str, entry: str, device_name: str) -> None:
    """Entry point of the spawned child."""
    os.setpgrp()  # own process group, so the parent can kill anything the submission starts
    _die_with_parent()
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
