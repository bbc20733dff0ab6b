"""GPU integrity attacks, run through the real evaluator (not collected by pytest).

    python tests/gpu/integrity.py [--device cuda|cpu] [--only NAME ...] [--keep DIR]

Each attack is a small submission written to a temporary folder and run with
``python -m eval MODE --submission F --specs S --json R --device DEVICE``; the script reads the JSON
report and prints a table: attack | expected | observed | ok.  Exit status 0 when every row is ok.

The honest work in the timing attacks costs COST_US per call: ``torch.cuda._sleep`` (calibrated
here to COST_US) on the stream where the cheat does its work, or a busy wait on CPU.  An evaluator
that lets that work escape its clock reports a mean far below COST_US.

On the H200 (``--device cuda``, the default when CUDA is available) all rows run; ``--device cpu``
runs the rows that need no GPU, which is how this script is checked on a CPU-only machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
COST_US = 200.0  # honest cost per call of the timing cheats
HONEST_FRACTION = 0.8
RUN_TIMEOUT_S = 300

SPEC = """\
test_timeout: 60
benchmark_timeout: 240
ranked_timeout: 240
tests:
{tests}
benchmarks:
  - {{batch: 20, n: 32, cond: 1, seed: 43214}}
"""
ONE_TEST = "  - {batch: 4, n: 32, cond: 1, seed: 53124}\n"
# A fault on n = 32, then an honest case on n = 48 that a fresh child must serve.
FAULT_THEN_HONEST = ONE_TEST + "  - {batch: 4, n: 48, cond: 1, seed: 53125}\n"

# Shared by the timing cheats: _cost() spends COST_US of honest work on the current stream.
COST_PRELUDE = """\
import time
import torch

SLEEP_CYCLES = {cycles}
COST_S = {cost_s}
_real_clock = time.perf_counter


def _cost(A):
    if A.is_cuda:
        torch.cuda._sleep(SLEEP_CYCLES)
    else:
        end = _real_clock() + COST_S
        while _real_clock() < end:
            pass
"""

# The CUDA queue API by names built at run time, so that no source holding it contains the word the
# contest's upload server refuses (the evaluator would refuse it at the door, as the contest does).
SIDE_QUEUE_NAMES = """

_WORD = "str" + "eam"
_Queue = getattr(torch.cuda, _WORD.capitalize())          # the class
_on = getattr(torch.cuda, _WORD)                          # the context manager
_current = getattr(torch.cuda, "current_" + _WORD)
_make_current = getattr(torch.cuda, "set_" + _WORD)


def _wait_for(queue, other):
    getattr(queue, "wait_" + _WORD)(other)

"""

SOURCES = {
    "legit": """\
import torch


def custom_kernel(A):
    return torch.geqrf(A)
""",
    # Returns at once; the factorization (and its cost) runs on a side stream, writing into the
    # returned tensors after the call has returned and (without a device-wide sync) after the end event.
    # The contest's upload server refuses any file with the word "stream" in it (eval/upload_rules.py), so
    # this source, like the next one, reaches that API through names built at run time: the row tests
    # the timing defence against a submission that evades the text rule.
    "side-stream": COST_PRELUDE + SIDE_QUEUE_NAMES + """
_side = _Queue()


def custom_kernel(A):
    H = torch.empty_like(A)
    tau = torch.empty(A.shape[:-1], dtype=A.dtype, device=A.device)
    _wait_for(_side, _current())
    with _on(_side):
        _cost(A)
        h, t = torch.geqrf(A)
        H.copy_(h)
        tau.copy_(t)
    return H, tau
""",
    # Makes a side stream the current stream before the evaluator's first call: any event recorded on
    # "the current stream" no longer brackets the work.
    "events-other-stream": COST_PRELUDE + SIDE_QUEUE_NAMES + """
_side = _Queue()
_make_current(_side)


def custom_kernel(A):
    _make_current(_side)
    _cost(A)
    return torch.geqrf(A)
""",
    # Fake clocks everywhere the submission can reach by name. (Event.record takes *args: its parameter's
    # own name is the word the contest's upload server refuses.)
    "timer-patch": COST_PRELUDE + """
_ticks = [0]


def _fake():
    _ticks[0] += 1
    return _ticks[0] * 1e-9


