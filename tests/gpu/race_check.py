"""GPU-only: look for races in QR entries by calling them again and again on one input (not collected by pytest).

    python tests/gpu/race_check.py N:BATCH:CASE[,N:BATCH:CASE ...] ENTRY.py [ENTRY.py ...] [--repeats R]
        [--checks-only]

The committed entry's kernels are deterministic up to n = 1024 (no atomics on the numbers, a fixed order of every
sum), so there every call on the same input must give the same bits.  A program that reads what another program
of another launch is still writing (a missing wait, a buffer reused too early) shows up as an output that differs
from the first call's, often while still passing the checker.  For each case one input is made
(reference.generate_input, seed 7); each entry's first output is checked with reference.check_details, then the
entry is called R more times and every output compared bitwise with the first.  The first entry is the reference
of the last column: the largest difference of each entry's output from its own (a different summation order
differs by rounding).  Exit status 1 if any check fails or, unless --checks-only, any output differs: the
entry's split panels (n > 1024) add partial sums atomically in any order, so there the bits change from call to
call and only the checks tell anything.
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import reference  # noqa: E402
from kernel_bench import load_entry, parse_cases  # noqa: E402  (this script's folder is on the path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", help="N:BATCH:CASE[,N:BATCH:CASE ...]")
    parser.add_argument("entries", nargs="+")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--checks-only", action="store_true",
                        help="outputs may differ from call to call (atomic sums): only the checks fail the run")
    args = parser.parse_args()
    cases = parse_cases(parser, args.cases)
    entries = {path: load_entry(path) for path in args.entries}
    failed = False
    for n, batch, case in cases:
        A = reference.generate_input(batch, n, 2, 7, case, device="cuda")
        first = {}
        for path, entry in entries.items():
            H, tau = entry(A)
            result = reference.check_details(A, (H, tau))
            differing = sum(not (torch.equal(H2, H) and torch.equal(tau2, tau))
                            for H2, tau2 in (entry(A) for _ in range(args.repeats)))
            first[path] = H
            gap = (H - first[args.entries[0]]).abs().max().item()
            failed |= (differing > 0 and not args.checks_only) or not result.ok
            print(f"n{n} b{batch} {case}: {path}: check {'passed' if result.ok else 'FAILED: ' + result.message} | "
                  f"outputs differing from the first {differing}/{args.repeats} | max |H - first entry's H| {gap:.3g}",
                  flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
