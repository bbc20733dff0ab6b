"""GPU-only: the host's time of an entry's prepared call, whole and in its parts, µs a call (docs/perf.md, "v82").

    python docs/prepared/host_pieces.py B:N ENTRY.py [ENTRY.py ...]

Per entry, on one input of the case: the whole ``custom_kernel`` call; the call with its two output allocations
taken out (``_outputs`` handing back the same two tensors); and ``_outputs`` alone.  Each is the best of 7 runs of
200 calls timed on the host alone (the GPU's queue is emptied before each run and is never full: 200 launches), so
it is the host's work, whatever the GPU's time per call.
"""
import sys
import time

import torch

sys.path[:0] = ["tests/gpu", "."]
import reference  # noqa: E402
from kernel_bench import load_module  # noqa: E402

CALLS, RUNS = 200, 7


def best(fn) -> float:
    times = []
    for _ in range(RUNS):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(CALLS):
            fn()
        times.append((time.perf_counter() - start) / CALLS * 1e6)
    torch.cuda.synchronize()
    return min(times)


def main() -> None:
    batch, n = (int(v) for v in sys.argv[1].split(":"))
    A = reference.generate_input(batch, n, 1, 43256, device="cuda")
    print(f"b{batch} n{n}, µs a call, host only (best of {RUNS} x {CALLS}): call / call without allocations / "
          f"allocations")
    for path in sys.argv[2:]:
        module = load_module(path)
        call = module.custom_kernel
        for _ in range(3):
            call(A)  # prepares the chain
        whole = best(lambda: call(A))
        outputs = module._outputs
        fixed = outputs(A)
        module._outputs = lambda A: fixed
        without = best(lambda: call(A))
        module._outputs = outputs
        allocations = best(lambda: outputs(A))
        print(f"  {path}: {whole:.2f} / {without:.2f} / {allocations:.2f}", flush=True)


if __name__ == "__main__":
    main()
