"""GPU-only: interleaved A/B timing of QR entries, case by case (not collected by pytest).

    python tests/gpu/ab_bench.py N:BATCH:CASE[,N:BATCH:CASE ...] ENTRY.py [ENTRY.py ...]

For each case one input is made (reference.generate_input, seed 7) and every entry's output on it is checked
with reference.check_details (a failure ends the run).  Then 7 rounds, each calling every entry 5 times in turn;
before each call a 240 MB buffer is added to (the L2 flush) and the call is timed with CUDA events.  Per entry
the median of its 35 calls is printed with their range, then the geometric mean over the cases.  Interleaving
keeps a drift of the GPU's clock or of the host's speed out of the ratios (kernel_bench times one entry's
repeats together).  (Run as scratch/ab.py in sessions 10-12.)
"""

import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import reference  # noqa: E402
from kernel_bench import load_entry  # noqa: E402  (this script's folder is on the path)

ROUNDS, CALLS = 7, 5


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    cases = [c.split(":") for c in sys.argv[1].split(",")]
    entries = {Path(p).stem: load_entry(p) for p in sys.argv[2:]}
    flush = torch.empty(60 * 2**20, dtype=torch.float32, device="cuda")
    medians = {name: [] for name in entries}
    for n, batch, case in cases:
        A = reference.generate_input(int(batch), int(n), 2, 7, case, device="cuda")
        times = {name: [] for name in entries}
        for name, kernel in entries.items():
            result = reference.check_details(A, kernel(A))
            if not result.ok:
                print(f"n{n} b{batch} {case}: {name} FAILED: {result.message}", flush=True)
                return 1
        for _ in range(ROUNDS):
            for name, kernel in entries.items():
                for _ in range(CALLS):
                    flush.add_(1.0)
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    kernel(A)
                    end.record()
                    torch.cuda.synchronize()
                    times[name].append(start.elapsed_time(end) * 1e3)
        row = f"n{n} b{batch} {case:<10}"
        for name, t in times.items():
            medians[name].append(statistics.median(t))
            row += f" | {name} {statistics.median(t):9.1f} ({min(t):.0f}-{max(t):.0f})"
        print(row, flush=True)
    print("geomean: " + " | ".join(f"{k} {statistics.geometric_mean(v):.1f}" for k, v in medians.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
