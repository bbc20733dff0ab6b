"""Fixtures for the leaderboard tests: a real server process on loopback with a real SQLite file,
users made with the real CLI, and reports made by the real evaluator on a tiny spec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import GEQRF_SUBMISSION, ROOT, SECRET_SEED, TINY_SPEC, ThreadServer, run_cli


# The server packages are the leaderboard's own. A machine without them collects only the tests
# that need none (test_verify.py); CI (CI=true) must have them, so there nothing is left out.
def _missing_server_packages() -> list[str]:
    missing = []
    for package in ("fastapi", "uvicorn", "sqlalchemy", "jinja2"):
        try:
            __import__(package)
        except ImportError:
            missing.append(package)
    return missing


collect_ignore = []
if _missing_server_packages() and not os.environ.get("CI"):
    collect_ignore = ["test_api.py", "test_db.py", "test_pages.py", "test_end_to_end.py", "test_attacks.py",
                      "test_postgres.py"]


@pytest.fixture(scope="session")
def project_files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("lb-files")
    spec = folder / "tiny.yml"
    spec.write_text(TINY_SPEC)
    submission = folder / "geqrf_submission.py"
    submission.write_text(GEQRF_SUBMISSION)
    return {"folder": folder, "spec": spec, "submission": submission}


@pytest.fixture(scope="session")
def own_report(project_files) -> dict:
    """The client's own report: the real evaluator in leaderboard mode, public seeds."""
    path = project_files["folder"] / "own.json"
    env = {k: v for k, v in os.environ.items() if k != "POPCORN_SEED"}
    done = subprocess.run([sys.executable, "-m", "eval", "leaderboard", "--submission",
                           str(project_files["submission"]), "--specs", str(project_files["spec"]),
                           "--json", str(path), "--device", "cpu"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def seeded_report(project_files):
    """``seeded_report(seed)``: what a worker's evaluator makes with that seed (for tests that post
    results by hand), made once per seed by the real evaluator."""
    made: dict[int, dict] = {}

    def report(seed: int) -> dict:
        if seed not in made:
            path = project_files["folder"] / f"seeded-{seed}.json"
            run_cli("leaderboard", "--submission", project_files["submission"], "--specs",
                    project_files["spec"], "--json", path, "--device", "cpu", env={"POPCORN_SEED": str(seed)})
            made[seed] = json.loads(path.read_text())
        return made[seed]
    return report


def fresh_database(tmp_path) -> str:
    """A new SQLite file, or, with $LEADERBOARD_TEST_POSTGRES (e.g. postgresql+psycopg://user@host:port),
    a new database on that PostgreSQL server, so the same tests run against both."""
    server = os.environ.get("LEADERBOARD_TEST_POSTGRES")
    if not server:
        return str(tmp_path / "leaderboard.db")
    import uuid

    import sqlalchemy as sa

    name = f"lbtest_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    engine.dispose()
    return f"{server}/{name}"


@pytest.fixture
def board(tmp_path, project_files):
    """A fresh SQLite file with an admin, two users and leaderboard 'qr' (secret seed known to
    the tests), served on loopback by uvicorn in a thread."""
    from eval.leaderboard.db import Database
    from eval.specs import load_spec

    db = fresh_database(tmp_path)
    database = Database(db)
    tokens = {"admin": database.add_user("organiser", admin=True),
              "alice": database.add_user("alice"), "bob": database.add_user("bob")}
    spec = project_files["spec"]
    database.create_leaderboard("qr", spec.name, spec.read_text(), load_spec(spec).sha256,
                                secret_seed=SECRET_SEED)
    database.close()
    state = {"server": ThreadServer(db).start(), "db": db, "tokens": tokens, "files": project_files,
             "tmp": tmp_path}
    yield state
    state["server"].stop()          # a test may have swapped in another server on the same file
