"""The command line: ``python -m eval test|benchmark|leaderboard|profile|compare``.

Each mode loads a spec (a bad one exits 113 before anything runs), runs the submission's cases
through ``eval.runner.Session`` (the submission only ever runs in a child process), shows a
progress bar and then the table, writes the JSON report (``--json``) and the contest's
``key: value`` protocol (``--popcorn-fd`` / ``POPCORN_FD``), and exits 0 when everything passed,
114 when a case timed out, 112 on any other failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from eval.popcorn import PopcornError, PopcornWriter
from eval.report import (benchmark_entry, build_report, case_label, device_info, file_sha256,
                         format_ns, render_report, score_entry, utc_now, write_json)
from eval.specs import Spec, SpecError, load_spec

EXIT_OK = 0
EXIT_FAIL = 112
EXIT_BAD_SPEC = 113
EXIT_TIMEOUT = 114

REPO_ROOT = Path(__file__).resolve().parent.parent
REFERENCE = REPO_ROOT / "reference.py"

BENCHMARK_BUDGET_S, BENCHMARK_MAX_REPEATS = 10.0, 200
RANKED_BUDGET_S, RANKED_MAX_REPEATS = 30.0, 1000

# Off a terminal (CI logs, files) lines are never wrapped and tables get room for every column.
stdout = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def error_line(prefix: str, text: str) -> None:
    """One plain line on stderr (never wrapped, no markup): how every error is reported."""
    click.echo(f"{prefix}: {text}", err=True)


# --------------------------------------------------------------------------------------------
# Resolving options (environment variables are consumed and removed here, before any child starts)
# --------------------------------------------------------------------------------------------

def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def default_spec_path() -> Path:
    return REPO_ROOT / "specs" / ("qr.yml" if cuda_available() else "cpu.yml")


def take_env_int(name: str, given: int | None, option: str) -> int | None:
    """``given`` if set, else the integer in environment variable ``name``; the variable is
    removed from this process's environment either way so no child inherits it."""
    raw = os.environ.pop(name, None)
    if given is not None:
        return given
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw.strip())
    except ValueError:
        raise click.UsageError(f"{name}={raw!r} is not an integer (it stands for {option})") from None


def resolve_device(device: str | None) -> str:
    if device is None:
        return "cuda" if cuda_available() else "cpu"
    if device == "cuda" and not cuda_available():
        raise click.UsageError("--device cuda: no CUDA device is available here")
    return device


def resolve_submission(path: str) -> Path:
    submission = Path(path)
    if not submission.is_file():
        raise click.UsageError(f"--submission: no such file: {path}")
    return submission


def load_spec_or_exit(path) -> Spec:
    try:
        return load_spec(path)
    except SpecError as exc:
        error_line("bad spec", str(exc))
        raise SystemExit(EXIT_BAD_SPEC) from None


def lint_warnings(submission: Path) -> list[dict]:
    """Static warnings on the submission's source (``eval.lint``); none while it does not exist."""
    try:
        from eval.lint import lint_source
    except ImportError:
        return []
    try:
        source = submission.read_text(encoding="utf-8", errors="replace")
        return [dict(w) for w in lint_source(source)]
    except Exception as exc:  # a linter bug must not stop an evaluation
        return [{"line": None, "construct": "lint", "text": f"lint failed: {type(exc).__name__}: {exc}"}]


def session_class():
    try:
        from eval.runner import Session
    except ImportError as exc:
        error_line("error", f"the evaluator's runner cannot be imported: {exc}")
        raise SystemExit(EXIT_FAIL) from None
    return Session


def exit_code(results) -> int:
    results = list(results)
    if any(r.status == "timeout" for r in results):
        return EXIT_TIMEOUT
    if any(r.status != "pass" for r in results):
        return EXIT_FAIL
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# Progress: one task per case
# --------------------------------------------------------------------------------------------