time.perf_counter = time.monotonic = time.time = _fake
torch.cuda.Event.elapsed_time = lambda self, other: 1e-6
torch.cuda.Event.record = lambda self, *args, **kwargs: None
torch.cuda.synchronize = lambda *args, **kwargs: None


def custom_kernel(A):
    _cost(A)
    return torch.geqrf(A)
""",
    # The evaluator's bound clocks, found through the garbage collector and swapped for fakes.
    "evaluator-clocks": COST_PRELUDE + """
import gc

_ticks = [0]


def _fake():
    _ticks[0] += 1
    return _ticks[0] * 1e-9


for _obj in gc.get_objects():
    if type(_obj).__name__ == "Clocks" and hasattr(_obj, "perf_counter"):
        object.__setattr__(_obj, "perf_counter", _fake)
        if getattr(_obj, "event_elapsed_time", None) is not None:
            object.__setattr__(_obj, "event_elapsed_time", lambda start, end: 1e-6)


def custom_kernel(A):
    _cost(A)
    return torch.geqrf(A)
""",
    # Measures whether L2 was flushed before each timed repeat: the first call of a repeat reads a
    # canary buffer (half of L2) and times the read with its own events; later calls of the
    # same repeat read it hot.  Logs (first-call read time, later-call read time) pairs.
    "l2-detector": """\
import json
from pathlib import Path

import torch

LOG = Path(__file__).with_suffix(".log")
_canary = None
_first_ptr = None
_calls = 0


