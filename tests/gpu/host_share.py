"""GPU-only: how much of a call's time is the GPU waiting for the host (not collected by pytest).

    python tests/gpu/host_share.py N:BATCH:CASE[,N:BATCH:CASE ...] ENTRY.py [ENTRY.py ...]

Per case and entry, 12 rounds of two timed calls, each after a synchronize: "plain", the call as it comes, and
"held", the stream first held by a sleep kernel of about 30 ms (longer than any call's host work here) so that
the host has enqueued the whole call before the GPU starts it.  The medians' difference is the time the GPU spent
waiting for the host.  No L2 flush precedes the start event, so the host's lead-in shows in full; a timer that
flushes just before it (kernel_bench, ab_bench, both evaluators) hides part of it.  (Run as scratch/gpufloor.py in
session 12.)
"""

import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import reference  # noqa: E402
from kernel_bench import load_entry  # noqa: E402  (this script's folder is on the path)

ROUNDS = 12
HOLD_CYCLES = 60_000_000  # about 30 ms at the H200's clock


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    cases = [c.split(":") for c in sys.argv[1].split(",")]
    entries = {Path(p).stem: load_entry(p) for p in sys.argv[2:]}
    flush = torch.empty(60 * 2**20, dtype=torch.float32, device="cuda")
    for n, batch, case in cases:
        A = reference.generate_input(int(batch), int(n), 2, 7, case, device="cuda")
        row = f"n{n} b{batch} {case:<8}"
        for name, kernel in entries.items():
            kernel(A)
            torch.cuda.synchronize()
            plain, held = [], []
            for _ in range(ROUNDS):
                for hold, times in ((False, plain), (True, held)):
                    flush.add_(1.0)
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    torch.cuda.synchronize()
                    if hold:
                        torch.cuda._sleep(HOLD_CYCLES)
                    start.record()
                    kernel(A)
                    end.record()
                    torch.cuda.synchronize()
                    times.append(start.elapsed_time(end) * 1e3)
            row += f" | {name} plain {statistics.median(plain):8.1f} held {statistics.median(held):8.1f}"
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