class CaseProgress:
    """A rich progress display with one task per case; benchmarks advance with ``on_progress``."""

    def __init__(self):
        self.labels: dict[int, str] = {}
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=stderr, transient=False)

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def add(self, label: str, total: int = 1) -> int:
        task = self.progress.add_task(label, total=total, start=False)
        self.labels[task] = label
        return task

    def start(self, task: int) -> None:
        self.progress.start_task(task)

    def advance_to(self, task: int):
        """An ``on_progress(done, total)`` callback for ``Session.benchmark``."""
        def on_progress(done: int, total: int) -> None:
            self.progress.update(task, completed=done, total=max(total, 1))
        return on_progress

    def finish(self, task: int, result) -> None:
        mark = {"pass": "[green]✓[/]", "timeout": "[magenta]⌛[/]"}.get(result.status, "[red]✗[/]")
        total = next(t.total for t in self.progress.tasks if t.id == task) or 1
        self.progress.update(task, description=f"{mark} {self.labels[task]}", completed=total)
        self.progress.stop_task(task)


# --------------------------------------------------------------------------------------------
# The modes
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class RunOutcome:
    tests: list = dataclasses.field(default_factory=list)
    benchmarks: list = dataclasses.field(default_factory=list)
    baselines: dict = dataclasses.field(default_factory=dict)  # benchmark index → reference result
    complete: bool = True  # False when a leaderboard run stopped early
    defence_s: float = 0.0  # parent time spent on fresh inputs and re-checks of timed outputs
    timed_wall_s: float = 0.0  # wall time of the timed phases those defences belong to

    def all_results(self):
        return self.tests + self.benchmarks


def run_tests(session, cases, progress: CaseProgress, popcorn: PopcornWriter, *, stop_on_failure=False):
    tasks = [progress.add(f"test  {case_label(c.as_dict())}") for c in cases]
    popcorn.test_count(len(cases))
    results = []
    for index, (case, task) in enumerate(zip(cases, tasks)):
        progress.start(task)
        result = session.test(case)
        progress.finish(task, result)
        popcorn.test(index, result)
        results.append(result)
        if stop_on_failure and result.status != "pass":
            break
    return results


def run_benchmarks(session, baseline_session, cases, progress, popcorn, *, budget_s, max_repeats,
                   stop_on_failure=False):
    tasks = [progress.add(f"bench {case_label(c.as_dict())}", total=max_repeats) for c in cases]
    popcorn.benchmark_count(len(cases))
    results, baselines = [], {}
    for index, (case, task) in enumerate(zip(cases, tasks)):
        progress.start(task)
        result = session.benchmark(case, budget_s=budget_s, max_repeats=max_repeats,
                                   on_progress=progress.advance_to(task))
        progress.finish(task, result)
        popcorn.benchmark(index, result)
        results.append(result)
        if baseline_session is not None:
            baselines[index] = baseline_session.benchmark(case, budget_s=budget_s, max_repeats=max_repeats)
        if stop_on_failure and result.status != "pass":
            break
    return results, baselines


def warm_up(session, cases, progress):
    """Leaderboard warm-up: every benchmark case once, checked like a test. Returns the first
    failure (relabelled as that benchmark's failure) or None."""
    tasks = [progress.add(f"warm  {case_label(c.as_dict())}") for c in cases]
    for index, (case, task) in enumerate(zip(cases, tasks)):
        progress.start(task)
        result = session.test(case)
        progress.finish(task, result)
        if result.status != "pass":
            return index, dataclasses.replace(result, kind="benchmark", message=f"warm-up: {result.message}")
    return None


