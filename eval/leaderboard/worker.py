"""The verification worker: claim a job, re-run the submission with the secret seed, post the result.

The evaluator runs as a subprocess (``python -m eval leaderboard``) in its usual isolated way; the
secret seed reaches it only through the ``POPCORN_SEED`` environment variable, never argv.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eval.leaderboard.client import ApiClient, ClientError

PROJECT_ROOT = Path(__file__).resolve().parents[2]   # where `python -m eval` and reference.py live


def default_gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def _safe_name(name: str, fallback: str) -> str:
    base = Path(name).name
    return base if base and base not in (".", "..") else fallback


def run_job(job: dict, *, device: str | None = None, baseline: bool = False,
            timeout_s: float | None = None, echo=print) -> tuple[str | None, str]:
    """Run one claimed job; returns (the JSON report's text or None, an error message or '')."""
    spec, sub = job["spec"], job["submission"]
    if hashlib.sha256(spec["text"].encode("utf-8")).hexdigest() != spec["sha256"]:
        return None, "spec text does not match its sha256; not run"
    if hashlib.sha256(sub["source"].encode("utf-8")).hexdigest() != sub["sha256"]:
        return None, "submission source does not match its sha256; not run"
    with tempfile.TemporaryDirectory(prefix="lb-job-") as tmp:
        spec_path = Path(tmp) / _safe_name(spec["name"], "spec.yml")
        spec_path.write_bytes(spec["text"].encode("utf-8"))
        sub_path = Path(tmp) / _safe_name(sub["file_name"], "submission.py")
        sub_path.write_bytes(sub["source"].encode("utf-8"))
        json_path = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "eval", "leaderboard", "--submission", str(sub_path),
                   "--specs", str(spec_path), "--json", str(json_path)]
        if device:
            command += ["--device", device]
        if baseline:
            command.append("--baseline")
        env = {k: v for k, v in os.environ.items() if k != "POPCORN_FD"}
        env["POPCORN_SEED"] = str(job["secret_seed"])
        limit = timeout_s if timeout_s is not None else 4 * float(job.get("ranked_timeout") or 900) + 300
        try:
            done = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                                  timeout=limit)
        except subprocess.TimeoutExpired:
            return None, f"the evaluator ran past the worker's limit of {limit:.0f} s"
        for line in done.stdout.splitlines():    # the table would show the secret case seeds
            if line.startswith("score:"):
                echo(line)
        report = json_path.read_text(encoding="utf-8") if json_path.exists() else None
        error = ""
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            error = f"the evaluator exited with code {done.returncode}: {last[:500]}"
        return report, error


def work(client: ApiClient, *, gpu: str, once: bool = False, poll_s: float = 5.0,
         device: str | None = None, baseline: bool = False, echo=print) -> int:
    """Drain the queue one job at a time; with ``once`` handle at most one job. Returns jobs done."""
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
        report, error = run_job(job, device=device, baseline=baseline, echo=echo)
        try:
            result = client.post(f"/api/jobs/{job['id']}/result",
                                 {"lease": job["lease"], "report": report, "error": error,
                                  "gpu": gpu, "host": host})["run"]
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
