"""GPU-only: what the benchmark's re-check (eval/gates.py) costs against one timed region (not collected by
pytest).

    python tests/gpu/recheck_cost.py [--baseline FILE] [--entry submission.py]

Per benchmark shape: one timed call of the entry (L2 flushed first), then ``fast_gates`` on its output, timed
with CUDA events (second of two runs); with --baseline FILE (any Python file defining ``fast_gates``, e.g. an
older ``eval/runner.py`` from git) that one too, side by side, with the largest relative difference of their
ratios. Whether the re-check between repeats disturbs the timing: tests/gpu/timing_spread.py (variant check).
"""

import argparse
import importlib.util
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import reference  # noqa: E402
from eval.gates import fast_gates  # noqa: E402
from tests.gpu.kernel_bench import load_entry  # noqa: E402

SHAPES = [(20, 32), (40, 176), (40, 352), (640, 512), (60, 1024), (8, 2048), (2, 4096)]


def load_gates(path: str):
    spec = importlib.util.spec_from_file_location("baseline_gates", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module.fast_gates


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--entry", default=str(ROOT / "submission.py"))
    args = parser.parse_args()
    kernel = load_entry(args.entry)
    baseline = load_gates(args.baseline) if args.baseline else None
    flush = torch.empty(256 * 2**20 // 4, dtype=torch.float32, device="cuda")

    def timed(fn):
        """Milliseconds of fn() (second of two runs) and its result."""
        for _ in range(2):
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            result = fn()
            end.record()
            torch.cuda.synchronize()
        return start.elapsed_time(end), result

    def region(A):
        flush.fill_(1.0)
        return timed(lambda: kernel(A))

    for batch, n in SHAPES:
        A = reference.generate_input(batch, n, 2, 77, device="cuda")
        ms, out = region(A)
        gates_ms, (factor, orth) = timed(lambda: fast_gates(A, *out))
        line = (f"b{batch} n{n}: region {ms:.3f} ms, re-check {gates_ms:.2f} ms ({gates_ms / ms:.2f}x), "
                f"worst ratios {float(factor.max()):.4f} {float(orth.max()):.4f}")
        if baseline is not None:
            base_ms, (f0, o0) = timed(lambda: baseline(A, *out))
            diff = max(float(((f0 - factor).abs() / f0.abs().clamp(min=1e-300)).max()),
                       float(((o0 - orth).abs() / o0.abs().clamp(min=1e-300)).max()))
            line += f"; baseline {base_ms:.2f} ms ({base_ms / ms:.2f}x), ratios differ by {diff:.1e}"
        print(line, flush=True)
        del A, out
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