def run_mode(mode: str, spec, submission: Path, device: str, *, baseline: bool, popcorn: PopcornWriter,
             trace: Path | None) -> RunOutcome:
    Session = session_class()
    timeout = {"test": spec.test_timeout, "benchmark": spec.benchmark_timeout,
               "leaderboard": spec.ranked_timeout, "profile": spec.benchmark_timeout}[mode]
    outcome = RunOutcome()
    with contextlib.ExitStack() as stack:
        progress = stack.enter_context(CaseProgress())
        session = stack.enter_context(Session(submission, device, timeout_s=timeout))
        base = None
        if baseline and mode in ("benchmark", "leaderboard"):
            base = stack.enter_context(Session(REFERENCE, device, timeout_s=timeout, entry="ref_kernel"))

        if mode == "test":
            outcome.tests = run_tests(session, spec.tests, progress, popcorn)
        elif mode == "benchmark":
            outcome.benchmarks, outcome.baselines = run_benchmarks(
                session, base, spec.benchmarks, progress, popcorn,
                budget_s=BENCHMARK_BUDGET_S, max_repeats=BENCHMARK_MAX_REPEATS)
        elif mode == "leaderboard":
            run_leaderboard(session, base, spec, progress, popcorn, outcome)
        elif mode == "profile":
            case = spec.benchmarks[0]
            task = progress.add(f"profile {case_label(case.as_dict())}")
            progress.start(task)
            trace.parent.mkdir(parents=True, exist_ok=True)
            result = session.profile(case, str(trace))
            progress.finish(task, result)
            popcorn.benchmark_count(1)
            popcorn.profile(0, result, str(trace))
            outcome.benchmarks = [result]
        outcome.defence_s, outcome.timed_wall_s = session.defence_s, session.bench_wall_s
    popcorn.check(exit_code(outcome.all_results()) == EXIT_OK and outcome.complete)
    return outcome


def run_leaderboard(session, base, spec, progress, popcorn, outcome: RunOutcome) -> None:
    """Tests, then every benchmark once (warm-up, checked), then the timed benchmarks; stop at the
    first failure. A plain cases file's tests are its benchmarks, so the warm-up covers them."""
    if spec.tests != spec.benchmarks:
        outcome.tests = run_tests(session, spec.tests, progress, popcorn, stop_on_failure=True)
        if exit_code(outcome.tests) != EXIT_OK or len(outcome.tests) < len(spec.tests):
            outcome.complete = False
            return
    failure = warm_up(session, spec.benchmarks, progress)
    if failure is not None:
        index, result = failure
        popcorn.benchmark_count(len(spec.benchmarks))
        popcorn.benchmark(index, result)
        outcome.benchmarks = [result]
        outcome.complete = False
        return
    outcome.benchmarks, outcome.baselines = run_benchmarks(
        session, base, spec.benchmarks, progress, popcorn,
        budget_s=RANKED_BUDGET_S, max_repeats=RANKED_MAX_REPEATS, stop_on_failure=True)
    outcome.complete = len(outcome.benchmarks) == len(spec.benchmarks)


def evaluate(mode: str, *, casesfile, submission, specs, seed, json_path, baseline, device, popcorn_fd,
             trace=None) -> int:
    """Everything a mode command does; returns the exit code."""
    seed = take_env_int("POPCORN_SEED", seed, "--seed")
    popcorn_fd = take_env_int("POPCORN_FD", popcorn_fd, "--popcorn-fd")
    if casesfile and specs:
        raise click.UsageError("give the cases file either as an argument or as --specs, not both")
    submission = resolve_submission(submission)
    spec = load_spec_or_exit(casesfile or specs or default_spec_path())
    needed = "tests" if mode == "test" else "benchmarks"
    if not getattr(spec, needed):
        error_line("bad spec", f"{spec.path}: {needed}: {mode} mode needs at least one case")
        return EXIT_BAD_SPEC
    try:
        popcorn = PopcornWriter(popcorn_fd)
    except PopcornError as exc:
        raise click.UsageError(f"--popcorn-fd / POPCORN_FD: {exc}") from None
    device = resolve_device(device)
    if seed is not None:
        spec = spec.reseeded(seed)

    started_at, start = utc_now(), time.perf_counter()
    warnings = lint_warnings(submission)
    try:
        outcome = run_mode(mode, spec, submission, device, baseline=baseline, popcorn=popcorn,
                           trace=Path(trace) if trace else None)
    except SystemExit:
        raise
    except Exception as exc:  # an evaluator fault: one clear line, not a traceback
        popcorn.check(False)
        error_line("evaluator error", f"{type(exc).__name__}: {exc}")
        return EXIT_FAIL
    finally:
        popcorn.close()
    wall_s = time.perf_counter() - start

    report = build_report(mode=mode, submission=submission, spec=spec, seed=seed, device=device,
                          started_at=started_at, wall_s=wall_s, warnings=warnings,
                          tests=outcome.tests, benchmarks=outcome.benchmarks,
                          baselines=outcome.baselines, complete=outcome.complete,
                          defences={"seconds": round(outcome.defence_s, 3),
                                    "timed_wall_s": round(outcome.timed_wall_s, 3)})
    render_report(report, stdout)
    if mode == "profile":
        stdout.print(f"trace: {trace}")
    if json_path:
        write_json(report, json_path)
        stdout.print(f"report: {json_path}")
    code = exit_code(outcome.all_results())
    if code == EXIT_OK and not outcome.complete:
        code = EXIT_FAIL
    return code


