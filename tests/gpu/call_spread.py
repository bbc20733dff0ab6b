"""GPU-only: where the time of an entry's slow calls goes (not collected by pytest).

    python tests/gpu/call_spread.py N:BATCH:CASE[,N:BATCH:CASE ...] ENTRY.py [ENTRY.py ...] [--calls C] [--gc-off]

The contest ranks by the mean of its timed repeats, so a few slow calls count as much as a faster kernel.  Per
case and entry, C calls back to back on one input, each timed as the contest's eval.py times it: synchronize,
the L2 fill (``eval.timing.make_l2_fill``), the start event, the call, the previous call's outputs freed, the end
event.  For every call slower than 1.1 times the median it prints the GPU time (events), the host time of the
call, the CUDA allocator's new segments (a cudaMalloc inside the call) and retries (cached blocks released and
the allocation tried again), the garbage collector's passes during the call, and, where the entry replays a
recorded launch chain (a ``_DirectQR`` in its ``_prepared``), the host's time before its first launch and its
longest gap between two launches (each launch is timestamped: a few hundred nanoseconds of host time).  A slow
call whose host time is its GPU time while no segment or collection shows is the host stalled inside the launch
loop, or blocked by the driver.  Three more numbers tell those apart: the thread's CPU time over the call (less
than the wall time: the OS took the thread off its core), the median gap between launches (a host slow
throughout, against one stall), and the time before the first launch, when the queue holds only the L2 fill
and no launch can wait for room in it.  --gc-off disables the collector for the call itself.
"""

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import reference  # noqa: E402
from eval import timing  # noqa: E402
from kernel_bench import load_module, parse_cases  # noqa: E402  (this script's folder is on the path)

SLOW = timing.SLOW_REPEAT_RATIO  # a call slower than this times the median is reported, as the evaluator counts it


def stamp_launches(module, stamps: list) -> None:
    """Make every recorded launch of the module's direct chains append its host time to ``stamps`` first."""
    for prepared in getattr(module, "_prepared", {}).values():
        records = getattr(prepared, "records", None)
        if records is None or getattr(prepared, "stamped", False):
            continue

        def stamped(launcher):
            def launch(*arguments):
                stamps.append(time.perf_counter())
                return launcher(*arguments)
            return launch

        prepared.records = [(stamped(launcher), arguments, own) for launcher, arguments, own in records]
        prepared.stamped = True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", help="N:BATCH:CASE[,N:BATCH:CASE ...]")
    parser.add_argument("entries", nargs="+")
    parser.add_argument("--calls", type=int, default=150)
    parser.add_argument("--gc-off", action="store_true", help="disable the garbage collector during each call")
    args = parser.parse_args()
    cases = parse_cases(parser, args.cases)
    device = torch.device("cuda")
    fill_l2 = timing.make_l2_fill(device)
    passes = []  # (generation, seconds) of the collector's passes

    def on_gc(phase, info, started=[0.0]):
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            passes.append((info["generation"], time.perf_counter() - started[0]))

    gc.callbacks.append(on_gc)
    for n, batch, case in cases:
        A = reference.generate_input(batch, n, 2, 7, case, device="cuda")
        for path in args.entries:
            module = load_module(path)
            previous = module.custom_kernel(A)
            torch.cuda.synchronize()
            stamps = []
            stamp_launches(module, stamps)
            rows = []
            for _ in range(args.calls):
                torch.cuda.synchronize()
                fill_l2()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                before = torch.cuda.memory_stats(device)
                passes.clear()
                stamps.clear()
                if args.gc_off:
                    gc.disable()
                cpu_start = time.thread_time()
                host_start = time.perf_counter()
                start.record()
                out = module.custom_kernel(A)
                previous = None  # the previous call's outputs, freed inside the timed region as the contest does
                end.record()
                host_end = time.perf_counter()
                cpu = time.thread_time() - cpu_start
                if args.gc_off:
                    gc.enable()
                torch.cuda.synchronize()
                after = torch.cuda.memory_stats(device)
                previous = out
                gaps = [b - a for a, b in zip(stamps, stamps[1:])]
                rows.append({
                    "gpu": start.elapsed_time(end) * 1e3, "host": (host_end - host_start) * 1e6, "cpu": cpu * 1e6,
                    "segments": after.get("segment.all.allocated", 0) - before.get("segment.all.allocated", 0),
                    "retries": after.get("num_alloc_retries", 0) - before.get("num_alloc_retries", 0),
                    "gc": [(g, round(s * 1e6)) for g, s in passes],
                    "first": (stamps[0] - host_start) * 1e6 if stamps else None,
                    "gap": (max(gaps) * 1e6, gaps.index(max(gaps)) + 1) if gaps else None,
                    "pace": statistics.median(gaps) * 1e6 if gaps else None,
                    "last": (stamps[-1] - host_start) * 1e6 if stamps else None,
                    "launches": len(stamps)})
            previous = None
            times = [r["gpu"] for r in rows]
            median = statistics.median(times)
            slow = [r for r in rows if r["gpu"] > SLOW * median]
            print(f"n{n} b{batch} {case} {path}: mean {statistics.mean(times):.1f} µs, median {median:.1f}, "
                  f"max {max(times):.1f}; {len(slow)} of {len(rows)} calls over {SLOW}x the median; host mean "
                  f"{statistics.mean(r['host'] for r in rows):.1f} µs, {rows[-1]['launches']} launches a call",
                  flush=True)
            for r in slow[:12]:
                where = ""
                if r["gap"] is not None:
                    where = f", first launch at {r['first']:.0f} µs, longest gap {r['gap'][0]:.0f} µs before launch " \
                            f"{r['gap'][1]}, median gap {r['pace']:.1f} µs, last launch at {r['last']:.0f} µs"
                print(f"    slow: GPU {r['gpu']:.1f} µs, host {r['host']:.1f} µs (thread CPU {r['cpu']:.0f}), "
                      f"new segments {r['segments']}, "
                      f"retries {r['retries']}, collections {r['gc']}{where}", flush=True)
            fast = [r for r in rows if r["gpu"] <= SLOW * median and r["gap"] is not None]
            if fast:
                print(f"    other calls: longest gap between launches {max(r['gap'][0] for r in fast):.0f} µs, "
                      f"first launch at {statistics.median(r['first'] for r in fast):.0f} µs, "
                      f"median gap {statistics.median(r['pace'] for r in fast):.1f} µs, last launch at "
                      f"{statistics.median(r['last'] for r in fast):.0f} µs, host "
                      f"{statistics.median(r['host'] for r in fast):.0f} µs (thread CPU "
                      f"{statistics.median(r['cpu'] for r in fast):.0f}), collections during "
                      f"{sum(bool(r['gc']) for r in fast)} of them (medians over them)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
