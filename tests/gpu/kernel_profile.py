"""GPU-only: where an entry's time goes, kernel by kernel (not collected by pytest).

    python tests/gpu/kernel_profile.py [ENTRY.py ...] [--serial] [--shapes B:N,B:N,...]

For each large benchmark shape: the per-call time of ``custom_kernel`` (median of 10 CUDA-event timings), then
one ungraphed ``_factor(A, H, tau)`` under torch.profiler, its GPU kernels' times summed by kernel name.  The
entry must expose ``_factor(A, H, tau)`` as submission.py does.  Under programmatic dependent launch a kernel
starts while its predecessor runs and waits for it, so its time includes that wait and the sum exceeds the
call; ``--serial`` profiles the entry with PDL off (its ``_dependent_launch`` replaced), so that each kernel's
time is its own, as Nsight Compute reports it.  Without PDL the entry also leaves out its flags and batch parts
(they need dependent launches), so a batch cut in parts runs as one chain there: the same kernels, one launch
where each part had its own.
"""

import argparse
import collections
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import reference  # noqa: E402
from kernel_bench import load_module  # noqa: E402  (this script's folder is on the path)

SHAPES = [(640, 512), (60, 1024), (8, 2048), (2, 4096), (40, 352), (40, 176), (20, 32)]  # (batch, n)


def per_call_ms(fn, A, repeats: int = 10) -> float:
    fn(A)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(A)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("entries", nargs="*", default=[str(ROOT / "submission.py")])
    parser.add_argument("--serial", action="store_true", help="profile with programmatic dependent launch off")
    parser.add_argument("--shapes", help="batch:n pairs, comma-separated (default: the large benchmark shapes)")
    args = parser.parse_args()
    shapes = SHAPES
    if args.shapes is not None:
        try:
            shapes = [(int(batch), int(n)) for batch, n in (pair.split(":") for pair in args.shapes.split(","))]
        except ValueError:
            parser.error(f"--shapes: expected batch:n pairs separated by commas, got {args.shapes!r}")
    for path in args.entries:
        entry = load_module(path)
        print(f"== {path}" + (" (PDL off while profiled)" if args.serial else ""))
        for batch, n in shapes:
            A = reference.generate_input(batch, n, 2, 1, "dense", device="cuda")
            call = per_call_ms(entry.custom_kernel, A)
            H, tau = torch.empty_like(A), torch.empty(A.shape[:2], device="cuda")
            launch_options = entry._dependent_launch
            if args.serial:  # for the profiled calls only: custom_kernel above was timed as it runs
                entry._dependent_launch = lambda device: dict(PDL=False, launch_pdl=False)
            entry._factor(A, H, tau)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                entry._factor(A, H, tau)
                torch.cuda.synchronize()
            entry._dependent_launch = launch_options
            totals = collections.defaultdict(lambda: [0.0, 0])
            for event in prof.events():
                if event.device_type.name == "CUDA":
                    name = event.name.split("(")[0][:40]
                    totals[name][0] += event.device_time_total
                    totals[name][1] += 1
            parts = ", ".join(f"{name} {us / 1e3:.2f} ms / {count} (avg {us / count:.1f} us)"
                              for name, (us, count) in sorted(totals.items(), key=lambda kv: -kv[1][0]))
            print(f"b{batch} n{n}: call {call:.3f} ms | kernels {sum(v[0] for v in totals.values()) / 1e3:.2f} ms"
                  f" | {parts}", flush=True)


if __name__ == "__main__":
    main()
