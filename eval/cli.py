"""The command line: ``python -m eval test|benchmark|leaderboard|profile|compare``.

Each mode loads a spec (a bad one exits 113 before anything runs), runs the submission's cases
through ``eval.runner.Session`` (the submission only ever runs in a child process), shows a
progress bar and then the table, writes the JSON report (``--json``) and the contest's
``key: value`` protocol (``--popcorn-fd`` / ``POPCORN_FD``), and exits 0 when everything passed,
114 when a case timed out, 112 on any other failure. A file the contest's upload server would
refuse (``eval.upload_rules``) is refused first, with exit 115, before anything runs.
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
                         format_ns, render_report, score_entry, slow_text, utc_now, write_json)
from eval.specs import Spec, SpecError, load_spec
from eval.timing import SLOW_REPEAT_RATIO
from eval.upload_rules import upload_refusal

EXIT_OK = 0
EXIT_FAIL = 112
EXIT_BAD_SPEC = 113
EXIT_TIMEOUT = 114
EXIT_REFUSED = 115  # the contest's upload server would refuse the file: nothing ran

REPO_ROOT = Path(__file__).resolve().parent.parent
REFERENCE = REPO_ROOT / "reference.py"

# The contest's timed loops (its eval.py): a budget of timed calls (mean × runs, seconds), at most so
# many repeats, and its warm-ups: benchmark mode times its first case once before anything is
# reported; leaderboard mode times every case before the ranked loops. Warm-up results are not used.
BENCHMARK_BUDGET_S, BENCHMARK_MAX_REPEATS = 10.0, 200
RANKED_BUDGET_S, RANKED_MAX_REPEATS = 30.0, 1000
BENCHMARK_WARMUP_BUDGET_S, RANKED_WARMUP_BUDGET_S = 0.1, 0.5
# A CPU run: in Triton's interpreter a call takes a second or more, and its time says little about a
# GPU. Each case gets at most this many repeats (the stop rule still wants three), and as many of the
# contest's inputs as one pass of about CPU_PASS_BUDGET_S holds (by the time of one call: a fast
# call keeps all of them, an interpreted kernel gets one).
CPU_BUDGET_S, CPU_MAX_REPEATS, CPU_PASS_BUDGET_S = 1.0, 10, 1.0
QUICK_BUDGET_S, QUICK_MAX_REPEATS = 1.0, 20  # --quick on a GPU: a first try in about a minute

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


def default_spec_path(quick: bool = False) -> Path:
    """specs/qr.yml with a GPU (specs/quick.yml with --quick), specs/cpu.yml without one."""
    if not cuda_available():
        return REPO_ROOT / "specs" / "cpu.yml"
    return REPO_ROOT / "specs" / ("quick.yml" if quick else "qr.yml")


@dataclasses.dataclass(frozen=True)
class Loops:
    """Bounds of a run's timed loops: the contest's, unless a CPU run, --quick or an option says otherwise."""
    budget_s: float
    max_repeats: int
    max_inputs: int | None  # None: the contest's clamp(256 MiB / input size, 1, 50)
    pass_budget_s: float | None = None  # a CPU run: inputs cut to fit a pass of about this long

    def warm_up(self, budget_s: float) -> "Loops":
        return dataclasses.replace(self, budget_s=budget_s, max_repeats=min(self.max_repeats, RANKED_MAX_REPEATS))

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def benchmark_args(self) -> dict:
        """The keyword arguments of ``Session.benchmark``."""
        return self.as_dict()


def loop_bounds(mode: str, device: str, *, budget: float | None, max_repeats: int | None,
                max_inputs: int | None, quick: bool) -> Loops:
    if mode == "leaderboard":
        loops = Loops(RANKED_BUDGET_S, RANKED_MAX_REPEATS, None)
    else:
        loops = Loops(BENCHMARK_BUDGET_S, BENCHMARK_MAX_REPEATS, None)
    if device == "cpu":
        loops = Loops(CPU_BUDGET_S, CPU_MAX_REPEATS, None, CPU_PASS_BUDGET_S)
    elif quick:
        loops = Loops(QUICK_BUDGET_S, QUICK_MAX_REPEATS, None)
    return Loops(budget if budget is not None else loops.budget_s,
                 max_repeats if max_repeats is not None else loops.max_repeats,
                 max_inputs if max_inputs is not None else loops.max_inputs, loops.pass_budget_s)


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


def refusal_at_upload(submission: Path) -> str | None:
    """Why the contest's upload server would refuse this file, as the text of one error line naming the
    file, the rule and the lines (``eval.upload_rules``); None when it would take it."""
    try:
        source = submission.read_bytes()
    except OSError as exc:
        raise click.UsageError(f"--submission: cannot read {submission}: {exc.strerror}") from None
    refusal = upload_refusal(source)
    return None if refusal is None else f"{submission}: {refusal}"


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


class PlainProgress:
    """Off a terminal (a log file, CI): one plain line on stdout per finished case, as it finishes."""

    def __init__(self):
        self.labels: list[str] = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def add(self, label: str, total: int = 1) -> int:
        self.labels.append(label)
        return len(self.labels) - 1

    def start(self, task: int) -> None:
        return None

    def advance_to(self, task: int):
        return None

    def finish(self, task: int, result) -> None:
        timing = f", mean {format_ns(result.stats.mean)} over {result.stats.runs} repeats" if result.stats else ""
        reason = "" if result.status == "pass" else f": {result.message}"
        click.echo(f"{result.status:7} {self.labels[task]}{timing} ({result.wall_s:.1f} s){reason}")
        sys.stdout.flush()


def make_progress():
    return CaseProgress() if stderr.is_terminal else PlainProgress()


# --------------------------------------------------------------------------------------------
# The modes: each is one run of the contest's eval.py (leaderboard: three), with its own time limit
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class RunOutcome:
    tests: list = dataclasses.field(default_factory=list)
    benchmarks: list = dataclasses.field(default_factory=list)
    baselines: dict = dataclasses.field(default_factory=dict)  # benchmark index → reference result
    complete: bool = True  # False when a leaderboard run stopped early
    defence_s: float = 0.0  # parent time spent on fresh inputs and re-checks of timed outputs
    timed_wall_s: float = 0.0  # wall time of the timed phases those defences belong to
    phases: list = dataclasses.field(default_factory=list)  # {"mode", "limit_s", "wall_s", "passed"}

    def all_results(self):
        return self.tests + self.benchmarks


def run_tests(session, cases, progress, popcorn: PopcornWriter):
    tasks = [progress.add(f"test  {case_label(c.as_dict())}") for c in cases]
    popcorn.test_count(len(cases))
    results = []
    for index, (case, task) in enumerate(zip(cases, tasks)):
        progress.start(task)
        result = session.test(case)
        progress.finish(task, result)
        popcorn.test(index, result)
        results.append(result)
    return results


def run_benchmarks(session, baseline_session, cases, progress, popcorn, loops: Loops, *, label="bench",
                   stop_on_failure=False):
    tasks = [progress.add(f"{label} {case_label(c.as_dict())}", total=loops.max_repeats) for c in cases]
    popcorn.benchmark_count(len(cases))
    results, baselines = [], {}
    for index, (case, task) in enumerate(zip(cases, tasks)):
        progress.start(task)
        result = session.benchmark(case, **loops.benchmark_args(), on_progress=progress.advance_to(task))
        progress.finish(task, result)
        popcorn.benchmark(index, result)
        results.append(result)
        if baseline_session is not None:
            baselines[index] = baseline_session.benchmark(case, **loops.benchmark_args())
        if stop_on_failure and result.status != "pass":
            break
    return results, baselines


def warm_up(session, cases, progress, loops: Loops) -> None:
    """The contest's warm-up: a timed loop over each case; its results are not used (a case that fails
    here fails again, on the same inputs, in its own run)."""
    for case in cases:
        task = progress.add(f"warm  {case_label(case.as_dict())}", total=loops.max_repeats)
        progress.start(task)
        result = session.benchmark(case, **loops.benchmark_args(), on_progress=progress.advance_to(task))
        progress.finish(task, result)


def mode_limit(mode: str, spec) -> float:
    """The contest's limit on a whole run of ``mode`` (its runner kills eval.py past it)."""
    return {"test": spec.test_timeout, "benchmark": spec.benchmark_timeout, "leaderboard": spec.ranked_timeout,
            "profile": spec.benchmark_timeout}[mode]


