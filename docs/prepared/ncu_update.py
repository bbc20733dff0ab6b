"""GPU: an entry's calls on one input, for Nsight Compute to profile the update's launches (docs/perf.md, "What
bounds the update", prepared in the twenty-fifth session).

    python docs/prepared/ncu_update.py ENTRY.py BATCH N      (under ncu: see docs/prepared/run-ncu.sh)

Calls the entry three times on reference.generate_input(BATCH, N, 2, 7, "dense"): the first prepares its chain,
the later ones replay it as the evaluator's timed calls do; the last output is checked.
"""

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "gpu")]
import reference  # noqa: E402
from kernel_bench import load_entry  # noqa: E402


def main() -> int:
    if len(sys.argv) != 4:
        print("usage: python docs/prepared/ncu_update.py ENTRY.py BATCH N", file=sys.stderr)
        return 2
    entry, batch, n = load_entry(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    A = reference.generate_input(batch, n, 2, 7, "dense", device="cuda")
    for _ in range(3):
        out = entry(A)
    torch.cuda.synchronize()
    ok = reference.check_implementation(A, out)[0]
    print(f"{sys.argv[1]} b{batch} n{n}: {'checked' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
