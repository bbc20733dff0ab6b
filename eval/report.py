"""What a run reports: the versioned JSON report and the rich table on the terminal.

The JSON report (version 1) is described in docs/architecture.md; ``build_report`` makes it from
the ``CaseResult``s of a run and ``render_report`` draws the table from that same dict, so the
screen and the file can never disagree.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.metadata
import json
import platform
from pathlib import Path

from rich.console import Console
from rich.table import Table

from eval.score import gflops, score_seconds
from eval.timing import SLOW_REPEAT_RATIO

REPORT_VERSION = 1
MARGIN_WARN = 0.5  # a gate margin above this fraction of the gate is highlighted


def file_sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_name() -> str:
    """The CPU's model name where the system says it (Linux), else the machine type."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def device_info(device: str) -> dict:
    """Device kind and name, and the torch / triton / CUDA versions this run used."""
    import torch

    name = torch.cuda.get_device_name(0) if device == "cuda" else cpu_name()
    return {"kind": device, "name": name, "torch": torch.__version__,
            "triton": _version("triton"), "cuda": torch.version.cuda}


def _stats_dict(stats) -> dict | None:
    if stats is None:
        return None
    return {"runs": int(stats.runs), "mean": float(stats.mean), "std": float(stats.std),
            "err": float(stats.err), "best": float(stats.best), "worst": float(stats.worst),
            "median": float(stats.median), "slow": int(stats.slow)}


def contest_entry(result) -> dict:
    """The contest's eval.py's verdict beside ours: ``status`` (null: cannot be told from this run) and,
    where this evaluator is stricter and that changed the outcome, why."""
    return {"status": result.contest_verdict(), "stricter": result.stricter or None}


def test_entry(result) -> dict:
    return {"spec": result.case.as_dict(), "status": result.status, "message": result.message,
            "factor_margin": result.factor_margin, "orth_margin": result.orth_margin,
            "flags": list(result.flags), "wall_s": round(float(result.wall_s), 4),
            "contest": contest_entry(result)}


def benchmark_entry(result, baseline=None) -> dict:
    """A benchmark's entry; ``baseline`` is the reference's ``CaseResult`` for the same case."""
    entry = test_entry(result)
    stats = _stats_dict(result.stats) if result.status == "pass" else None
    entry["stats"] = stats
    entry["gflops"] = (gflops(result.case.batch, result.case.n, stats["mean"])
                       if stats and stats["mean"] > 0 else None)
    base_mean = None
    if baseline is not None and baseline.status == "pass" and baseline.stats is not None:
        base_mean = float(baseline.stats.mean)
    entry["baseline_mean"] = base_mean
    entry["speedup"] = base_mean / stats["mean"] if base_mean and stats and stats["mean"] > 0 else None
    entry["late"] = {"repeats": int(result.late_repeats), "ns_per_call": float(result.late_ns)}
    entry["times_ns"] = [round(float(t), 1) for t in result.times_ns] if stats else []
    # The entry's order follows the schema: spec, status, message, stats, gflops, baseline…, margins.
    order = ("spec", "status", "message", "stats", "gflops", "baseline_mean", "speedup",
             "factor_margin", "orth_margin", "flags", "late", "times_ns", "wall_s", "contest")
    return {key: entry[key] for key in order}


def score_entry(tests: list[dict], benchmarks: list[dict], complete: bool = True) -> dict:
    """``passed``: everything that ran passed (and nothing was skipped); ``seconds``: geometric
    mean of the benchmark means, null when any benchmark failed or none ran."""
    everything = tests + benchmarks
    passed = complete and bool(everything) and all(e["status"] == "pass" for e in everything)
    seconds = None
    if benchmarks and all(e["status"] == "pass" and e["stats"] for e in benchmarks):
        seconds = score_seconds(e["stats"]["mean"] for e in benchmarks)
    return {"passed": passed, "seconds": seconds,
            "us": seconds * 1e6 if seconds is not None else None}


