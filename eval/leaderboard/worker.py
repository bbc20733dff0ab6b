"""The verification worker: claim a job, re-run the submission with the job's seed, post the result.

The evaluator runs as ``python -m eval leaderboard`` inside ``jail`` (its own namespaces, a minimal
environment, no capabilities); the job's seed reaches it only through ``POPCORN_SEED``. Its JSON
report comes back through a pipe (``--json /dev/fd/N``), which nothing the submission starts can
reach, rather than a file it could rewrite. While it runs, a heartbeat keeps the job's lease alive,
so a run longer than the lease is not handed to another worker; if the server says the lease is
lost, the run is stopped. The worker posts only the report, a failure class and the exit code:
never the evaluator's output, which the submission controls.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from eval.leaderboard import jail
from eval.leaderboard.client import ApiClient, ClientError
from eval.leaderboard.publish import scrub
from eval.leaderboard.verify import MAX_REPORT_BYTES
from eval.prctl import make_undumpable

PROJECT_ROOT = jail.PROJECT_ROOT
OUTPUT_TAIL_BYTES = 64 << 10


def default_gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def _safe_name(name: str, fallback: str) -> str:
    base = Path(name).name
    return base if base and base not in (".", "..") else fallback


@dataclass
class Outcome:
    report: str | None             # the report's JSON text
    failure: str | None            # None, or one of server.WORKER_FAILURES
    exit_code: int | None
    lost: bool = False             # the server took the job back: post nothing
    last_line: str = ""            # the evaluator's last stderr line, scrubbed (for the worker's log)


class _Reader(threading.Thread):
    """Drain a pipe; keep its first ``limit`` bytes (``keep="head"``) or its last (``"tail"``)."""

    def __init__(self, fd: int, limit: int, keep: str):
        super().__init__(daemon=True)
        self.fd, self.limit, self.keep = fd, limit, keep
        self.data, self.overflow = bytearray(), False

    def run(self):
        with open(self.fd, "rb", buffering=0, closefd=True) as pipe:
            while chunk := pipe.read(1 << 16):
                if self.keep == "tail":
                    self.data += chunk
                    del self.data[:-self.limit]
                elif len(self.data) < self.limit:
                    self.data += chunk[:self.limit - len(self.data)]
                else:
                    self.overflow = True


class Heartbeat(threading.Thread):
    """Post the job's heartbeat every ``interval`` seconds; ``lost`` is set when the server refuses."""

    def __init__(self, client: ApiClient | None, job: dict, interval: float):
        super().__init__(daemon=True)
        self.client, self.job, self.interval = client, job, interval
        self.lost, self.done = threading.Event(), threading.Event()

    def run(self):
        while self.client is not None and not self.done.wait(self.interval):
            try:
                self.client.post(f"/api/jobs/{self.job['id']}/heartbeat", {"lease": self.job["lease"]})
            except ClientError as exc:
                if "said 409" in str(exc):
                    self.lost.set()
                    return                  # other errors: the server may be restarting; try again


