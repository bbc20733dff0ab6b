"""CPU (the Triton interpreter): entries side by side on the blocked path, a variant's margins and bits before
its device call.

    python3 docs/prepared/cpu-margins.py ENTRY.py [ENTRY.py ...] [--quick] [--block-panels 2] [--update-programs P]

For each configuration (n, panel width, register rows; tf32 parts below n = 128, bf16 parts above, register and
split panels, both update orders) and case kind, every entry factors the same input through its
``_factor_blocked`` and the contest's checks give its two margins (fractions of the gates).  Each line also says
whether the entries gave the same bits as the first.
Exit status 1 if any check fails.  --quick: three case kinds instead of all.  --block-panels 2: panels in blocks
of two (``_factor_blocked``'s ``block_panels``), on the configurations with register panels only.
--update-programs: the update's programs (default 64, which cuts the rows of these small inputs in chunks; 1
keeps every launch's rows in one chunk).
"""

import argparse
import collections
import os
import sys
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "gpu")]
import reference  # noqa: E402
import torch  # noqa: E402
from kernel_bench import load_module  # noqa: E402

# (n, panel width, register rows, look-ahead)
CONFIGS = [(64, 16, 64, False), (100, 16, 32, True), (127, 32, 128, True), (130, 16, 32, True),
           (144, 16, 256, False), (160, 32, 64, True)]


def run(entry, A, width: int, register_rows: int, look_ahead: bool, block_panels: int, update_programs: int):
    """(H, tau) of one blocked factorization."""
    H, tau = entry._outputs(A)
    blocks = dict(block_panels=block_panels) if block_panels > 1 else {}  # entries before v64 lack the argument
    entry._factor_blocked(A, H, tau, panel_width=width, max_register_rows=register_rows,
                          update_programs=update_programs, products_cols=64, look_ahead=look_ahead, **blocks)
    return H, tau


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("entries", nargs="+")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--block-panels", type=int, default=1, choices=(1, 2))
    parser.add_argument("--update-programs", type=int, default=64)
    args = parser.parse_args()
    entries = {Path(path).name: load_module(path) for path in args.entries}
    cases = ("rowscale", "clustered", "mixed") if args.quick else reference.CASES
    failed, worst = False, collections.defaultdict(float)
    for n, width, register_rows, look_ahead in CONFIGS:
        if args.block_panels > 1 and register_rows < 1 << (n - 1).bit_length():  # split panels: no blocks
            continue
        for case in cases:
            A = reference.generate_input(2, n, 3, 7, case)
            config = (f"n{n} nb{width} rows{register_rows} {'ahead' if look_ahead else 'plain'}"
                      + (f" blocks{args.block_panels}" if args.block_panels > 1 else ""))
            line, first = f"{config:24s} {case:13s}", None
            for name, entry in entries.items():
                H, tau = run(entry, A, width, register_rows, look_ahead, args.block_panels, args.update_programs)
                result = reference.check_details(A, (H, tau))
                failed |= not result.ok
                worst[name] = max(worst[name], result.factor_margin, result.orth_margin)
                same = "" if first is None else (" same" if torch.equal(first[0], H) and torch.equal(first[1], tau)
                                                 else " differs")
                first = first or (H, tau)
                line += (f" | {name} f {result.factor_margin:.4f} o {result.orth_margin:.4f}"
                         f"{'' if result.ok else ' FAIL'}{same}")
            print(line, flush=True)
    print("worst margin:", ", ".join(f"{name} {value:.4f}" for name, value in worst.items()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
