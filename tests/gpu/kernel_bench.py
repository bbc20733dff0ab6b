"""GPU-only: check and time QR entries side by side on every case of specs/qr.yml (not collected by pytest).

    python tests/gpu/kernel_bench.py [ENTRY.py ...] [--out DIR] [--geqrf] [--only N ...]

ENTRY defaults to submission.py.  Every test case (first entry only) and benchmark case is checked with
reference.check_details (margins printed; a failure or a crash also gets a line of its own, and the run ends
with the count of failed outputs, so that the case rows can be filtered out); each benchmark case is timed
with CUDA events: per repeat, the L2 is flushed, then one call; the median of the repeats is reported.
--geqrf adds torch.geqrf on the cases with n <= 352 (it takes seconds on the larger ones).  The table goes to
stdout and, with --out, to DIR/bench.txt.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
import reference  # noqa: E402
from conftest import load_module  # noqa: E402,F401  (also for this folder's other scripts)

L2_FLUSH_BYTES = 2 * 60 * 2**20
TIME_BUDGET_S = 1.0  # per case and entry
MAX_REPEATS = 20


def load_entry(path: str):
    return load_module(path).custom_kernel


def parse_cases(parser: argparse.ArgumentParser, text: str) -> list[tuple[int, int, str]]:
    """Comma-separated ``n:batch:case`` as (n, batch, case), or the parser's error naming the bad one."""
    cases = []
    for item in text.split(","):
        try:
            n, batch, case = item.split(":")
            n, batch = int(n), int(batch)
        except ValueError:
            parser.error(f"expected n:batch:case, got {item!r}")
        if case not in reference.CASES:
            parser.error(f"unknown case kind {case!r} in {item!r} (one of {', '.join(reference.CASES)})")
        cases.append((n, batch, case))
    return cases


def cases_and_entries(description: str):
    """The command line of ab_bench.py and host_share.py: ``N:BATCH:CASE[,...] ENTRY.py [ENTRY.py ...]``; returns
    the cases as (n, batch, case) and the entries' custom_kernel by file stem."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("cases", help="comma-separated n:batch:case, e.g. 1024:60:dense,32:20:dense")
    parser.add_argument("entries", nargs="+")
    args = parser.parse_args()
    cases = parse_cases(parser, args.cases)
    missing = [p for p in args.entries if not Path(p).is_file()]
    if missing:
        parser.error(f"no such entry file: {', '.join(missing)}")
    return cases, {Path(p).stem: load_entry(p) for p in args.entries}


def timed_call(kernel, A: torch.Tensor, flush: torch.Tensor) -> float:
    """Microseconds of one call, by CUDA events, after the L2 is flushed (``flush`` added to)."""
    flush.add_(1.0)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    kernel(A)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3


def time_entry(kernel, A: torch.Tensor, flush: torch.Tensor) -> float:
    """Median microseconds per call."""
    kernel(A)
    torch.cuda.synchronize()
    times = []
    started = time.perf_counter()
    while len(times) < MAX_REPEATS and (len(times) < 3 or time.perf_counter() - started < TIME_BUDGET_S):
        times.append(timed_call(kernel, A, flush))
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("entries", nargs="*", default=[str(ROOT / "submission.py")])
    parser.add_argument("--out", default=None)
    parser.add_argument("--geqrf", action="store_true")
    parser.add_argument("--only", type=int, nargs="+", default=None, help="only cases with these n")
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    spec = yaml.safe_load((ROOT / "specs" / "qr.yml").read_text())
    kernels = {Path(p).stem: load_entry(p) for p in args.entries}
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    lines = [f"{torch.cuda.get_device_name()} torch {torch.__version__}"]

    def say(line):
        print(line, flush=True)
        lines.append(line)

    checked = failures = 0
    bench_us = {name: [] for name in kernels}
    for kind in ("tests", "benchmarks"):
        for c in spec[kind]:
            if args.only and c["n"] not in args.only:
                continue
            case = c.get("case", "dense")
            A = reference.generate_input(c["batch"], c["n"], c["cond"], c["seed"], case, device="cuda")
            pristine = A.clone()
            row = f"{kind[:5]} b{c['batch']:<4} n{c['n']:<5} {case:<13}"
            for index, (name, kernel) in enumerate(kernels.items()):
                if kind == "tests" and index > 0:
                    continue  # other entries are variants under study: checked on the benchmark cases only
                try:
                    checked += 1
                    out = kernel(A)
                    torch.cuda.synchronize()
                    r = reference.check_details(pristine, out)
                    ok = r.ok and torch.equal(A, pristine)
                    row += f" | {name}: {'ok ' if ok else 'FAIL'} f{r.factor_margin or 0:.3f} o{r.orth_margin or 0:.3f}"
                    if not ok:
                        failures += 1
                        say(f"  FAIL {name}: {r.message[:200]}")
                    if kind == "benchmarks":
                        us = time_entry(kernel, A, flush)
                        bench_us[name].append(us)
                        row += f" {us:10.1f} us"
                except Exception as exc:  # a crash is a failed case here, reported on a line of its own
                    failures += 1
                    row += f" | {name}: ERROR"
                    say(f"  ERROR {name}: {type(exc).__name__}: {str(exc)[:150]}")
            if kind == "benchmarks" and args.geqrf and c["n"] <= 352:
                row += f" | geqrf {time_entry(torch.geqrf, A, flush):10.1f} us"
            say(row)
    say(f"checked {checked} outputs (test cases: first entry only): {failures} failed")
    for name, times in bench_us.items():
        if times:
            say(f"{name}: geometric mean of {len(times)} benchmark cases {statistics.geometric_mean(times):.1f} us")
    if args.out:
        Path(args.out, "bench.txt").write_text("\n".join(lines) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