def build_report(*, mode: str, submission, spec, seed, device: str, started_at: str, wall_s: float,
                 warnings: list[dict], tests: list, benchmarks: list, baselines: dict | None = None,
                 complete: bool = True, defences: dict | None = None, phases: list | None = None,
                 settings: dict | None = None) -> dict:
    """The version-1 JSON report. ``tests`` / ``benchmarks`` are ``CaseResult``s; ``baselines``
    maps a benchmark's index to the reference's ``CaseResult`` for it; ``defences`` is the wall time
    the integrity defences (fresh inputs, re-checks) cost inside the timed phases; ``phases`` the
    runs the mode made (the contest's modes, each with its own time limit); ``settings`` the timed
    loops' bounds."""
    baselines = baselines or {}
    test_entries = [test_entry(r) for r in tests]
    bench_entries = [benchmark_entry(r, baselines.get(i)) for i, r in enumerate(benchmarks)]
    return {
        "version": REPORT_VERSION,
        "mode": mode,
        "submission": {"path": str(submission), "sha256": file_sha256(submission)},
        "spec": {"path": spec.path, "sha256": spec.sha256},
        "seed": seed,
        "device": device_info(device),
        "started_at": started_at,
        "wall_s": round(float(wall_s), 3),
        "warnings": list(warnings),
        "tests": test_entries,
        "benchmarks": bench_entries,
        "score": score_entry(test_entries, bench_entries, complete),
        "defences": dict(defences or {"seconds": 0.0, "timed_wall_s": 0.0}),
        "phases": list(phases or []),
        "settings": dict(settings or {}),
    }


def write_json(report: dict, path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")


# --------------------------------------------------------------------------------------------
# Terminal
# --------------------------------------------------------------------------------------------

def format_ns(ns: float | None) -> str:
    """A time in nanoseconds with a readable unit."""
    if ns is None:
        return "—"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3f} {unit}"
    return f"{ns:.0f} ns"


def case_label(spec: dict) -> str:
    return f"b{spec['batch']} n{spec['n']} c{spec['cond']} s{spec['seed']} {spec['case']}"


def gate_margin(entry: dict) -> float | None:
    margins = [m for m in (entry.get("factor_margin"), entry.get("orth_margin")) if m is not None]
    return max(margins) if margins else None


def _margin_text(margin: float | None) -> str:
    if margin is None:
        return "—"
    text = f"{100 * margin:.1f}%" if margin < 100 else ">9999%"
    if margin > 1:
        return f"[bold red]{text}[/]"
    if margin > MARGIN_WARN:
        return f"[bold yellow]{text}[/]"
    return text


def _status_text(status: str) -> str:
    colour = {"pass": "green", "fail": "red", "timeout": "magenta"}.get(status, "white")
    return f"[{colour}]{status}[/]"


def report_table(report: dict) -> Table:
    table = Table(title=f"{report['mode']}: {report['submission']['path']} on {report['device']['name']}")
    for column in ("kind", "case", "status", "mean ± err", "median", "best", "GFLOP/s", "speed-up",
                   "gate margin", "contest"):
        table.add_column(column, justify="left" if column in ("kind", "case", "status", "contest") else "right")
    for kind, entries in (("test", report["tests"]), ("bench", report["benchmarks"])):
        for entry in entries:
            stats = entry.get("stats")
            mean = f"{format_ns(stats['mean'])} ± {format_ns(stats['err'])}" if stats else "—"
            median = _median_text(stats)
            best = format_ns(stats["best"]) if stats else "—"
            rate = f"{entry['gflops']:.2f}" if entry.get("gflops") is not None else "—"
            speedup = f"{entry['speedup']:.2f}×" if entry.get("speedup") is not None else "—"
            table.add_row(kind, case_label(entry["spec"]), _status_text(entry["status"]), mean, median, best,
                          rate, speedup, _margin_text(gate_margin(entry)), _contest_text(entry))
    return table