# --------------------------------------------------------------------------------------------
# click
# --------------------------------------------------------------------------------------------

@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main():
    """Evaluate a batched QR submission exactly as the contest's ranked run would.

    Exit codes: 0 all passed, 112 a check failed (or the submission faulted), 113 bad spec,
    114 a case timed out.
    """


def run_options(func):
    """The options every mode shares (applied bottom-up, so listed in reverse)."""
    options = [
        click.argument("casesfile", required=False, type=click.Path(dir_okay=False)),
        click.option("--submission", default="submission.py", show_default=True,
                     help="The submission file defining custom_kernel(A) -> (H, tau)."),
        click.option("--specs", default=None,
                     help="Spec file (YAML task file or plain cases file). "
                          "Default: specs/qr.yml with a GPU, specs/cpu.yml without."),
        click.option("--seed", type=int, default=None,
                     help="Mix this into every case seed (s + (s+S)(s+S+1)//2). Default: $POPCORN_SEED."),
        click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
                     help="Write the JSON report (version 1) here."),
        click.option("--baseline", is_flag=True,
                     help="Also time reference.py's ref_kernel (torch.geqrf) and report speed-ups."),
        click.option("--device", type=click.Choice(["cuda", "cpu"]), default=None,
                     help="Evaluation device. Default: cuda when available."),
        click.option("--popcorn-fd", type=int, default=None,
                     help="Write the contest's key: value protocol to this file descriptor. "
                          "Default: $POPCORN_FD."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@main.command()
@run_options
def test(**options):
    """Check every test case of the spec (CASESFILE or --specs)."""
    raise SystemExit(evaluate("test", **options))


@main.command()
@run_options
def benchmark(**options):
    """Time every benchmark case (10 s budget, at most 200 repeats each)."""
    raise SystemExit(evaluate("benchmark", **options))


@main.command()
@run_options
def leaderboard(**options):
    """The ranked run: tests, a warm-up of every benchmark, then timed benchmarks
    (30 s budget, at most 1000 repeats); stops at the first failure."""
    raise SystemExit(evaluate("leaderboard", **options))


@main.command()
@run_options
@click.option("--trace", type=click.Path(dir_okay=False), default="results/profile_trace.json",
              show_default=True, help="Where to save the torch.profiler trace.")
def profile(**options):
    """Run the first benchmark case once under torch.profiler and save the trace."""
    raise SystemExit(evaluate("profile", **options))


# --------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------

def compare_table(names: list[str], rows: list[list]) -> Table:
    table = Table(title="compare (mean ± err per call)")
    table.add_column("case")
    for name in names:
        table.add_column(name, justify="right")
    for case, results in rows:
        cells = []
        for result in results:
            if result.status == "pass" and result.stats is not None:
                cells.append(f"{format_ns(result.stats.mean)} ± {format_ns(result.stats.err)}")
            else:
                cells.append(f"[red]{result.status}[/]")
        table.add_row(case_label(case.as_dict()), *cells)
    return table


@main.command()
@click.argument("submissions", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--specs", default=None, help="Spec file. Default: specs/qr.yml with a GPU, specs/cpu.yml without.")
@click.option("--seed", type=int, default=None, help="Mix this into every case seed. Default: $POPCORN_SEED.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Write a JSON summary here.")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default=None,
              help="Evaluation device. Default: cuda when available.")
def compare(submissions, specs, seed, json_path, device):
    """Benchmark several submissions side by side, alternating them case by case, and print each
    one's score and its ratio to the first."""
    seed = take_env_int("POPCORN_SEED", seed, "--seed")
    os.environ.pop("POPCORN_FD", None)
    paths = [resolve_submission(s) for s in submissions]
    spec = load_spec_or_exit(specs or default_spec_path())
    if not spec.benchmarks:
        error_line("bad spec", f"{spec.path}: benchmarks: compare needs at least one case")
        raise SystemExit(EXIT_BAD_SPEC)
    device = resolve_device(device)
    if seed is not None:
        spec = spec.reseeded(seed)
    Session = session_class()
    names = [str(p) for p in paths]
    started_at, start = utc_now(), time.perf_counter()
    rows, per_submission = [], [[] for _ in paths]
    try:
        with contextlib.ExitStack() as stack:
            progress = stack.enter_context(CaseProgress())
            sessions = [stack.enter_context(Session(p, device, timeout_s=spec.benchmark_timeout))
                        for p in paths]
            for case in spec.benchmarks:
                results = []
                for name, session, collected in zip(names, sessions, per_submission):
                    task = progress.add(f"{name}: {case_label(case.as_dict())}", total=BENCHMARK_MAX_REPEATS)
                    progress.start(task)
                    result = session.benchmark(case, budget_s=BENCHMARK_BUDGET_S,
                                               max_repeats=BENCHMARK_MAX_REPEATS,
                                               on_progress=progress.advance_to(task))
                    progress.finish(task, result)
                    results.append(result)
                    collected.append(result)
                rows.append((case, results))
    except Exception as exc:
        error_line("evaluator error", f"{type(exc).__name__}: {exc}")
        raise SystemExit(EXIT_FAIL) from None

    stdout.print(compare_table(names, rows))
    scores = [score_entry([], [benchmark_entry(r) for r in results]) for results in per_submission]
    first = scores[0]["seconds"]
    for name, score in zip(names, scores):
        if score["seconds"] is None:
            stdout.print(f"{name}: score — (a benchmark failed)")
            continue
        ratio = ""
        if first:
            r = score["seconds"] / first
            ratio = f"; {r:.3f}× the time of {names[0]} ({1 / r:.2f}× speed)"
        stdout.print(f"{name}: score {score['seconds']:.6g} s ({score['us']:.1f} µs){ratio}")
    if json_path:
        write_json({
            "version": 1, "mode": "compare",
            "spec": {"path": spec.path, "sha256": spec.sha256}, "seed": seed,
            "device": device_info(device), "started_at": started_at,
            "wall_s": round(time.perf_counter() - start, 3),
            "submissions": [
                {"path": name, "sha256": file_sha256(path),
                 "benchmarks": [benchmark_entry(r) for r in results], "score": score}
                for name, path, results, score in zip(names, paths, per_submission, scores)],
        }, json_path)
        stdout.print(f"report: {json_path}")
    raise SystemExit(exit_code(r for results in per_submission for r in results))


# --------------------------------------------------------------------------------------------
# Leaderboard commands (serve, upload, worker, admin) are registered below by eval/leaderboard.
# --------------------------------------------------------------------------------------------
from eval.leaderboard.cli import register as _register_leaderboard_commands  # noqa: E402

_register_leaderboard_commands(main)