def run_job(job: dict, *, device: str | None = None, baseline: bool = False, timeout_s: float | None = None,
            isolation: str = "namespaces", client: ApiClient | None = None, echo=print) -> Outcome:
    """Run one claimed job in the jail; heartbeats through ``client`` while it runs."""
    spec, sub = job["spec"], job["submission"]
    if hashlib.sha256(spec["text"].encode("utf-8")).hexdigest() != spec["sha256"] or \
            hashlib.sha256(sub["source"].encode("utf-8")).hexdigest() != sub["sha256"]:
        return Outcome(None, "bad-job", None, last_line="spec or source does not match its sha256; not run")
    limit = timeout_s if timeout_s is not None else 4 * float(job.get("ranked_timeout") or 900) + 300
    with tempfile.TemporaryDirectory(prefix="lb-job-") as tmp:
        folder = Path(tmp)
        spec_path = folder / _safe_name(spec["name"], "spec.yml")
        spec_path.write_bytes(spec["text"].encode("utf-8"))
        sub_path = folder / _safe_name(sub["file_name"], "submission.py")
        sub_path.write_bytes(sub["source"].encode("utf-8"))
        home = folder / "home"
        home.mkdir()
        read_end, write_end = os.pipe()
        argv = [sys.executable, "-m", "eval", "leaderboard", "--submission", str(sub_path),
                "--specs", str(spec_path), "--json", f"/dev/fd/{write_end}"]
        if device:
            argv += ["--device", device]
        if baseline:
            argv.append("--baseline")
        try:
            process = jail.start(argv, env=jail.runner_env(home, job["seed"]), cwd=PROJECT_ROOT, work=home,
                                 isolation=isolation, pass_fds=(write_end,))
        except (OSError, jail.JailError) as exc:
            os.close(read_end)
            return Outcome(None, "bad-job", None, last_line=f"cannot start the evaluator: {exc}")
        finally:
            os.close(write_end)
        readers = [_Reader(read_end, MAX_REPORT_BYTES + 1, "head"),
                   _Reader(os.dup(process.stdout.fileno()), OUTPUT_TAIL_BYTES, "tail"),
                   _Reader(os.dup(process.stderr.fileno()), OUTPUT_TAIL_BYTES, "tail")]
        process.stdout.close()
        process.stderr.close()
        for reader in readers:
            reader.start()
        beat = Heartbeat(client, job, max(0.5, float(job.get("lease_seconds") or 600) / 4))
        beat.start()
        deadline, failure, lost = time.monotonic() + limit, None, False
        try:
            while jail.running(process):
                if beat.lost.is_set():
                    lost = True
                    break
                if time.monotonic() > deadline:
                    failure = "timeout"
                    break
                time.sleep(0.1)
        finally:
            beat.done.set()
            jail.stop(process)          # the namespace and all it holds dies with its PID 1
            for reader in readers:
                reader.join(timeout=10)
    report_reader, stdout_reader, stderr_reader = readers
    for line in bytes(stdout_reader.data).decode("utf-8", "replace").splitlines():
        if line.startswith("score:"):    # the table would show the case seeds
            echo(line)
    last = (bytes(stderr_reader.data).decode("utf-8", "replace").strip().splitlines() or [""])[-1]
    report = None
    if failure is None and not report_reader.overflow and report_reader.data:
        report = bytes(report_reader.data).decode("utf-8", "replace")
    if failure is None and process.returncode != 0:
        failure = "evaluator-exit"
    return Outcome(report, failure, process.returncode, lost=lost, last_line=scrub(last))


def work(client: ApiClient, *, gpu: str, once: bool = False, poll_s: float = 5.0, device: str | None = None,
         baseline: bool = False, isolation: str = "namespaces", echo=print) -> int:
    """Drain the queue one job at a time; with ``once`` handle at most one job. Returns jobs done."""
    make_undumpable()  # our environment holds the token
    jail.check(isolation)
    host = socket.gethostname()
    done = 0
    while True:
        job = client.post("/api/jobs/claim", {"host": host, "gpu": gpu})["job"]
        if job is None:
            if once:
                echo("no queued job")
                return done
            time.sleep(poll_s)
            continue
        sub = job["submission"]
        echo(f"job {job['id']}: submission #{sub['id']} {sub['file_name']} by {sub['user']} "
             f"on {job['leaderboard']} (attempt {job['attempt']})")
        outcome = run_job(job, device=device, baseline=baseline, isolation=isolation, client=client, echo=echo)
        if outcome.lost:
            echo(f"job {job['id']}: the server took the job back (lease lost); stopped")
        else:
            if outcome.failure:
                echo(f"job {job['id']}: {outcome.failure} (exit code {outcome.exit_code}): {outcome.last_line}")
            try:
                result = client.post(f"/api/jobs/{job['id']}/result",
                                     {"lease": job["lease"], "report": outcome.report, "failure": outcome.failure,
                                      "exit_code": outcome.exit_code, "gpu": gpu, "host": host})["run"]
            except ClientError as exc:
                echo(f"job {job['id']}: result not accepted: {exc}")
            else:
                verdict = "passed" if result["passed"] else "failed"
                score = result["score_seconds"]
                echo(f"job {job['id']}: {verdict}"
                     + (f", score {score * 1e6:.1f} µs" if score is not None else f": {result['message']}"))
        done += 1
        if once:
            return done
