"""What the leaderboard publishes about a run: fields the server computes, never a report's text.

A report is written by the evaluator, but a submission controls much of it (exception texts, its
own prints, the evaluator's messages quoting input seeds). So the public view of a run is built
here from validated values only: per case the shape (batch, n, cond, case), a status from a fixed
set, the times and gate margins as finite floats, and no seed. A failed verification is published
as a failure class with a short message that ``scrub`` has passed over: printable text only, every
long digit run removed, cut to ``MESSAGE_CHARS``. Nothing here depends on the secret (no "replace
the known secret numbers" step, which would answer guesses).
"""

from __future__ import annotations

import math
import re

MESSAGE_CHARS = 200
STATUSES = ("pass", "fail", "timeout", "error")
CASE_NAME = re.compile(r"^[a-z0-9_-]{1,32}$")     # the evaluator's case kinds (dense, upper, ...)

# Failure classes of a worker-verified run, and what each one publishes.
FAILURES = {
    "case-failed": "a case did not pass",
    "report-invalid": "the verified report was not accepted",
    "wrong-seed": "the run did not use this job's seed",
    "evaluator-exit": "the evaluator stopped without a report",
    "timeout": "the evaluator ran past the worker's time limit",
    "no-report": "the worker sent no report",
    "bad-job": "the worker could not start the job",
    "worker-lost": "no worker finished the verification",
    "legacy": "failed (recorded before messages were scrubbed; details withheld)",
}

# A run of digits, possibly broken by separators, e.g. 106446569759635746 or 1_064_465 or 1,064,465.
_NUMBER_RUN = re.compile(r"\d(?:[\d_,.' ]*\d)?")


def _hide_long_numbers(match: re.Match) -> str:
    digits = sum(ch.isdigit() for ch in match.group(0))
    return "#" if digits >= 5 else match.group(0)


def scrub(text, limit: int = MESSAGE_CHARS) -> str:
    """``text`` made safe to publish: one line of printable characters, no run of 5 or more digits
    (every secret-derived seed has 10 or more), at most ``limit`` characters."""
    line = "".join(ch if ch.isprintable() else " " for ch in str(text))
    line = " ".join(_NUMBER_RUN.sub(_hide_long_numbers, line).split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _number(value, *, low: float = -math.inf, high: float = math.inf) -> float | None:
    """A finite float within [low, high], else None (never raises)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and low <= value <= high else None


def _count(value) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10**9:
        return None
    return value


def _shape(spec) -> dict:
    spec = spec if isinstance(spec, dict) else {}
    case = spec.get("case", "dense")
    return {"batch": _count(spec.get("batch")), "n": _count(spec.get("n")), "cond": _count(spec.get("cond")),
            "case": case if isinstance(case, str) and CASE_NAME.match(case) else "other"}


def public_cases(report) -> list[dict]:
    """The per-case table of a report, from validated fields only; any report, never raises."""
    if not isinstance(report, dict):
        return []
    out = []
    for section, kind in (("tests", "test"), ("benchmarks", "benchmark")):
        entries = report.get(section)
        for entry in entries[:1000] if isinstance(entries, list) else []:
            if not isinstance(entry, dict):
                continue
            stats = entry.get("stats") if isinstance(entry.get("stats"), dict) else {}
            status = entry.get("status")
            out.append({"kind": kind, **_shape(entry.get("spec")),
                        "status": status if status in STATUSES else "other",
                        "mean_ns": _number(stats.get("mean"), low=0.0),
                        "err_ns": _number(stats.get("err"), low=0.0),
                        "best_ns": _number(stats.get("best"), low=0.0),
                        "runs": _count(stats.get("runs")),
                        "baseline_ns": _number(entry.get("baseline_mean"), low=0.0),
                        "factor_margin": _number(entry.get("factor_margin")),
                        "orth_margin": _number(entry.get("orth_margin"))})
    return out


def case_label(case: dict) -> str:
    return f"{case['batch']}×{case['n']}, cond {case['cond']}, {case['case']}"


def first_failed_case(report) -> str | None:
    """'test 1×4, cond 1, dense: fail: <scrubbed message>' for the first case that did not pass."""
    if not isinstance(report, dict):
        return None
    for section, kind in (("tests", "test"), ("benchmarks", "benchmark")):
        entries = report.get(section)
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("status") != "pass":
                status = entry.get("status") if entry.get("status") in STATUSES else "other"
                return scrub(f"{kind} {case_label(_shape(entry.get('spec')))}: {status}: "
                             f"{entry.get('message') or ''}")
    return None


def failure_message(failure: str, detail: str = "") -> str:
    """The published message of a failed verification: its class's text, then a scrubbed detail."""
    text = FAILURES[failure]
    return scrub(f"{text}: {detail}" if detail else text)