def _read_time_ms():
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    _canary.sum()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def custom_kernel(A):
    global _canary, _first_ptr, _calls
    if _canary is None:
        l2 = getattr(torch.cuda.get_device_properties(A.device), "L2_cache_size", 50 << 20)
        _canary = torch.ones(max(1, l2 // 8), dtype=torch.float32, device=A.device)  # half of L2
        _first_ptr = A.data_ptr()
    _calls += 1
    if A.data_ptr() == _first_ptr or _calls % 7 == 3:
        with LOG.open("a") as log:
            log.write(json.dumps({"first": A.data_ptr() == _first_ptr, "ms": _read_time_ms()}) + "\\n")
    return torch.geqrf(A)
""",
    # The same detector, plus every way to switch the L2 flush off from inside the child (the child's
    # own fill, kept for the contest's shape, can be removed; the parent's flush cannot be reached).
    "l2-defeat": "PLACEHOLDER",  # filled below from l2-detector
    # An illegal memory access in a Triton kernel poisons the CUDA context for the n = 32 case.
    "illegal-access": """\
import torch
import triton
import triton.language as tl


@triton.jit
def _wild_store(ptr):
    tl.store(ptr + (1 << 40), 1.0)


def custom_kernel(A):
    if A.shape[-1] == 32:
        _wild_store[(1,)](A)
        torch.cuda.synchronize()
    return torch.geqrf(A)
""",
    "out-of-memory": """\
import torch


def custom_kernel(A):
    if A.shape[-1] == 32:
        torch.empty(1 << 50, dtype=torch.uint8, device=A.device)
    return torch.geqrf(A)
""",
}

SOURCES["legit-test"] = SOURCES["legit-benchmark"] = SOURCES.pop("legit")
SOURCES["l2-defeat"] = SOURCES["l2-detector"].replace("_calls = 0\n", """_calls = 0

import gc
import sys

for _name, _module in list(sys.modules.items()):
    if _name.startswith("eval") and hasattr(_module, "make_l2_fill"):
        _module.make_l2_fill = lambda device: (lambda: None)
for _obj in gc.get_objects():
    if hasattr(type(_obj), "__dict__") and "fill_l2" in getattr(_obj, "__dict__", {}):
        _obj.fill_l2 = lambda: None  # the child's own fill: gone; the parent's flush is out of reach
""", 1)


# --------------------------------------------------------------------------------------------
# Running the evaluator
# --------------------------------------------------------------------------------------------

@dataclass
class Outcome:
    code: int
    report: dict | None
    stderr: str
    folder: Path

    def first(self, kind: str) -> dict | None:
        entries = (self.report or {}).get(kind) or []
        return entries[0] if entries else None


def run_eval(folder: Path, name: str, source: str, mode: str, device: str, tests: str = ONE_TEST) -> Outcome:
    submission = folder / f"{name.replace('-', '_')}.py"
    submission.write_text(source)
    spec = folder / f"{name}_spec.yml"
    spec.write_text(SPEC.format(tests=tests))
    report = folder / f"{name}_{mode}.json"
    args = [sys.executable, "-m", "eval", mode, "--submission", str(submission), "--specs", str(spec),
            "--json", str(report), "--device", device]
    env = {k: v for k, v in os.environ.items() if k not in ("POPCORN_FD", "POPCORN_SEED")}
    try:
        proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        code, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired:
        code, stderr = -1, f"evaluator did not finish within {RUN_TIMEOUT_S} s"
    data = json.loads(report.read_text()) if report.exists() else None
    return Outcome(code, data, stderr, folder)


def short(text: str, limit: int = 90) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def no_report(out: Outcome) -> tuple[str, bool]:
    tail = out.stderr.strip().splitlines()[-1] if out.stderr.strip() else ""
    return f"no report (exit {out.code}): {short(tail)}", False


# --------------------------------------------------------------------------------------------
# Rows: each returns (observed, ok)
# --------------------------------------------------------------------------------------------

def timing_row(out: Outcome) -> tuple[str, bool]:
    bench = out.first("benchmarks")
    if bench is None:
        return no_report(out)
    if bench["status"] != "pass":
        caught = "residual" in bench["message"] or "NaN" in bench["message"]
        return f"fail: {short(bench['message'])}", caught
    mean_us = bench["stats"]["mean"] / 1e3
    flagged = "clock-skew" in bench["flags"]
    observed = f"pass, {mean_us:.1f} us/call, flags {bench['flags']}"
    return observed, mean_us >= HONEST_FRACTION * COST_US or flagged


def legit_row(out: Outcome) -> tuple[str, bool]:
    if out.report is None:
        return no_report(out)
    entries = out.report["tests"] + out.report["benchmarks"]
    bad = [e for e in entries if e["status"] != "pass" or e["flags"]]
    bench = out.first("benchmarks")
    mean = f", {bench['stats']['mean'] / 1e3:.1f} us/call" if bench and bench.get("stats") else ""
    observed = f"exit {out.code}, {len(entries) - len(bad)}/{len(entries)} clean{mean}, warnings {len(out.report['warnings'])}"
    return observed, out.code == 0 and not bad and not out.report["warnings"]


def fault_row(reason_words: tuple[str, ...]) -> Callable[[Outcome], tuple[str, bool]]:
    def row(out: Outcome) -> tuple[str, bool]:
        if out.report is None:
            return no_report(out)
        tests = out.report["tests"]
        if len(tests) != 2:
            return f"{len(tests)} test results, expected 2", False
        first, second = tests
        reason_ok = first["status"] == "fail" and any(w in first["message"].lower() for w in reason_words)
        observed = f"case 1 {first['status']}: {short(first['message'], 60)}; case 2 {second['status']}"
        return observed, reason_ok and second["status"] == "pass" and out.code == 112
    return row


def read_l2_log(folder: Path, name: str) -> tuple[float, float] | None:
    """Median first-call and later-call canary read times (ms) from a detector's log."""
    log = folder / f"{name.replace('-', '_')}.log"
    if not log.exists():
        return None
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    first = sorted(r["ms"] for r in rows if r["first"])
    later = sorted(r["ms"] for r in rows if not r["first"])
    if len(first) < 3 or not later:
        return None
    return first[len(first) // 2], later[len(later) // 2]


def l2_rows(folder: Path, device: str) -> list[tuple[str, str, str, bool]]:
    """The detector alone (the flush works: first calls read cold), then with every defeat attempt."""
    rows, ratios = [], {}
    for name in ("l2-detector", "l2-defeat"):
        out = run_eval(folder, name, SOURCES[name], "benchmark", device)
        times = read_l2_log(folder, name)
        bench = out.first("benchmarks")
        if bench is None or times is None:
            rows.append((name, "", no_report(out)[0] if bench is None else "no detector log", False))
            continue
        ratios[name] = times[0] / max(times[1], 1e-9)
        rows.append((name, "", f"{bench['status']}; canary read first {times[0] * 1e3:.1f} us vs later "
                               f"{times[1] * 1e3:.1f} us (x{ratios[name]:.2f})", None))
    control = ratios.get("l2-detector")
    defeated = ratios.get("l2-defeat")
    result = []
    for name, _, observed, ok in rows:
        if name == "l2-detector":
            expected = "first call of a repeat reads cold (flush happened): ratio > 1.2"
            ok = ok if ok is not None else (control is not None and control > 1.2)
        else:
            expected = "parent's flush still happens with the child's fill removed: ratio >= 0.8 x detector's"
            ok = ok if ok is not None else (control is not None and defeated is not None
                                            and defeated >= 0.8 * control)
        result.append((name, expected, observed, ok))
    return result


# name -> (needs cuda, mode, tests, expected, judge)
ATTACKS = {
    "legit-test": (False, "test", ONE_TEST, "pass, no flag, no warning", legit_row),
    "legit-benchmark": (False, "benchmark", ONE_TEST, "pass, no flag (no clock-skew false positive)", legit_row),
    "side-stream": (True, "benchmark", ONE_TEST, f"true cost (>= {HONEST_FRACTION * COST_US:.0f} us) or check fails",
                    timing_row),
    "events-other-stream": (True, "benchmark", ONE_TEST, f"true cost (>= {HONEST_FRACTION * COST_US:.0f} us)",
                            timing_row),
    "timer-patch": (False, "benchmark", ONE_TEST, f"true cost (>= {HONEST_FRACTION * COST_US:.0f} us)", timing_row),
    "evaluator-clocks": (False, "benchmark", ONE_TEST,
                         f"true cost (>= {HONEST_FRACTION * COST_US:.0f} us) or clock-skew", timing_row),
    "illegal-access": (True, "test", FAULT_THEN_HONEST, "case 1 fails (illegal memory access), case 2 passes",
                       fault_row(("illegal memory access", "cuda error", "illegal address"))),
    "out-of-memory": (False, "test", FAULT_THEN_HONEST, "case 1 fails (out of memory), case 2 passes",
                      fault_row(("out of memory", "outofmemory", "allocate"))),
}


def calibrate_sleep_cycles(cost_us: float) -> int:
    """``torch.cuda._sleep`` cycles that take about ``cost_us`` on this GPU."""
    import torch

    torch.cuda.init()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 1_000_000
    torch.cuda._sleep(cycles)  # warm-up
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    return max(1000, int(cycles * (cost_us / 1e3) / ms))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default=None)
    parser.add_argument("--only", nargs="*", default=None, help="run only these attacks")
    parser.add_argument("--keep", default=None, help="write submissions and reports here (kept)")
    args = parser.parse_args()

    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA device here", file=sys.stderr)
        return 2
    cycles = calibrate_sleep_cycles(COST_US) if device == "cuda" else 0
    for name in SOURCES:
        SOURCES[name] = SOURCES[name].replace("{cycles}", str(cycles)).replace("{cost_s}", repr(COST_US / 1e6))

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="integrity_"))
    folder.mkdir(parents=True, exist_ok=True)
    wanted = set(args.only) if args.only else None
    rows = []
    started = time.perf_counter()
    for name, (needs_cuda, mode, tests, expected, judge) in ATTACKS.items():
        if (wanted and name not in wanted) or (needs_cuda and device != "cuda"):
            continue
        t0 = time.perf_counter()
        observed, ok = judge(run_eval(folder, name, SOURCES[name], mode, device, tests))
        rows.append((name, expected, observed, ok))
        print(f"  {name}: {'ok' if ok else 'NOT OK'} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    if device == "cuda" and (wanted is None or wanted & {"l2-detector", "l2-defeat"}):
        rows.extend(l2_rows(folder, device))

    print(f"device: {device}" + (f" ({torch.cuda.get_device_name()}), _sleep cycles for {COST_US:.0f} us: {cycles}"
                                 if device == "cuda" else ""))
    header = ("attack", "expected", "observed", "ok")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(3)]
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths + [2])))
    print("-+-".join("-" * w for w in widths + [2]))
    for name, expected, observed, ok in rows:
        print(" | ".join([name.ljust(widths[0]), expected.ljust(widths[1]), observed.ljust(widths[2]),
                          "ok" if ok else "NOT OK"]))
    print(f"{sum(r[3] for r in rows)}/{len(rows)} ok in {time.perf_counter() - started:.0f} s; files in {folder}")
    return 0 if rows and all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
