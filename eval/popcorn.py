"""The contest's ``key: value`` result protocol, written to a file descriptor.

When the contest runs ``eval.py <mode> <casesfile>`` it passes a descriptor in ``POPCORN_FD``
and reads lines like::

    test-count: 2
    test.0.spec: batch: 20; n: 32; cond: 1; seed: 53124
    test.0.status: pass
    test.0.message: ok: …
    benchmark-count: 1
    benchmark.0.spec: …
    benchmark.0.runs: 100
    benchmark.0.mean: 123456.0
    check: pass

Only the evaluator's parent process writes here; the descriptor is made non-inheritable so no
child (and so no submission) can reach it.
"""

from __future__ import annotations

import os

STATS_FIELDS = ("runs", "mean", "std", "err", "best", "worst")


class PopcornError(ValueError):
    """The descriptor given for the protocol cannot be used."""


def _one_line(value) -> str:
    return str(value).replace("\r", "\\r").replace("\n", "\\n")


class PopcornWriter:
    """Writes protocol lines to ``fd`` (or nowhere when ``fd`` is None)."""

    def __init__(self, fd: int | None):
        self._file = None
        if fd is None:
            return
        try:
            os.fstat(fd)
        except OSError:
            raise PopcornError(f"file descriptor {fd} is not open") from None
        standard_stream = fd <= 2  # children keep their stdout/stderr; the run keeps them open
        if not standard_stream:
            os.set_inheritable(fd, False)
        self._file = os.fdopen(fd, "w", buffering=1, encoding="utf-8", closefd=not standard_stream)

    @property
    def enabled(self) -> bool:
        return self._file is not None

    def log(self, key: str, value) -> None:
        if self._file is not None:
            self._file.write(f"{key}: {_one_line(value)}\n")
            self._file.flush()

    def test_count(self, count: int) -> None:
        self.log("test-count", count)

    def test(self, index: int, result) -> None:
        """One test result (an ``eval.runner.CaseResult``)."""
        self.log(f"test.{index}.spec", result.case.contest_line())
        if result.status == "pass":
            self.log(f"test.{index}.status", "pass")
            self.log(f"test.{index}.message", result.message)
        else:
            self.log(f"test.{index}.status", "fail")
            self.log(f"test.{index}.error", result.message)

    def benchmark_count(self, count: int) -> None:
        self.log("benchmark-count", count)

    def benchmark(self, index: int, result) -> None:
        """One benchmark result: its stats (ns per call) when it passed, else status and error."""
        self.log(f"benchmark.{index}.spec", result.case.contest_line())
        if result.status == "pass" and result.stats is not None:
            for name in STATS_FIELDS:
                self.log(f"benchmark.{index}.{name}", getattr(result.stats, name))
        else:
            self.log(f"benchmark.{index}.status", "fail")
            self.log(f"benchmark.{index}.error", result.message)

    def profile(self, result) -> None:
        """The profiled (first) case, as the contest writes it: its spec, and status and error if it failed."""
        self.log("benchmark.0.spec", result.case.contest_line())
        if result.status != "pass":
            self.log("benchmark.0.status", "fail")
            self.log("benchmark.0.error", result.message)

    def check(self, passed: bool) -> None:
        self.log("check", "pass" if passed else "fail")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def parse_popcorn(text: str) -> dict[str, str]:
    """Parse protocol output back into a ``{key: value}`` dict (later lines win)."""
    result = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, value = line.partition(": ")
        if not sep:
            raise ValueError(f"line {number}: not a 'key: value' line: {line!r}")
        result[key] = value
    return result
