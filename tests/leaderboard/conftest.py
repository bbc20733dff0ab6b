"""Fixtures for the leaderboard tests: a real server process on loopback with a real SQLite file,
users made with the real CLI, and reports made by the real evaluator on a tiny spec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import GEQRF_SUBMISSION, ROOT, TINY_SPEC, ThreadServer, run_cli, seed_board


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
                      "test_concurrency.py"]


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
    return new_postgres_database(server) if server else str(tmp_path / "leaderboard.db")


@pytest.fixture
def board(tmp_path, project_files):
    """A fresh SQLite file with an admin, two users and leaderboard 'qr' (secret seed known to
    the tests), served on loopback by uvicorn in a thread."""
    db = fresh_database(tmp_path)
    tokens = seed_board(db, project_files["spec"])
    state = {"server": ThreadServer(db).start(), "db": db, "tokens": tokens, "files": project_files,
             "tmp": tmp_path}
    yield state
    state["server"].stop()          # a test may have swapped in another server on the same file


def _postgres_bin(name: str) -> str | None:
    import glob
    import shutil

    return shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))), None)


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server for this test session: initdb into a temp folder as an unprivileged
    user (initdb refuses root), started on a free loopback port, stopped at the end. Yields a URL
    prefix (``postgresql+psycopg://postgres@127.0.0.1:PORT``); add ``/DBNAME``."""
    import pwd
    import shutil
    import tempfile

    from .helpers import free_port

    initdb, pg_ctl = _postgres_bin("initdb"), _postgres_bin("pg_ctl")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        initdb = None
    if initdb is None or pg_ctl is None:
        message = "PostgreSQL binaries (initdb, pg_ctl) or psycopg are missing: make setup-test installs them"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    folder = Path(tempfile.mkdtemp(prefix="lb-postgres-"))     # pytest's own folders are root's, 0700
    owner = pwd.getpwnam("nobody") if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
    os.chmod(folder, 0o700)
    os.chown(folder, owner.pw_uid, owner.pw_gid)
    as_owner = ["runuser", "-u", owner.pw_name, "--"] if os.geteuid() == 0 else []
    data, port = folder / "data", free_port()
    subprocess.run([*as_owner, initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                    "--no-sync"], check=True, capture_output=True, timeout=120)
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    started = subprocess.run([*as_owner, pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"),
                              "-w", "-t", "60", "start"], capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stdout + started.stderr + (folder / "log").read_text()
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run([*as_owner, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)


def new_postgres_database(server: str) -> str:
    import uuid

    import sqlalchemy as sa

    name = f"lbtest_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE {name}"))
    engine.dispose()
    return f"{server}/{name}"


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path) -> str:
    """A fresh database: a SQLite file, then a database on the session's real PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "leaderboard.db")
    return new_postgres_database(request.getfixturevalue("postgres_server"))
