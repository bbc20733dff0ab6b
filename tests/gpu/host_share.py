"""GPU-only: how much of a call's time is the GPU waiting for the host (not collected by pytest).

    python tests/gpu/host_share.py N:BATCH:CASE[,N:BATCH:CASE ...] ENTRY.py [ENTRY.py ...]

Per case and entry, 12 rounds of two timed calls, each after a synchronize: "plain", the call as it comes, and
"held", the stream first held by a sleep kernel of about 30 ms (longer than any call's host work here) so that
the host has enqueued the whole call before the GPU starts it.  The medians' difference is the time the GPU spent
waiting for the host.  The L2 flush is finished before the start event, so the host's lead-in shows in full; a
timer that enqueues its flush just before the start event (kernel_bench, ab_bench, both evaluators) hides part of
it behind the flush.  (Run as scratch/gpufloor.py, with a 240 MB flush, in session 12.)
"""

import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import reference  # noqa: E402
from kernel_bench import L2_FLUSH_BYTES, cases_and_entries  # noqa: E402  (this script's folder is on the path)

ROUNDS = 12
HOLD_CYCLES = 60_000_000  # about 30 ms at the H200's clock


def main() -> int:
    cases, entries = cases_and_entries(__doc__.splitlines()[0])
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    for n, batch, case in cases:
        A = reference.generate_input(batch, n, 2, 7, case, device="cuda")
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
