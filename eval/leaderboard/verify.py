"""Checking a JSON report against a leaderboard's spec, recomputing its score, hiding its seeds.

The server never trusts a score it is sent: it checks that the report is for the leaderboard's
spec (same sha256), that every test and benchmark case of the spec is there once and passed, and
computes the geometric mean of the per-case means itself.
"""

from __future__ import annotations

import math
import re
import tempfile
from collections import Counter
from pathlib import Path

from eval.score import score_seconds
from eval.specs import Spec, SpecError, load_spec, mix_seed

MAX_SOURCE_BYTES = 1 << 20       # 1 MiB
MAX_REPORT_BYTES = 4 << 20       # 4 MiB
ACCEPTED_MODES = ("leaderboard", "benchmark")


class ReportError(ValueError):
    """A report that cannot be accepted; the message says what is wrong, in one line."""


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
    means = []
    for i, entry in enumerate(report["benchmarks"]):
        stats = entry.get("stats")
        mean = stats.get("mean") if isinstance(stats, dict) else None
        if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not math.isfinite(mean) or mean <= 0:
            raise ReportError(f"report: benchmarks[{i}]: stats.mean must be a positive number of ns")
        means.append(float(mean))
    if not means:
        raise ReportError("report: no benchmark ran, so there is no score")
    return score_seconds(means)


# --------------------------------------------------------------------------------------------
# What may be shown: never the secret seed, nor a case seed derived from it.
# --------------------------------------------------------------------------------------------

def secret_numbers(spec: Spec, secret_seed: int) -> set[str]:
    """The secret seed and every case seed mixed from it, as text."""
    numbers = {str(secret_seed)}
    for case in spec.tests + spec.benchmarks:
        numbers.add(str(mix_seed(case.seed, secret_seed)))
    return numbers


def public_report(report, hidden: set[str] = frozenset()):
    """A copy of a report without any ``seed`` field and with ``hidden`` numbers blanked in text."""
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, hidden), key=len, reverse=True)) + r")\b") \
        if hidden else None

    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k != "seed"}
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, str) and pattern is not None:
            return pattern.sub("[secret]", value)
        return value
    return clean(report)
