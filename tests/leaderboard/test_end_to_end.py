"""Upload → queue → worker (the real evaluator, secret seed) → verified ranking → the page in a
real headless Chromium. Everything through the real CLI and a server process on loopback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

import pytest

from eval.specs import load_spec, mix_seed

from .helpers import SECRET_SEED, ServerProcess, job_seed_of, run_cli


def chromium(*args: str, timeout: int = 120) -> str:
    """Run Debian's chromium headless with a fresh profile; returns its stdout."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="lb-chromium-") as profile:
        done = subprocess.run(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--no-first-run", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
             f"--user-data-dir={profile}", *args],
            capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_upload_worker_ranking_and_page(tmp_path, project_files, own_report):
    db = tmp_path / "leaderboard.db"
    admin_token = run_cli("admin", "add-user", "organiser", "--admin", "--db", db).stdout.strip()
    alice_token = run_cli("admin", "add-user", "alice", "--db", db).stdout.strip()
    created = run_cli("admin", "create-leaderboard", "qr", "--spec", project_files["spec"],
                      "--secret-seed", SECRET_SEED, "--db", db)
    assert "leaderboard 'qr' created" in created.stdout and str(SECRET_SEED) not in created.stdout
    report_path = tmp_path / "own.json"
    report_path.write_text(json.dumps(own_report))
    server = ServerProcess(db, tmp_path / "server.log").start()
    try:
        uploaded = run_cli("upload", "--submission", project_files["submission"], "--report", report_path,
                           "--leaderboard", "qr", "--server", server.url,
                           env={"LEADERBOARD_TOKEN": alice_token})
        assert "as submission #1" in uploaded.stdout and "queued for verification" in uploaded.stdout
        assert server.client().get("/api/leaderboards/qr/ranking")["ranking"] == []

        worked = run_cli("worker", "--server", server.url, "--once", "--gpu", "test-cpu", "--device", "cpu",
                         env={"LEADERBOARD_TOKEN": admin_token}, timeout=600)
        assert "job 1: passed, score" in worked.stdout, worked.stdout + worked.stderr

        ranking = server.client().get("/api/leaderboards/qr/ranking")["ranking"]
        assert [(e["rank"], e["user"], e["submission_id"], e["gpu"]) for e in ranking] == \
            [(1, "alice", 1, "test-cpu")]
        runs = server.client().get("/api/submissions/1")["submission"]["runs"]
        verified = [r for r in runs if r["secret"]]
        assert len(verified) == 1 and verified[0]["passed"]
        means = [c["mean_ns"] for c in verified[0]["cases"] if c["kind"] == "benchmark"]
        assert ranking[0]["score_seconds"] == pytest.approx((means[0] * means[1]) ** 0.5 / 1e9)

        # the worker really used the job's seed: the stored report's case seeds are the mixed ones
        from eval.leaderboard.db import Database
        database = Database(str(db))
        with database.engine.connect() as conn:
            import sqlalchemy as sa
            stored = json.loads(conn.execute(sa.text("SELECT report FROM runs WHERE secret = :t"),
                                             {"t": True}).scalar_one())
        database.close()
        spec = load_spec(project_files["spec"])
        seed = job_seed_of(1)
        assert stored["seed"] == seed
        assert [b["spec"]["seed"] for b in stored["benchmarks"]] == [mix_seed(c.seed, seed) for c in spec.benchmarks]

        # what a browser renders
        index_dom = chromium("--dump-dom", server.url + "/")
        assert "QR kernel leaderboards" in index_dom
        row = index_dom.split('id="ranking-qr"', 1)[1].split("</table>", 1)[0]
        assert "alice" in row and "test-cpu" in row and "self-reported" in row
        page_dom = chromium("--dump-dom", server.url + "/submissions/1")
        assert "<svg" in page_dom and "verified" in page_dom and "torch.geqrf(A)" in page_dom
        assert page_dom.count('class="bar"') == 4      # two cases, verified and self-reported
        shot = tmp_path / "ranking.png"
        chromium(f"--screenshot={shot}", "--window-size=1200,900", server.url + "/")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 5000

        secrets = {str(SECRET_SEED), str(seed), admin_token, alice_token} | \
            {str(mix_seed(c.seed, seed)) for c in spec.tests + spec.benchmarks}
        for dom in (index_dom, page_dom):
            assert not [s for s in secrets if s in dom]
    finally:
        server.stop()
