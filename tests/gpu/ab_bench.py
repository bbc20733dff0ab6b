"""GPU-only: interleaved A/B timing of QR entries, case by case (not collected by pytest).

    python tests/gpu/ab_bench.py N:BATCH:CASE[,N:BATCH:CASE ...] ENTRY.py [ENTRY.py ...]

For each case one input is made (reference.generate_input, seed 7) and every entry's output on it is checked
with reference.check_details: an entry that fails the check or raises (a variant that does not compile) is
reported and left out of the rest of the run, the others go on (exit status 1 at the end).  Then 7 rounds, each
calling every entry 5 times in turn, every call timed after an L2 flush as kernel_bench times it.  Per entry the
median of its 35 calls is printed with their range, then the geometric mean over the cases of each entry that
passed them all.  Interleaving keeps a drift of the GPU's clock or of the host's speed out of the ratios
(kernel_bench times one entry's repeats together).  (Run as scratch/ab.py, with a 240 MB flush, in sessions
10-12.)
"""

import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import reference  # noqa: E402
from kernel_bench import L2_FLUSH_BYTES, cases_and_entries, timed_call  # noqa: E402  (this script's folder)

ROUNDS, CALLS = 7, 5


def main() -> int:
    cases, entries = cases_and_entries(__doc__.splitlines()[0])
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    medians = {name: [] for name in entries}
    for n, batch, case in cases:
        A = reference.generate_input(batch, n, 2, 7, case, device="cuda")
        for name in list(medians):
            try:
                result = reference.check_details(A, entries[name](A))
                failure = None if result.ok else result.message
            except Exception as exc:  # noqa: BLE001 - e.g. a variant's kernel that does not compile
                failure = f"{type(exc).__name__}: " + " / ".join(str(exc).strip().splitlines()[:3])[:400]
            if failure:
                print(f"n{n} b{batch} {case}: {name} FAILED: {failure}", flush=True)
                del medians[name]
        if not medians:
            return 1
        times = {name: [] for name in medians}
        for _ in range(ROUNDS):
            for name in times:
                times[name] += [timed_call(entries[name], A, flush) for _ in range(CALLS)]
        row = f"n{n} b{batch} {case:<10}"
        for name, t in times.items():
            medians[name].append(statistics.median(t))
            row += f" | {name} {statistics.median(t):9.1f} ({min(t):.0f}-{max(t):.0f})"
        print(row, flush=True)
    print("geomean: " + " | ".join(f"{k} {statistics.geometric_mean(v):.1f}" for k, v in medians.items()))
    return 0 if len(medians) == len(entries) else 1


if __name__ == "__main__":
    sys.exit(main())