def contest_run(mode: str, spec, submission: Path, device: str, loops: Loops, *, baseline: bool,
                popcorn: PopcornWriter, progress, trace: Path | None, outcome: RunOutcome) -> bool:
    """One run of the contest's ``eval.py MODE``: a fresh child, the mode's limit on all of it (start
    and import included), the mode's warm-up. Results go into ``outcome``; True when all passed."""
    Session = session_class()
    limit = mode_limit(mode, spec)
    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        session = stack.enter_context(Session(submission, device, timeout_s=limit, run_limit_s=limit))
        base = None
        if baseline and mode in ("benchmark", "leaderboard"):
            base = stack.enter_context(Session(REFERENCE, device, timeout_s=limit, run_limit_s=limit,
                                               entry="ref_kernel"))
        if mode == "test":
            results = outcome.tests = run_tests(session, spec.tests, progress, popcorn)
        elif mode == "benchmark":
            warm_up(session, spec.benchmarks[:1], progress, loops.warm_up(BENCHMARK_WARMUP_BUDGET_S))
            results, outcome.baselines = run_benchmarks(session, base, spec.benchmarks, progress, popcorn, loops)
            outcome.benchmarks = results
        elif mode == "leaderboard":
            warm_up(session, spec.benchmarks, progress, loops.warm_up(RANKED_WARMUP_BUDGET_S))
            results, outcome.baselines = run_benchmarks(session, base, spec.benchmarks, progress, popcorn, loops,
                                                        label="rank ", stop_on_failure=True)
            outcome.benchmarks = results
            outcome.complete = outcome.complete and len(results) == len(spec.benchmarks)
        else:  # profile: the first case
            popcorn.benchmark_count(len(spec.benchmarks))
            task = progress.add(f"profile {case_label(spec.benchmarks[0].as_dict())}")
            progress.start(task)
            trace.parent.mkdir(parents=True, exist_ok=True)
            result = session.profile(spec.benchmarks[0], str(trace))
            progress.finish(task, result)
            popcorn.profile(result)
            results = outcome.benchmarks = [result]
        outcome.defence_s += session.defence_s
        outcome.timed_wall_s += session.bench_wall_s
    passed = exit_code(results) == EXIT_OK
    outcome.phases.append({"mode": mode, "limit_s": limit, "wall_s": round(time.perf_counter() - start, 3),
                           "passed": passed})
    return passed