def _median_text(stats: dict | None) -> str:
    """The median of the timed repeats, and how many were slow (a report from before the median: "—")."""
    if not stats or stats.get("median") is None:
        return "—"
    slow = stats.get("slow") or 0
    return format_ns(stats["median"]) + slow_text(slow)


def slow_text(slow: int) -> str:
    """The mark of a case with slow repeats (over SLOW_REPEAT_RATIO × the median) beside its time; "" if none."""
    return f" [bold yellow]({slow} slow)[/]" if slow else ""


def _contest_text(entry: dict) -> str:
    """The contest's verdict where it differs from ours ("?" when it cannot be told), else "same"."""
    contest = entry.get("contest") or {}
    if not contest.get("stricter"):
        return "[dim]same[/]"
    status = contest.get("status")
    return f"[bold yellow]{status or '?'}[/]"


def render_report(report: dict, console: Console) -> None:
    """The table, the failures' messages, the lint warnings and the score."""
    console.print(report_table(report))
    for kind, entries in (("test", report["tests"]), ("benchmark", report["benchmarks"])):
        for entry in entries:
            if entry["status"] != "pass":
                console.print(f"[red]{kind} {case_label(entry['spec'])}: {entry['status']}:[/] "
                              f"{entry['message']}", highlight=False)
            if entry.get("flags"):
                console.print(f"[yellow]{kind} {case_label(entry['spec'])}: flags: "
                              f"{', '.join(entry['flags'])}[/]", highlight=False)
    for entry in report["benchmarks"]:
        stats = entry.get("stats") or {}
        if stats.get("slow") and stats.get("median"):
            console.print(f"[yellow]benchmark {case_label(entry['spec'])}: {stats['slow']} of {stats['runs']} timed "
                          f"repeats over {SLOW_REPEAT_RATIO:g}× the median; the mean, which the score uses, is "
                          f"{stats['mean'] / stats['median'] - 1:.1%} above the median[/]", highlight=False)
    for warning in report["warnings"]:
        console.print(f"[yellow]warning:[/] line {warning.get('line')}: {warning.get('construct')}: "
                      f"{warning.get('text')}", highlight=False)
    score = report["score"]
    verdict = "[green]passed[/]" if score["passed"] else "[red]failed[/]"
    if score["seconds"] is not None:
        console.print(f"score: {score['seconds']:.6g} s ({score['us']:.1f} µs), geometric mean of "
                      f"{len(report['benchmarks'])} benchmark means; {verdict}; wall {report['wall_s']:.1f} s")
    else:
        console.print(f"score: — ; {verdict}; wall {report['wall_s']:.1f} s")
    for kind, entries in (("test", report["tests"]), ("benchmark", report["benchmarks"])):
        for entry in entries:
            contest = entry.get("contest") or {}
            if contest.get("stricter"):
                verdict = contest.get("status") or "cannot be told from this run"
                console.print(f"[yellow]{kind} {case_label(entry['spec'])}: stricter than the contest "
                              f"({contest['stricter']}); the contest's eval.py: {verdict}[/]", highlight=False)
    for phase in report.get("phases") or []:
        console.print(f"{phase['mode']} run: {phase['wall_s']:.1f} s of its {phase['limit_s']:g} s limit "
                      f"(the contest's limit on the whole run, import included)"
                      + ("" if phase["wall_s"] <= phase["limit_s"] else ": [magenta]exceeded[/]"), highlight=False)
    defences = report.get("defences") or {}
    if defences.get("timed_wall_s"):
        share = defences["seconds"] / defences["timed_wall_s"]
        console.print(f"integrity defences (fresh inputs, re-checks): {defences['seconds']:.1f} s of the "
                      f"{defences['timed_wall_s']:.1f} s timed phases ({share:.0%})", highlight=False)
