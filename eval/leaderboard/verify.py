"""Checking a JSON report against a leaderboard's spec and recomputing its score.

The server never trusts a score it is sent: it checks that the report is for the leaderboard's
spec (same sha256), that every test and benchmark case of the spec is there once and passed, that
every value a page shows is a number in a sane range, and computes the geometric mean of the
per-case means itself. What is published of a report is built by ``publish``, never the report.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections import Counter
from pathlib import Path

from eval.score import score_seconds
from eval.specs import Spec, SpecError, load_spec

MAX_SOURCE_BYTES = 1 << 20       # 1 MiB
MAX_REPORT_BYTES = 4 << 20       # 4 MiB
ACCEPTED_MODES = ("leaderboard", "benchmark")
MEAN_RANGE_NS = (1e-3, 1e13)     # a per-call mean outside this is not a measurement
MAX_NAME_CHARS = 128


class ReportError(ValueError):
    """A report that cannot be accepted; the message says what is wrong, in one line."""


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def parse_json(text: str, what: str):
    """Strict JSON: NaN and Infinity are refused, and so is nesting too deep for the parser."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ReportError(f"{what} is nested too deeply") from None
    except ValueError as exc:
        raise ReportError(f"{what} is not valid JSON: {exc}") from None


def spec_from_text(spec_name: str, spec_text: str) -> Spec:
    """Parse a spec held as text (as stored in the database) with the evaluator's own loader."""
    suffix = Path(spec_name).suffix or ".txt"
    with tempfile.TemporaryDirectory(prefix="lb-spec-") as tmp:
        path = Path(tmp) / f"spec{suffix}"
        path.write_bytes(spec_text.encode("utf-8"))
        try:
            spec = load_spec(path)
        except SpecError as exc:
            raise SpecError(str(exc).replace(str(path), spec_name)) from None
    return spec


def _case_key(entry: dict, where: str) -> tuple:
    spec = entry.get("spec") if isinstance(entry, dict) else None
    if not isinstance(spec, dict):
        raise ReportError(f"report: {where}: entry has no 'spec' mapping")
    try:
        return (int(spec["batch"]), int(spec["n"]), int(spec["cond"]), int(spec["seed"]),
                str(spec.get("case", "dense")))
    except (KeyError, TypeError, ValueError):
        raise ReportError(f"report: {where}: spec needs integer batch, n, cond, seed") from None


def _describe(key: tuple) -> str:
    batch, n, cond, seed, case = key
    return f"batch {batch}, n {n}, cond {cond}, seed {seed}, case {case}"


def _check_cases(entries, expected: list, section: str) -> None:
    if not isinstance(entries, list):
        raise ReportError(f"report: '{section}' is missing or not a list")
    got = Counter(_case_key(e, f"{section}[{i}]") for i, e in enumerate(entries))
    want = Counter((c.batch, c.n, c.cond, c.seed, c.case) for c in expected)
    missing = want - got
    if missing:
        first = next(iter(missing))
        raise ReportError(f"report: {section}: {sum(missing.values())} case(s) of the spec missing, "
                          f"e.g. {_describe(first)}")
    extra = got - want
    if extra:
        first = next(iter(extra))
        raise ReportError(f"report: {section}: case not in the spec: {_describe(first)}")
    for i, entry in enumerate(entries):
        if entry.get("status") != "pass":
            message = str(entry.get("message") or "")[:200]
            raise ReportError(f"report: {section}[{i}] ({_describe(_case_key(entry, section))}) did not pass: "
                              f"status {entry.get('status')!r}{': ' + message if message else ''}")
        if entry.get("flags"):
            raise ReportError(f"report: {section}[{i}] ({_describe(_case_key(entry, section))}) was flagged by "
                              f"the evaluator's integrity checks: {', '.join(map(str, entry['flags']))}")


