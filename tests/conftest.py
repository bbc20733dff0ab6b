"""Shared test helpers: paths, and running the real evaluator (``python -m eval``) in a subprocess."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The contest's own public files (eval.py, reference.py, task.py, task.yml, utils.py), unchanged, beside
# the repository: loaded by the parity tests at test time, never copied into the project.
CONTEST = Path(os.environ.get("QR_CONTEST_DIR", REPO_ROOT.parent / "shared" / "contest" / "qr_v2"))


def require_contest() -> None:
    """Fail (not skip: the parity tests are required) when the contest's files are not there."""
    if not all((CONTEST / name).is_file() for name in ("eval.py", "reference.py", "task.yml")):
        pytest.fail(f"the contest's files are not at {CONTEST} (expected ../shared/contest/qr_v2 beside the "
                    f"repository, or QR_CONTEST_DIR): the parity tests cannot run without them")

# tests/gpu/ holds checks that need a CUDA device; they are collected only where one exists.
collect_ignore = [] if torch.cuda.is_available() else ["gpu"]


def load_module(path: Path | str, name: str | None = None):
    """The Python file at ``path`` as a module named ``name`` (its file's stem by default), kept out of
    ``sys.modules``, so that several versions of one file can be loaded side by side and the entry is never
    imported as ``submission`` (the evaluator's tests check that nothing in the process imported that)."""
    spec = importlib.util.spec_from_file_location(name or Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def clean_env(**extra: str) -> dict:
    """The environment for an evaluator subprocess: no inherited contest variables."""
    env = {k: v for k, v in os.environ.items() if k not in ("POPCORN_FD", "POPCORN_SEED")}
    env.update(extra)
    return env


def run_eval(*args, env: dict | None = None, pass_fds=(), timeout: float = 300,
             cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    """Run ``python -m eval ARGS`` for real and capture its output (text)."""
    return subprocess.run([sys.executable, "-m", "eval", *map(str, args)], cwd=cwd,
                          env=env if env is not None else clean_env(), pass_fds=pass_fds,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def eval_cli():
    """``eval_cli(*args, env=None, pass_fds=())`` → the finished ``python -m eval`` process."""
    return run_eval