def run_mode(mode: str, spec, submission: Path, device: str, loops: dict, *, baseline: bool,
             popcorn: PopcornWriter, trace: Path | None) -> RunOutcome:
    """A mode as the contest runs it. The leaderboard mode of a task file is the contest's ranked run:
    a test run, a benchmark run, then the leaderboard run, each stopping the next when it fails. Given
    a plain cases file it is ``eval.py leaderboard`` alone. ``loops``: bounds per timed mode."""
    phases = ("test", "benchmark", "leaderboard") if mode == "leaderboard" and not spec.cases_file else (mode,)
    outcome = RunOutcome()
    with make_progress() as progress:
        for phase in phases:
            # In a ranked run only the leaderboard run's benchmark lines are written (or a failed
            # benchmark run's): the contest reads them from a separate run of its own.
            quiet = phase == "benchmark" and len(phases) > 1
            writer = PopcornWriter(None) if quiet else popcorn
            passed = contest_run(phase, spec, submission, device, loops.get(phase), baseline=baseline,
                                 popcorn=writer, progress=progress, trace=trace, outcome=outcome)
            if not passed:
                if quiet:
                    popcorn.benchmark_count(len(spec.benchmarks))
                    for index, result in enumerate(outcome.benchmarks):
                        popcorn.benchmark(index, result)
                outcome.complete = outcome.complete and phase == phases[-1]
                break
    popcorn.check(exit_code(outcome.all_results()) == EXIT_OK and outcome.complete)
    return outcome


