"""GPU-only: per-call time of QR entries when calls come back to back, as the contest times them (not collected
by pytest).

    python tests/gpu/host_bench.py [--cases B:N ...] ENTRY.py [ENTRY.py ...]

For each case, the contest's number of distinct inputs (clamp(256 MiB / input bytes, 1, 50)) is made once; each
repeat times every entry in turn: it fills 256 MiB (the L2 flush), records a start event, calls the entry on every
input back to back, records the end event; the per-call median and minimum of 30 repeats are printed, entries side
by side.  Where the host's work per call exceeds the GPU's (small inputs), this is the number that moves when the
host path changes; every output of the first pass is checked with reference.check_details.
"""

import argparse
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import reference  # noqa: E402
from kernel_bench import load_entry  # noqa: E402  (this script's folder is on the path)

REPEATS = 30


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("entries", nargs="+")
    parser.add_argument("--cases", nargs="+", default=["20:32", "40:176"], help="batch:n pairs")
    args = parser.parse_args()
    kernels = {Path(p).stem: load_entry(p) for p in args.entries}
    fill = torch.empty(256 * 2**20 // 8, dtype=torch.int64, device="cuda")
    failures = 0
    for case in args.cases:
        batch, n = (int(v) for v in case.split(":"))
        count = max(1, min(50, 256 * 2**20 // (batch * n * n * 4)))
        inputs = [reference.generate_input(batch, n, 1, 43214 + 42 * (i + 1), device="cuda") for i in range(count)]
        row = f"b{batch} n{n} x{count} inputs:"
        bad, times, previous = {}, {name: [] for name in kernels}, {}
        for name, kernel in kernels.items():
            previous[name] = [kernel(A) for A in inputs]
            torch.cuda.synchronize()
            bad[name] = sum(not reference.check_details(A, out).ok for A, out in zip(inputs, previous[name]))
            failures += bad[name]
        for _ in range(REPEATS):  # the entries in turn within every repeat: a drift of the host's speed hits all
            for name, kernel in kernels.items():
                torch.cuda.synchronize()
                fill.fill_(42)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                outputs = [kernel(A) for A in inputs]
                end.record()
                torch.cuda.synchronize()
                times[name].append(start.elapsed_time(end) * 1e3 / count)
                previous[name] = outputs  # its pass before is freed now, after this one's calls (as the contest)
        for name in kernels:
            row += f" | {name}: {'' if not bad[name] else f'{bad[name]} FAILED '}" \
                   f"{statistics.median(times[name]):.1f} us (min {min(times[name]):.1f})"
        print(row, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
