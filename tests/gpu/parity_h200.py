"""Side by side on one GPU: `make eval`, the contest's eval.py and ours on the same benchmark cases,
the cost of our checks, and the integrity table. Not collected by pytest.

    python tests/gpu/parity_h200.py --contest DIR [--out DIR] [--budget-s 480] [--steps ...] [--spec PATH]
                                    [--submission PATH] [--rounds K]

DIR holds the contest's public files (eval.py, reference.py, task.py, utils.py), e.g. a copy of
../shared/contest/qr_v2 made inside the repository (``.contest/`` is git-ignored) and carried to the
GPU machine. Logs and reports go to --out (default: $OUT if set, else results/parity). Steps, in order:

  make       `make eval` (timed): our test and benchmark runs, defences, per-case means
  contest    the contest's eval.py benchmark on the spec's benchmark cases (a copy of DIR with
             submission.py beside it, POPCORN_FD to a file)
  integrity  tests/gpu/integrity.py (its table)
  gates      one fast_gates pass per benchmark shape vs one timed region of ours: what a re-check costs
  ours       `python -m eval benchmark` on the same cases file (skipped when the time left is short:
             make eval's benchmark run, on the same cases, stands in)
  rounds     only when named in --steps: --rounds (default 3) alternating runs of the contest's eval.py and
             ours on the same cases file; per case each side's mean over the rounds, its spread from run
             to run, and whether the ratio is within 2 % and within that spread

--spec (default specs/qr.yml) is the spec for every step. On a machine without a GPU the script runs
too (a check of the script itself: --spec specs/cpu.yml, and tests/fixtures/contest_cpu_shim on
PYTHONPATH so the contest's eval.py runs on a CPU). Each step has a share of --budget-s; a step that fails
or runs out of time prints what it has, and the next step runs. The summary table is printed after the
contest and ours steps and again at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

STEPS = ("make", "contest", "integrity", "gates", "ours", "rounds")
DEFAULT_STEPS = STEPS[:-1]  # "rounds" only when asked for: it takes several benchmark runs on each side
SHARE_S = {"make": 170, "contest": 210, "ours": 120, "gates": 30, "integrity": 240}  # at most, each
MIN_OURS_LEFT_S = 100  # run "ours" only if this much of the budget is left when it would start


def say(text: str = "") -> None:
    print(text, flush=True)


class Budget:
    def __init__(self, total_s: float):
        self.end = time.perf_counter() + total_s

    def left(self) -> float:
        return self.end - time.perf_counter()

    def slice(self, step: str) -> float:
        return max(10.0, min(SHARE_S[step], self.left()))


def run_logged(command: list[str], log: Path, timeout_s: float, env: dict | None = None,
               cwd: Path = ROOT, pass_fds=()) -> tuple[int | None, float]:
    """Run ``command`` with stdout and stderr to ``log``; (exit code or None on timeout, wall seconds)."""
    start = time.perf_counter()
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   pass_fds=pass_fds, start_new_session=True)
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
            code = None
    return code, time.perf_counter() - start


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("POPCORN_FD", "POPCORN_SEED")}
    env.update(extra)
    return env


# ---- steps ------------------------------------------------------------------------------------

def step_make(out: Path, budget: Budget, state: dict) -> None:
    results = out / "make_eval"
    code, wall = run_logged(["make", "eval", f"RESULTS={results}", f"SPECS={state['spec']}",
                             f"SUBMISSION={state['submission']}"], out / "make_eval.log", budget.slice("make"))
    state["make_wall_s"] = wall
    state["make_code"] = code
    test, bench = read_json(results / "test.json"), read_json(results / "benchmark.json")
    state["make_test"], state["make_bench"] = test, bench
    say(f"make eval: exit {code if code is not None else 'TIMEOUT'}, wall {wall:.1f} s")
    for name, report in (("test", test), ("benchmark", bench)):
        if report is None:
            say(f"  {name}: no report; log tail:\n{tail(out / 'make_eval.log')}")
            continue
        passed = sum(e["status"] == "pass" for e in report["tests"] + report["benchmarks"])
        total = len(report["tests"] + report["benchmarks"])
        say(f"  {name}: {passed}/{total} pass, wall {report['wall_s']:.1f} s, score {report['score']['seconds']}")
    if bench is not None:
        d = bench["defences"]
        share = d["seconds"] / d["timed_wall_s"] if d["timed_wall_s"] else float("nan")
        say(f"  defences: {d['seconds']:.1f} s of {d['timed_wall_s']:.1f} s timed phases ({100 * share:.1f}%)")


def cases_file(out: Path, state: dict) -> Path:
    from eval.specs import load_spec

    spec = load_spec(state["spec"])
    path = out / "benchmarks.txt"
    path.write_text("".join(case.contest_line() + "\n" for case in spec.benchmarks))
    return path


def read_protocol(path: Path) -> dict:
    values = {}
    try:
        for line in path.read_text().splitlines():
            key, sep, value = line.partition(": ")
            if sep:
                values[key] = value
    except OSError:
        pass
    return values


def run_contest(out: Path, cases: Path, contest: Path, submission: Path, timeout_s: float, name: str):
    """The contest's eval.py benchmark on ``cases`` (a copy of its files with ``submission`` beside them):
    (its protocol values, exit code or None on timeout, wall seconds); the protocol in ``out/NAME.popcorn``."""
    folder = Path(tempfile.mkdtemp(prefix="contest_", dir=out))
    for file in ("eval.py", "reference.py", "task.py", "utils.py"):
        shutil.copy(contest / file, folder / file)
    shutil.copy(submission, folder / "submission.py")
    protocol = out / f"{name}.popcorn"
    fd = os.open(protocol, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        code, wall = run_logged([sys.executable, "eval.py", "benchmark", str(cases)], out / f"{name}.log",
                                timeout_s, env=clean_env(POPCORN_FD=str(fd)), cwd=folder, pass_fds=(fd,))
    finally:
        os.close(fd)
    return read_protocol(protocol), code, wall


def run_ours(out: Path, cases: Path, submission: Path, timeout_s: float, name: str):
    """``python -m eval benchmark`` on ``cases``: (its JSON report or None, exit code or None, wall seconds)."""
    report = out / f"{name}.json"
    code, wall = run_logged([sys.executable, "-m", "eval", "benchmark", str(cases), "--submission", str(submission),
                             "--json", str(report)], out / f"{name}.log", timeout_s, env=clean_env())
    return read_json(report), code, wall


def exit_text(code) -> str:
    return str(code) if code is not None else "TIMEOUT"


def step_contest(out: Path, budget: Budget, state: dict, contest: Path) -> None:
    values, code, wall = run_contest(out, cases_file(out, state), contest, state["submission"],
                                     budget.slice("contest"), "contest_benchmark")
    state["contest"] = values
    count = int(values.get("benchmark-count", 0) or 0)
    done = sum(1 for i in range(count) if f"benchmark.{i}.mean" in values or f"benchmark.{i}.status" in values)
    say(f"contest eval.py benchmark: exit {exit_text(code)}, wall {wall:.1f} s, {done}/{count} cases reported")
    if code not in (0,):
        say(tail(out / "contest_benchmark.log"))


def step_ours(out: Path, budget: Budget, state: dict) -> None:
    if budget.left() < MIN_OURS_LEFT_S:
        say(f"ours: skipped ({budget.left():.0f} s left); make eval's benchmark run stands in")
        return
    state["ours"], code, wall = run_ours(out, cases_file(out, state), state["submission"], budget.slice("ours"),
                                         "ours_benchmark")
    say(f"ours: python -m eval benchmark on the same cases file: exit {exit_text(code)}, wall {wall:.1f} s")


def step_rounds(out: Path, budget: Budget, state: dict, contest: Path, rounds: int) -> None:
    """``rounds`` alternating runs of the contest's eval.py and ours on the benchmark cases (ours first in odd
    rounds, so that a drift of the machine falls on both sides), to compare the means against each side's
    own spread from run to run."""
    cases = cases_file(out, state)
    folder = out / "rounds"
    folder.mkdir(exist_ok=True)
    state["rounds"] = {"contest": [], "ours": []}
    for r in range(rounds):
        for side in (("contest", "ours") if r % 2 == 0 else ("ours", "contest")):
            runs_left = 2 * rounds - len(state["rounds"]["contest"]) - len(state["rounds"]["ours"])
            timeout_s = max(10.0, min(SHARE_S["contest"], budget.left() / runs_left))
            if side == "contest":
                result, code, wall = run_contest(folder, cases, contest, state["submission"], timeout_s,
                                                 f"contest_{r}")
            else:
                result, code, wall = run_ours(folder, cases, state["submission"], timeout_s, f"ours_{r}")
            state["rounds"][side].append(result or {})
            say(f"  round {r + 1} {side}: exit {exit_text(code)}, wall {wall:.1f} s")


def rounds_summary(state: dict) -> None:
    """Per case: each side's mean over the rounds and its spread (largest / smallest round mean − 1), the
    ratio of the two means, and whether it is within 2 % and within the larger of the two spreads."""
    from eval.specs import load_spec

    rounds = state.get("rounds")
    if not rounds:
        return
    say(f"per case over {len(rounds['ours'])} rounds a side (mean of the rounds' means; spread = max/min − 1):")
    say(f"  {'case':34} {'ours ms':>9} {'spread':>7} {'contest ms':>10} {'spread':>7} {'ratio':>7}  "
        "within 2%  within spread")
    for i, case in enumerate(load_spec(state["spec"]).benchmarks):
        ours = [r["benchmarks"][i]["stats"]["mean"] / 1e6 for r in rounds["ours"]
                if i < len(r.get("benchmarks", [])) and r["benchmarks"][i].get("stats")]
        contest = [float(v[f"benchmark.{i}.mean"]) / 1e6 for v in rounds["contest"] if v.get(f"benchmark.{i}.mean")]
        label = f"b{case.batch} n{case.n} c{case.cond} {case.case}"
        if not ours or not contest:
            say(f"  {label:34} (missing: ours {len(ours)}, contest {len(contest)} rounds with a mean)")
            continue
        o, c = sum(ours) / len(ours), sum(contest) / len(contest)
        o_spread, c_spread = max(ours) / min(ours) - 1, max(contest) / min(contest) - 1
        ratio = o / c
        say(f"  {label:34} {o:9.3f} {100 * o_spread:6.1f}% {c:10.3f} {100 * c_spread:6.1f}% {ratio:7.3f}  "
            f"{'yes' if abs(ratio - 1) <= 0.02 else 'no':9}  {'yes' if abs(ratio - 1) <= max(o_spread, c_spread) else 'no'}")


def step_gates(out: Path, budget: Budget, state: dict) -> None:
    """One fast_gates pass (all inputs of a repeat) per benchmark shape, against our timed region."""
    import torch

    import reference
    from eval.gates import fast_gates
    from eval.runner import bench_input_count, bench_seeds
    from eval.specs import load_spec

    ours = state.get("ours") or state.get("make_bench") or {}
    means = {json.dumps(e["spec"], sort_keys=True): e["stats"]["mean"] for e in ours.get("benchmarks", [])
             if e.get("stats")}
    end = time.perf_counter() + budget.slice("gates")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    say("re-check cost per timed repeat (fast_gates on every output of one pass, float64):")
    say(f"  {'case':34} {'inputs':>6} {'check ms':>9} {'region ms':>9} {'check/region':>12}")
    for case in load_spec(state["spec"]).benchmarks:
        if time.perf_counter() > end:
            say("  (out of time)")
            break
        count = bench_input_count(4 * case.batch * case.n * case.n)
        A = torch.cat([reference.generate_input(case.batch, case.n, case.cond, s, case.case, device=device)
                       for s in bench_seeds(case.seed, count)])
        H, tau = torch.geqrf(A)
        fast_gates(A, H, tau)
        float(A.sum())  # waits for the device
        start = time.perf_counter()
        for _ in range(3):
            factor, orth = fast_gates(A, H, tau)
            float(factor.max() + orth.max())
        check_ms = (time.perf_counter() - start) / 3 * 1e3
        mean = means.get(json.dumps(case.as_dict(), sort_keys=True))
        region_ms = mean * count / 1e6 if mean else float("nan")
        label = f"b{case.batch} n{case.n} c{case.cond} {case.case}"
        say(f"  {label:34} {count:6d} {check_ms:9.2f} {region_ms:9.2f} {check_ms / region_ms:12.2f}")
        del A, H, tau, factor, orth
        if device == "cuda":
            torch.cuda.empty_cache()


def step_integrity(out: Path, budget: Budget, state: dict) -> None:
    code, wall = run_logged([sys.executable, "tests/gpu/integrity.py", "--keep", str(out / "integrity")],
                            out / "integrity.log", budget.slice("integrity"), env=clean_env())
    say(f"integrity: exit {code if code is not None else 'TIMEOUT'}, wall {wall:.1f} s")
    say(tail(out / "integrity.log", 30))


# ---- summary ------------------------------------------------------------------------------------

def summary(state: dict) -> None:
    from eval.specs import load_spec

    say()
    say("=" * 100)
    cases = load_spec(state["spec"]).benchmarks
    ours = state.get("ours") or state.get("make_bench")
    source = "python -m eval benchmark (cases file)" if state.get("ours") else "make eval's benchmark run"
    contest = state.get("contest") or {}
    say(f"per case, mean per call: ours ({source}) vs the contest's eval.py, same device, same submission")
    say(f"  {'case':34} {'ours ms':>9} {'contest ms':>10} {'ratio':>7}  {'ours':6} {'contest':7} contest-equiv.")
    ratios = []
    entries = (ours or {}).get("benchmarks", [])
    for i, case in enumerate(cases):
        entry = entries[i] if i < len(entries) else None
        ours_ms = entry["stats"]["mean"] / 1e6 if entry and entry.get("stats") else None
        contest_mean = contest.get(f"benchmark.{i}.mean")
        contest_ms = float(contest_mean) / 1e6 if contest_mean else None
        contest_status = "pass" if contest_mean else contest.get(f"benchmark.{i}.status", "—")
        ratio = ours_ms / contest_ms if ours_ms and contest_ms else None
        if ratio:
            ratios.append(ratio)
        equiv = ((entry.get("contest") or {}).get("status") or "?") if entry else "—"
        label = f"b{case.batch} n{case.n} c{case.cond} {case.case}"
        say(f"  {label:34} {ours_ms if ours_ms is not None else float('nan'):9.3f} "
            f"{contest_ms if contest_ms is not None else float('nan'):10.3f} "
            f"{ratio if ratio else float('nan'):7.3f}  {entry['status'] if entry else '—':6} {contest_status:7} {equiv}")
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        worst = max(ratios, key=lambda r: abs(r - 1))
        say(f"  ratio ours/contest: geometric mean {geo:.4f}, furthest from 1: {worst:.4f} over {len(ratios)} cases")
    if "make_wall_s" in state:
        say(f"make eval wall: {state['make_wall_s']:.1f} s (exit {state.get('make_code')})")
    for name in ("make_test", "make_bench", "ours"):
        report = state.get(name)
        if report:
            d = report.get("defences") or {}
            share = d["seconds"] / d["timed_wall_s"] if d.get("timed_wall_s") else float("nan")
            phases = ", ".join(f"{p['mode']} {p['wall_s']:.1f}/{p['limit_s']:g} s" for p in report.get("phases", []))
            say(f"{name}: wall {report['wall_s']:.1f} s; defences {d.get('seconds', 0):.1f} s of "
                f"{d.get('timed_wall_s', 0):.1f} s timed ({100 * share:.1f}%); runs: {phases}")
    say("=" * 100)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contest", required=True, type=Path, help="folder with the contest's eval.py etc.")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or ROOT / "results"))
    parser.add_argument("--budget-s", type=float, default=480.0, help="soft limit on the whole script")
    parser.add_argument("--steps", nargs="*", choices=STEPS, default=list(DEFAULT_STEPS))
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs per side in the rounds step")
    parser.add_argument("--spec", type=Path, default=ROOT / "specs" / "qr.yml")
    parser.add_argument("--submission", type=Path, default=ROOT / "submission.py")
    args = parser.parse_args()
    contest = args.contest.resolve()
    if not (contest / "eval.py").is_file():
        print(f"--contest {contest}: no eval.py there", file=sys.stderr)
        return 2
    out = (args.out / "parity").resolve()
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(args.budget_s)
    state: dict = {"spec": args.spec.resolve(), "submission": args.submission.resolve()}
    for step in STEPS:
        if step not in args.steps:
            continue
        say(f"--- {step} ({budget.left():.0f} s left) ---")
        try:
            if step == "contest":
                step_contest(out, budget, state, contest)
            elif step == "rounds":
                step_rounds(out, budget, state, contest, max(1, args.rounds))
            else:
                {"make": step_make, "ours": step_ours, "gates": step_gates, "integrity": step_integrity}[step](
                    out, budget, state)
        except Exception as exc:  # a step's failure must not lose the others' results
            say(f"{step}: failed: {type(exc).__name__}: {exc}")
        if step == "contest":
            summary(state)
    if "ours" in state:
        summary(state)
    rounds_summary(state)
    (out / "summary.json").write_text(json.dumps({k: v for k, v in state.items()}, indent=1, default=str))
    say(f"logs and reports: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