def evaluate(mode: str, *, casesfile, submission, specs, seed, json_path, baseline, device, popcorn_fd,
             budget=None, max_repeats=None, max_inputs=None, quick=False, trace=None) -> int:
    """Everything a mode command does; returns the exit code."""
    seed = take_env_int("POPCORN_SEED", seed, "--seed")
    popcorn_fd = take_env_int("POPCORN_FD", popcorn_fd, "--popcorn-fd")
    if casesfile and specs:
        raise click.UsageError("give the cases file either as an argument or as --specs, not both")
    submission = resolve_submission(submission)
    try:
        popcorn = PopcornWriter(popcorn_fd)
    except PopcornError as exc:
        raise click.UsageError(f"--popcorn-fd / POPCORN_FD: {exc}") from None
    # The contest refuses such a file at upload, before its eval.py runs: nothing runs here either.
    refusal = refusal_at_upload(submission)
    if refusal is not None:
        popcorn.check(False)
        popcorn.close()
        error_line("refused at upload", refusal)
        return EXIT_REFUSED
    spec = load_spec_or_exit(casesfile or specs or default_spec_path(quick))
    needed = "tests" if mode == "test" else "benchmarks"
    if not getattr(spec, needed):
        error_line("bad spec", f"{spec.path}: {needed}: {mode} mode needs at least one case")
        return EXIT_BAD_SPEC
    device = resolve_device(device)
    if seed is not None:
        spec = spec.reseeded(seed)
    loops = {timed: loop_bounds(timed, device, budget=budget, max_repeats=max_repeats, max_inputs=max_inputs,
                                quick=quick)
             for timed in ("benchmark", "leaderboard")}
    loops["profile"] = loops["test"] = None
    shown = loops.get(mode) or loops["benchmark"]

    started_at, start = utc_now(), time.perf_counter()
    warnings = lint_warnings(submission)
    try:
        outcome = run_mode(mode, spec, submission, device, loops, baseline=baseline, popcorn=popcorn,
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
                                    "timed_wall_s": round(outcome.timed_wall_s, 3)},
                          phases=outcome.phases, settings=shown.as_dict())
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
    114 a case timed out, 115 refused at upload (the contest's server would not take the file:
    the word "stream" anywhere in it, or not UTF-8).
    """


def run_options(func):
    """The options every mode shares (applied bottom-up, so listed in reverse)."""
    options = [
        click.argument("casesfile", required=False, type=click.Path(dir_okay=False)),
        click.option("--submission", default="submission.py", show_default=True,
                     help="The submission file defining custom_kernel(A) -> (H, tau)."),
        click.option("--specs", default=None,
                     help="Spec file (YAML task file or plain cases file). "
                          "Default: specs/qr.yml with a GPU (--quick: specs/quick.yml), specs/cpu.yml without."),
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
        click.option("--budget", type=click.FloatRange(min=0, min_open=True), default=None,
                     help="Seconds of timed calls per benchmark case (mean x runs, the contest's rule). "
                          "Default: the contest's (10; leaderboard 30), 1 on CPU."),
        click.option("--max-repeats", type=click.IntRange(min=1), default=None,
                     help="Most timed repeats per benchmark case. Default: the contest's (200; leaderboard "
                          "1000), 10 on CPU."),
        click.option("--max-inputs", type=click.IntRange(min=1), default=None,
                     help="Most distinct inputs per benchmark case. Default: the contest's (256 MiB of "
                          "inputs, at most 50); on CPU as many as one pass of about 1 s holds."),
        click.option("--quick", is_flag=True,
                     help="A first try: specs/quick.yml (on CPU specs/cpu.yml, already small) and short "
                          "timed loops (1 s, at most 20 repeats)."),
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
    """Time every benchmark case (the contest's loops: 10 s budget, at most 200 repeats each;
    its first case is timed once before, as a warm-up)."""
    raise SystemExit(evaluate("benchmark", **options))


@main.command()
@run_options
def leaderboard(**options):
    """The ranked run. With a task file: a test run, a benchmark run, then the leaderboard run (every
    case warmed up, then timed: 30 s budget, at most 1000 repeats), each with its own time limit;
    stops at the first failure. With a plain cases file: the leaderboard run alone."""
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
    table = Table(title=f"compare (mean ± err per call; slow: timed repeats over {SLOW_REPEAT_RATIO:g}× the median)")
    table.add_column("case")
    for name in names:
        table.add_column(name, justify="right")
    for case, results in rows:
        cells = []
        for result in results:
            if result.status == "pass" and result.stats is not None:
                cells.append(f"{format_ns(result.stats.mean)} ± {format_ns(result.stats.err)}"
                             f"{slow_text(result.stats.slow)}")
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
    refusals = [r for r in map(refusal_at_upload, paths) if r is not None]
    for refusal in refusals:
        error_line("refused at upload", refusal)
    if refusals:
        raise SystemExit(EXIT_REFUSED)
    spec = load_spec_or_exit(specs or default_spec_path())
    if not spec.benchmarks:
        error_line("bad spec", f"{spec.path}: benchmarks: compare needs at least one case")
        raise SystemExit(EXIT_BAD_SPEC)
    device = resolve_device(device)
    if seed is not None:
        spec = spec.reseeded(seed)
    loops = loop_bounds("benchmark", device, budget=None, max_repeats=None, max_inputs=None, quick=False)
    Session = session_class()
    names = [str(p) for p in paths]
    started_at, start = utc_now(), time.perf_counter()
    rows, per_submission = [], [[] for _ in paths]
    try:
        with contextlib.ExitStack() as stack:
            progress = stack.enter_context(make_progress())
            sessions = [stack.enter_context(Session(p, device, timeout_s=spec.benchmark_timeout))
                        for p in paths]
            for case in spec.benchmarks:
                results = []
                for name, session, collected in zip(names, sessions, per_submission):
                    task = progress.add(f"{name}: {case_label(case.as_dict())}", total=loops.max_repeats)
                    progress.start(task)
                    result = session.benchmark(case, **loops.benchmark_args(),
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
