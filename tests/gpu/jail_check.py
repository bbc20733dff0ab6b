"""GPU host check: the leaderboard worker's isolation lets CUDA work (not collected by pytest).

    python tests/gpu/jail_check.py [--isolation namespaces|session]

Starts the evaluator exactly as the worker does (``eval.leaderboard.jail``: minimal environment, new PID and
mount namespaces, read-only mounts, no capabilities) in test mode on two small cases with this repository's
submission.py, and prints its table and exit code. Exit status: the evaluator's.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from eval.leaderboard import jail  # noqa: E402

SPEC = """\
tests:
  - {batch: 20, n: 32, cond: 1, seed: 53124}
  - {batch: 40, n: 176, cond: 1, seed: 3321}
benchmarks:
  - {batch: 20, n: 32, cond: 1, seed: 43214}
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--isolation", choices=jail.ISOLATIONS, default="namespaces")
    args = parser.parse_args()
    jail.check(args.isolation)
    with tempfile.TemporaryDirectory(prefix="jail-check-") as folder:
        work = Path(folder)
        (work / "spec.yml").write_text(SPEC)
        (work / "submission.py").write_text((ROOT / "submission.py").read_text())
        argv = [sys.executable, "-m", "eval", "test", "--submission", str(work / "submission.py"),
                "--specs", str(work / "spec.yml")]
        started = time.perf_counter()
        process = jail.start(argv, env=jail.runner_env(work, 12345), cwd=ROOT, work=work, isolation=args.isolation)
        out, err = process.communicate(timeout=300)
        print(out.decode(errors="replace")[-2000:], err.decode(errors="replace")[-800:], sep="\n")
        print(f"isolated evaluator ({args.isolation}): exit {process.returncode} in "
              f"{time.perf_counter() - started:.1f} s")
        return process.returncode


if __name__ == "__main__":
    sys.exit(main())
