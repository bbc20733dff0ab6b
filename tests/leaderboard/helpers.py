"""Helpers for the leaderboard tests: a real server process on loopback, the real CLI, a tiny spec."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from eval.leaderboard.client import ApiClient, ClientError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SECRET_SEED = 424242

# One test and two benchmarks of tiny matrices: the real evaluator's leaderboard mode runs it in
# about ten seconds on a 2-core CPU.
TINY_SPEC = """\
ranking_by: geom
test_timeout: 60
benchmark_timeout: 60
ranked_timeout: 60
tests:
  - {batch: 1, n: 4, cond: 1, seed: 11}
benchmarks:
  - {batch: 1, n: 4, cond: 1, seed: 21}
  - {batch: 1, n: 5, cond: 0, seed: 22, case: upper}
"""

GEQRF_SUBMISSION = """\
import torch


def custom_kernel(A):
    return torch.geqrf(A)
"""


def run_cli(*args, env=None, timeout=300, check=True) -> subprocess.CompletedProcess:
    """``python -m eval ARGS`` in the project root, as a user would run it."""
    full_env = {**os.environ, **(env or {})}
    done = subprocess.run([sys.executable, "-m", "eval", *map(str, args)], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"python -m eval {' '.join(map(str, args))} exited {done.returncode}:\n"
                             f"{done.stdout}\n{done.stderr}")
    return done


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Limits out of the way of tests that are not about them (the attack tests set their own).
LOOSE = ("--max-waiting", "1000", "--rate", "1000", "--burst", "1000")


class ServerProcess:
    """``python -m eval serve`` in a subprocess on a free loopback port."""

    def __init__(self, db: str | Path, log: Path, lease_seconds: float = 600, options=LOOSE):
        self.db, self.log, self.lease_seconds, self.options = db, log, lease_seconds, tuple(options)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> "ServerProcess":
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "eval", "serve", "--db", str(self.db), "--port", str(self.port),
                 "--lease-seconds", str(self.lease_seconds), "--log-level", "debug", *self.options],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"server exited {self.process.returncode}:\n{self.log.read_text()}")
            try:
                ApiClient(self.url, timeout_s=2).get("/api/leaderboards")
                return self
            except ClientError:
                time.sleep(0.2)
        raise AssertionError(f"server did not answer within 60 s:\n{self.log.read_text()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def client(self, token: str | None = None) -> ApiClient:
        return ApiClient(self.url, token)


class ThreadServer:
    """The same app served by uvicorn in a thread of the test process: starts in a blink."""

    def __init__(self, db: str | Path, lease_seconds: float = 600, limits=None, max_attempts: int = 3):
        self.db, self.lease_seconds, self.limits, self.max_attempts = db, lease_seconds, limits, max_attempts
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = None
        self.thread: threading.Thread | None = None

    def start(self) -> "ThreadServer":
        import uvicorn

        from eval.leaderboard.db import Database
        from eval.leaderboard.server import Limits, create_app

        self.database = Database(str(self.db), lease_seconds=self.lease_seconds, max_attempts=self.max_attempts)
        limits = self.limits or Limits(requests_per_second=1000, burst=1000, max_waiting=1000)
        config = uvicorn.Config(create_app(self.database, limits), host="127.0.0.1", port=self.port,
                                log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise AssertionError("the in-thread server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
            self.thread.join(timeout=20)
            self.database.close()
            self.server = None

    def client(self, token: str | None = None) -> ApiClient:
        return ApiClient(self.url, token)


def seed_board(db: str | Path, spec: Path) -> dict[str, str]:
    """Make an admin, alice, bob and leaderboard 'qr' (key from ``SECRET_SEED``); returns the tokens."""
    from eval.leaderboard.db import Database
    from eval.specs import load_spec

    database = Database(str(db))
    tokens = {"admin": database.add_user("organiser", admin=True),
              "alice": database.add_user("alice"), "bob": database.add_user("bob")}
    database.create_leaderboard("qr", spec.name, spec.read_text(), load_spec(spec).sha256, secret_seed=SECRET_SEED)
    database.close()
    return tokens


def counts(db: str | Path) -> dict[str, int]:
    from eval.leaderboard.db import Database

    database = Database(str(db))
    try:
        return database.counts()
    finally:
        database.close()


def upload_body(project_files, report: dict, *, source: str | None = None) -> dict:
    """An upload of ``source`` (default: the geqrf submission) with ``report``, its sha256 set to match."""
    import copy
    import hashlib

    source = GEQRF_SUBMISSION if source is None else source
    report = copy.deepcopy(report)
    report.setdefault("submission", {})["sha256"] = hashlib.sha256(source.encode()).hexdigest()
    return {"file_name": "submission.py", "source": source, "report": json.dumps(report)}


def variant(i: int) -> str:
    """The geqrf submission with a comment: another file, so not a repeat of an earlier upload."""
    return GEQRF_SUBMISSION + f"# variant {i}\n"


def job_seed_of(job_id: int, attempt: int = 1) -> int:
    """The seed the server gives job ``job_id`` of a leaderboard made with ``SECRET_SEED``."""
    from eval.leaderboard.seeds import job_seed, seed_key_from_number

    return job_seed(seed_key_from_number(SECRET_SEED), job_id, attempt)