def check_report(report, spec: Spec, *, expected_seed: int | None = None,
                 require_seed: bool = False) -> float:
    """Validate ``report`` against ``spec``; returns the recomputed score in seconds.

    ``expected_seed``: the seed the run must have used (the worker's secret run); without
    ``require_seed`` any seed is accepted and the cases are expected re-seeded accordingly.
    """
    if not isinstance(report, dict):
        raise ReportError("report: expected a JSON object")
    if report.get("version") != 1:
        raise ReportError(f"report: unsupported version {report.get('version')!r} (expected 1)")
    if report.get("mode") not in ACCEPTED_MODES:
        raise ReportError(f"report: mode {report.get('mode')!r} cannot be ranked "
                          f"(make it with 'python -m eval leaderboard --json PATH')")
    sent_sha = (report.get("spec") or {}).get("sha256") if isinstance(report.get("spec"), dict) else None
    if sent_sha != spec.sha256:
        raise ReportError(f"report: spec sha256 {str(sent_sha)[:12]}… does not match the leaderboard's "
                          f"spec {spec.sha256[:12]}… (run with the leaderboard's spec file)")
    seed = report.get("seed")
    if require_seed and seed != expected_seed:
        raise ReportError("report: the run did not use the leaderboard's secret seed")
    if seed is not None and not (isinstance(seed, int) and not isinstance(seed, bool)):
        raise ReportError(f"report: seed must be an integer or null, got {type(seed).__name__}")
    if seed is not None:
        spec = spec.reseeded(seed)
    _check_cases(report.get("tests"), spec.tests, "tests")
    _check_cases(report.get("benchmarks"), spec.benchmarks, "benchmarks")
    _check_shown_values(report)
    means = [float(entry["stats"]["mean"]) for entry in report["benchmarks"]]
    if not means:
        raise ReportError("report: no benchmark ran, so there is no score")
    return score_seconds(means)


def _is_number(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _check_shown_values(report: dict) -> None:
    """Every value a page shows must be what it claims to be (numbers finite and in range)."""
    device = report.get("device")
    name = device.get("name") if isinstance(device, dict) else None
    if name is not None and (not isinstance(name, str) or len(name) > MAX_NAME_CHARS):
        raise ReportError(f"report: device.name must be a string of at most {MAX_NAME_CHARS} characters")
    for section in ("tests", "benchmarks"):
        for i, entry in enumerate(report[section]):
            where = f"report: {section}[{i}]"
            for key in ("factor_margin", "orth_margin", "baseline_mean"):
                if entry.get(key) is not None and not _is_number(entry[key]):
                    raise ReportError(f"{where}: {key} must be a finite number or null")
            if entry.get("baseline_mean") is not None and not \
                    MEAN_RANGE_NS[0] <= entry["baseline_mean"] <= MEAN_RANGE_NS[1]:
                raise ReportError(f"{where}: baseline_mean must be between {MEAN_RANGE_NS[0]:g} and "
                                  f"{MEAN_RANGE_NS[1]:g} ns")
            if section == "tests":
                continue
            stats = entry.get("stats")
            if not isinstance(stats, dict):
                raise ReportError(f"{where}: stats must be an object")
            mean = stats.get("mean")
            if not _is_number(mean) or not MEAN_RANGE_NS[0] <= mean <= MEAN_RANGE_NS[1]:
                raise ReportError(f"{where}: stats.mean must be a positive number of ns between "
                                  f"{MEAN_RANGE_NS[0]:g} and {MEAN_RANGE_NS[1]:g}")
            for key in ("err", "best", "std", "worst", "median"):
                value = stats.get(key)
                if value is not None and (not _is_number(value) or not 0 <= value <= MEAN_RANGE_NS[1]):
                    raise ReportError(f"{where}: stats.{key} must be a number of ns between 0 and "
                                      f"{MEAN_RANGE_NS[1]:g}, or null")
            runs = stats.get("runs")
            if runs is not None and (isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= 10**9):
                raise ReportError(f"{where}: stats.runs must be a whole number of runs (1 to 10^9)")
            slow = stats.get("slow")
            if slow is not None and (isinstance(slow, bool) or not isinstance(slow, int)
                                     or not 0 <= slow <= (runs if isinstance(runs, int) else 10**9)):
                raise ReportError(f"{where}: stats.slow must be a whole number of repeats, at most stats.runs")
