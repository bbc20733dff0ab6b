"""GPU-only: what spreads a timed repeat, one suspect at a time, outside the evaluator (not collected by pytest).

    python tests/gpu/timing_spread.py [ENTRY.py] [--repeats 30] [--cases n4096 n1024] [--variants plain check2 ...]

Each repeat is the contest's region in one process: synchronize, a 256 MiB L2 fill, start event, the call(s), end
event.  Between repeats each variant adds one thing the evaluator does there:

  plain      nothing
  check      the evaluator's float64 re-check of every output of the repeat (eval.gates.fast_gates)
  idle30     30 ms of host idle time
  flip       random row signs flipped in the input (the evaluator's fresh inputs)
  proc-fill  a second process (its own CUDA context) fills 256 MiB, as the evaluator's parent does
  proc-fp64  a second process runs float64 batched products for ~25 ms, as the parent's re-check does
  ipc        the input lives in another process's memory (CUDA IPC), as the child's inputs do
  proc-write that input rewritten by the other process between repeats (row signs flipped there)
  store      the outputs copied into the other process's buffers after each repeat, as the child does
  two-inputs two inputs per repeat, both called inside the region (the contest's 256 MiB clamp: n4096 b2 has 2)
  check2     two inputs, both outputs re-checked: the parent's float64 work between repeats at n4096
  check2-cool  the same, then the GPU left idle eval.runner.COOL_DOWN_RATIO times as long as that work took
  all        all of them but idle30 at once: the evaluator's loop without its processes' protocol

and also the late-time probe of eval/child.py (device-wide wait after the end event; end event to an event
recorded after it): its readings on an idle device and after each repeat.  Per variant: mean, std, min, p50,
p90 (ms) and the probe's median (µs).  Compare with `python -m eval benchmark` on the same case, whose
report's `times_ns` holds every repeat.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.multiprocessing as multiprocessing

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import reference  # noqa: E402
from eval.gates import fast_gates  # noqa: E402
from eval.runner import COOL_DOWN_RATIO, flip_row_signs  # noqa: E402
from tests.gpu.kernel_bench import load_entry  # noqa: E402

CASES = {"n4096": (2, 4096, 1, 32412, "dense"), "n1024": (60, 1024, 2, 770002, "mixed"),
         "n512": (640, 512, 2, 1029, "dense")}
ALL = ("check", "flip", "proc-fill", "proc-fp64", "ipc", "proc-write", "store", "two-inputs")
PARTS = {"check2": ("two-inputs", "check"), "check2-cool": ("two-inputs", "check", "cool"), "all": ALL}
VARIANTS = ("plain", "check", "idle30", "flip", "proc-fill", "proc-fp64", "ipc", "proc-write", "store", "two-inputs",
            "check2", "check2-cool", "all")


def neighbour(conn, case) -> None:
    """The second process: shares its input and output buffers with the first (CUDA IPC), then does the work
    each request names (a set of variant names)."""
    batch, n, cond, seed, kind = case
    A = reference.generate_input(batch, n, cond, seed, case=kind, device="cuda")
    H_buffer, tau_buffer = torch.empty_like(A), torch.empty(batch, n, device="cuda")
    X = torch.randn(64, 512, 512, dtype=torch.float64, device="cuda")
    fill = torch.empty(256 * 2**20 // 8, dtype=torch.int64, device="cuda")
    generator = torch.Generator(device="cuda")
    generator.manual_seed(2)
    torch.cuda.synchronize()
    conn.send((A, H_buffer, tau_buffer))
    while (request := conn.recv()) != "stop":
        if "proc-write" in request:
            flip_row_signs(A, generator)
        if "proc-fill" in request:
            fill.fill_(42)
        if "proc-fp64" in request:
            for _ in range(3):
                torch.bmm(X, X)
        torch.cuda.synchronize()
        conn.send("done")


def late_probe(end, late) -> float:
    """eval/child.py's probe: wait for the end event, then the whole device; µs from end to the next event."""
    end.synchronize()
    torch.cuda.synchronize()
    late.record()
    late.synchronize()
    return end.elapsed_time(late) * 1e3


def run_case(kernel, name: str, case, repeats: int, variants) -> None:
    batch, n, cond, seed, kind = case
    local = reference.generate_input(batch, n, cond, seed, case=kind, device="cuda")
    context = multiprocessing.get_context("spawn")  # torch's: CUDA tensors cross the pipe through CUDA IPC
    conn, far = context.Pipe()
    process = context.Process(target=neighbour, args=(far, case))
    process.start()
    shared, H_buffer, tau_buffer = conn.recv()
    fill = torch.empty(256 * 2**20 // 8, dtype=torch.int64, device="cuda")
    start, end, late = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    generator = torch.Generator(device="cuda")
    generator.manual_seed(1)
    kernel(local), kernel(shared)
    torch.cuda.synchronize()
    idle = []
    for _ in range(9):
        torch.cuda.synchronize()
        end.record()
        idle.append(late_probe(end, late))
    print(f"{name}: late probe on an idle device, median {statistics.median(idle):.0f} µs", flush=True)
    for variant in variants:
        parts = PARTS.get(variant, (variant,))
        A = shared if {"ipc", "proc-write"} & set(parts) else local.clone()
        inputs = [A, local.clone()] if "two-inputs" in parts else [A]
        times, probes = [], []
        for _ in range(repeats):
            if "flip" in parts:
                flip_row_signs(A, generator)
            if any(part.startswith("proc-") for part in parts):
                conn.send(parts)
                conn.recv()
            torch.cuda.synchronize()
            fill.fill_(42)
            start.record()
            outputs = [kernel(x) for x in inputs]
            end.record()
            probes.append(late_probe(end, late))
            times.append(start.elapsed_time(end) / len(inputs))
            H, tau = outputs[0]
            if "store" in parts:
                H_buffer.copy_(H)
                tau_buffer.copy_(tau)
                torch.cuda.synchronize()
            if "check" in parts:
                checked = time.perf_counter()
                for x, (H, tau) in zip(inputs, outputs):
                    float(fast_gates(x, H, tau)[0].max())
                if "cool" in parts:
                    time.sleep(COOL_DOWN_RATIO * (time.perf_counter() - checked))
            if "idle30" in parts:
                time.sleep(0.03)
        q = sorted(times)
        mean = statistics.mean(times)
        print(f"{name} {variant:10s} mean {mean:8.3f} std {100 * statistics.pstdev(times) / mean:5.2f} % "
              f"min {q[0]:.3f} p50 {q[len(q) // 2]:.3f} p90 {q[9 * len(q) // 10]:.3f} | "
              f"late probe median {statistics.median(probes):.0f} µs", flush=True)
    del shared, H_buffer, tau_buffer, A, inputs, outputs  # release the neighbour's memory before it exits
    conn.send("stop")
    process.join()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("entry", nargs="?", default=str(ROOT / "submission.py"))
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--cases", nargs="+", default=["n4096", "n1024"], choices=sorted(CASES))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    args = parser.parse_args()
    kernel = load_entry(args.entry)
    for name in args.cases:
        run_case(kernel, name, CASES[name], args.repeats, args.variants)
    return 0


if __name__ == "__main__":
    sys.exit(main())
