"""The leaderboard's commands: ``serve``, ``upload``, ``worker`` and ``admin``.

``register(main)`` adds them to the evaluator's click group. Server packages (fastapi, uvicorn,
sqlalchemy) are imported inside the commands that need them, so the evaluator works without them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import click

from eval.leaderboard.client import ApiClient, ClientError

DB_HELP = "SQLite file or database URL (postgresql://…)."


def _need_packages(*names: str) -> None:
    """One clear line, not a traceback, when a server-side package is not installed."""
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            raise click.ClickException(f"the leaderboard server needs {name}: "
                                       f"pip install -e '.[leaderboard]'") from None


def _open_db(db: str):
    _need_packages("sqlalchemy")
    from eval.leaderboard.db import Database, DbError

    try:
        return Database(db)
    except DbError as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:   # a bad URL or an unreachable database server: one line, no traceback
        raise click.ClickException(f"cannot open database {db!r}: {type(exc).__name__}: "
                                   f"{str(exc).splitlines()[0] if str(exc) else ''}") from None


@click.command()
@click.option("--db", default="leaderboard.db", show_default=True, help=DB_HELP)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--lease-seconds", default=600.0, show_default=True, type=click.FloatRange(min=1),
              help="A claimed job whose worker sent no heartbeat for this long is given out again.")
@click.option("--max-attempts", default=3, show_default=True, type=click.IntRange(min=1),
              help="After this many lost attempts a job fails ('worker lost') instead.")
@click.option("--max-waiting", default=3, show_default=True, type=click.IntRange(min=1),
              help="Submissions one user may have queued or running at once.")
@click.option("--rate", default=20.0, show_default=True, type=click.FloatRange(min=0.01),
              help="Requests a second one client address may make, on average.")
@click.option("--burst", default=60.0, show_default=True, type=click.FloatRange(min=1),
              help="Requests one client address may make at once.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]))
def serve(db, host, port, lease_seconds, max_attempts, max_waiting, rate, burst, log_level):
    """Run the leaderboard server (JSON API under /api, web page at /)."""
    _need_packages("fastapi", "uvicorn", "sqlalchemy", "jinja2")
    from eval.leaderboard.server import Limits
    from eval.leaderboard.server import serve as run_server

    _open_db(db).close()    # migrate, and fail with one line on a bad database
    run_server(db, host, port, lease_seconds=lease_seconds, max_attempts=max_attempts, log_level=log_level,
               limits=Limits(requests_per_second=rate, burst=burst, max_waiting=max_waiting))


def _newest_report_for(submission: Path) -> Path:
    """The newest results/*.json made for this very file (same sha256) in leaderboard mode."""
    sha = hashlib.sha256(submission.read_bytes()).hexdigest()
    candidates = sorted(Path("results").glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in candidates:
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(report, dict) and report.get("mode") == "leaderboard" and \
                (report.get("submission") or {}).get("sha256") == sha:
            return path
    raise click.ClickException(f"no leaderboard-mode report for {submission} under results/: run "
                               f"'python -m eval leaderboard --submission {submission} --json results/lb.json' "
                               f"or pass --report")


@click.command()
@click.option("--submission", default="submission.py", show_default=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--report", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSON report of a leaderboard-mode run of this file [default: the newest under results/].")
@click.option("--leaderboard", required=True, help="Leaderboard name.")
@click.option("--server", envvar="LEADERBOARD_URL", required=True, help="Server URL (or $LEADERBOARD_URL).")
@click.option("--token", envvar="LEADERBOARD_TOKEN", required=True, show_envvar=True,
              help="Your bearer token (better passed as $LEADERBOARD_TOKEN).")
def upload(submission, report, leaderboard, server, token):
    """Upload a submission and its own report to a leaderboard."""
    report = report or _newest_report_for(submission)
    try:
        source = submission.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise click.ClickException(f"{submission}: not UTF-8 text") from None
    try:
        client = ApiClient(server, token)
        answer = client.post(f"/api/leaderboards/{leaderboard}/submissions",
                             {"file_name": submission.name, "source": source,
                              "report": report.read_bytes().decode("utf-8", errors="replace")})["submission"]
    except ClientError as exc:
        raise click.ClickException(f"upload refused: {exc}") from None
    state = "queued for verification" if answer["status"] == "queued" else "already uploaded (the same file)"
    click.echo(f"uploaded {submission} as submission #{answer['id']} (self-reported "
               f"{answer['self_reported_seconds'] * 1e6:.1f} µs); {state}: {server.rstrip('/')}{answer['url']}")


@click.command()
@click.option("--server", envvar="LEADERBOARD_URL", required=True, help="Server URL (or $LEADERBOARD_URL).")
@click.option("--token", envvar="LEADERBOARD_TOKEN", required=True, show_envvar=True,
              help="An admin token (better passed as $LEADERBOARD_TOKEN).")
@click.option("--gpu", default=None, help="Name recorded for this runner [default: the CUDA device's name].")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default=None,
              help="Passed to the evaluator [default: its own choice].")
@click.option("--baseline", is_flag=True, help="Also time torch.geqrf, for the chart's reference bars.")
@click.option("--once", is_flag=True, help="Handle at most one job, then exit.")
@click.option("--poll-seconds", default=5.0, show_default=True, type=click.FloatRange(min=0.1))
@click.option("--isolation", type=click.Choice(["namespaces", "session"]), default="namespaces", show_default=True,
              help="How the evaluator is kept from the worker: its own PID and mount namespaces, or "
                   "(weaker, where namespaces are unavailable) only a session and environment of its own.")
def worker(server, token, gpu, device, baseline, once, poll_seconds, isolation):
    """Verify queued submissions with a secret seed, one at a time."""
    from eval.leaderboard.jail import JailError
    from eval.leaderboard.worker import default_gpu_name, work

    try:
        client = ApiClient(server, token)
        work(client, gpu=gpu or default_gpu_name(), once=once, poll_s=poll_seconds, device=device,
             baseline=baseline, isolation=isolation, echo=click.echo)
    except (ClientError, JailError) as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("worker stopped")


@click.group()
def admin():
    """Manage users and leaderboards directly in the database."""


@admin.command("add-user")
@click.argument("name")
@click.option("--admin", "is_admin", is_flag=True, help="May create leaderboards and run workers.")
@click.option("--db", default="leaderboard.db", show_default=True, help=DB_HELP)
def add_user(name, is_admin, db):
    """Add a user and print its token (shown once; only its hash is stored)."""
    from eval.leaderboard.db import DbError

    database = _open_db(db)
    try:
        token = database.add_user(name, admin=is_admin)
    except DbError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        database.close()
    click.echo(token)


@admin.command("create-leaderboard")
@click.argument("name")
@click.option("--spec", "spec_path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--deadline", default=None, help="ISO 8601 time, e.g. 2026-12-31T23:59:00Z [default: none].")
@click.option("--secret-seed", type=click.IntRange(min=0), default=None,
              help="Make the job seeds' key from this number (reproducible; only as secret as the number) "
                   "[default: a random 256-bit key].")
@click.option("--db", default="leaderboard.db", show_default=True, help=DB_HELP)
def create_leaderboard(name, spec_path, deadline, secret_seed, db):
    """Create a leaderboard for a spec file (its seed key is never shown)."""
    _need_packages("sqlalchemy")
    from eval.leaderboard.db import DbError, parse_deadline
    from eval.specs import SpecError, load_spec

    try:
        spec = load_spec(spec_path)
        when = parse_deadline(deadline)
    except (SpecError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    database = _open_db(db)
    try:
        database.create_leaderboard(name, spec_path.name, spec_path.read_bytes().decode("utf-8"),
                                    spec.sha256, secret_seed=secret_seed, deadline=when)
    except DbError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        database.close()
    click.echo(f"leaderboard {name!r} created for {spec_path} (sha256 {spec.sha256[:16]}…)")


def register(main: click.Group) -> None:
    """Add the leaderboard commands to the evaluator's ``python -m eval`` group."""
    for command in (serve, upload, worker, admin):
        main.add_command(command)
