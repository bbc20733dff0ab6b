"""The leaderboard's database: schema, ordered migrations and every query the server makes.

SQLAlchemy Core with plain SQL, so one SQLite file (the default) and a PostgreSQL URL both work.
Times are stored as Unix seconds (floats). Every write happens in one transaction.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from eval.leaderboard.auth import hash_token, new_token

DEFAULT_DB = "leaderboard.db"


class DbError(ValueError):
    """A request the database refuses (a duplicate name, an unknown row); one-line message."""


# --------------------------------------------------------------------------------------------
# Schema: migrations run in order, each once; schema_version holds the last one applied.
# --------------------------------------------------------------------------------------------

def _id_column(dialect: str) -> str:
    return "INTEGER PRIMARY KEY AUTOINCREMENT" if dialect == "sqlite" else "BIGSERIAL PRIMARY KEY"


def _migration_1(dialect: str) -> list[str]:
    id_col = _id_column(dialect)
    return [
        f"""CREATE TABLE leaderboards (
            id {id_col},
            name TEXT NOT NULL UNIQUE,
            spec_name TEXT NOT NULL,
            spec_text TEXT NOT NULL,
            spec_sha256 TEXT NOT NULL,
            secret_seed BIGINT NOT NULL,
            deadline DOUBLE PRECISION,
            created_at DOUBLE PRECISION NOT NULL)""",
        f"""CREATE TABLE users (
            id {id_col},
            name TEXT NOT NULL UNIQUE,
            token_hash TEXT NOT NULL UNIQUE,
            is_admin BOOLEAN NOT NULL,
            created_at DOUBLE PRECISION NOT NULL)""",
        f"""CREATE TABLE submissions (
            id {id_col},
            user_id BIGINT NOT NULL REFERENCES users(id),
            leaderboard_id BIGINT NOT NULL REFERENCES leaderboards(id),
            file_name TEXT NOT NULL,
            source TEXT NOT NULL,
            sha256 TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL)""",
        f"""CREATE TABLE runs (
            id {id_col},
            submission_id BIGINT NOT NULL REFERENCES submissions(id),
            mode TEXT NOT NULL,
            secret BOOLEAN NOT NULL,
            runner TEXT NOT NULL,
            gpu TEXT NOT NULL,
            score_seconds DOUBLE PRECISION,
            passed BOOLEAN NOT NULL,
            message TEXT NOT NULL,
            report TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL)""",
        f"""CREATE TABLE jobs (
            id {id_col},
            submission_id BIGINT NOT NULL REFERENCES submissions(id),
            state TEXT NOT NULL,
            worker TEXT,
            lease TEXT,
            lease_until DOUBLE PRECISION,
            attempts INTEGER NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            finished_at DOUBLE PRECISION)""",
    ]


def _migration_2(dialect: str) -> list[str]:
    return [
        "CREATE INDEX submissions_by_leaderboard ON submissions (leaderboard_id, user_id)",
        "CREATE INDEX runs_by_submission ON runs (submission_id)",
        "CREATE INDEX jobs_by_state ON jobs (state, id)",
    ]


MIGRATIONS = [_migration_1, _migration_2]   # append only; never edit one that has shipped


def make_engine(db: str) -> sa.Engine:
    """An engine for a database URL (``postgresql://…``) or a SQLite file path."""
    url = db if "://" in db else f"sqlite:///{db}"
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"timeout": 30, "check_same_thread": False},
                                  pool_size=20, max_overflow=40)

        @sa.event.listens_for(engine, "connect")
        def _sqlite_settings(dbapi_connection, _record):
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()
        return engine
    return sa.create_engine(url, pool_pre_ping=True)


def schema_version(conn: sa.Connection) -> int:
    if not sa.inspect(conn).has_table("schema_version"):
        return 0
    return conn.execute(sa.text("SELECT version FROM schema_version")).scalar_one()


def migrate(engine: sa.Engine) -> int:
    """Apply every migration not yet applied, in order; returns the schema version now."""
    dialect = engine.dialect.name
    with engine.begin() as conn:
        if not sa.inspect(conn).has_table("schema_version"):
            conn.execute(sa.text("CREATE TABLE schema_version (version INTEGER NOT NULL)"))
            conn.execute(sa.text("INSERT INTO schema_version (version) VALUES (0)"))
        current = schema_version(conn)
        if current > len(MIGRATIONS):
            raise DbError(f"database schema version {current} is newer than this code "
                          f"({len(MIGRATIONS)}); upgrade the evaluator")
        for number in range(current + 1, len(MIGRATIONS) + 1):
            for statement in MIGRATIONS[number - 1](dialect):
                conn.execute(sa.text(statement))
            conn.execute(sa.text("UPDATE schema_version SET version = :v"), {"v": number})
    return len(MIGRATIONS)


def parse_deadline(value) -> float | None:
    """A deadline as Unix seconds, from null, a number or an ISO 8601 time (``…Z`` for UTC)."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"deadline {value!r} is not an ISO 8601 time like 2026-12-31T23:59:00Z") from None
        if moment.tzinfo is None:
            raise ValueError(f"deadline {value!r} needs a time zone (e.g. a trailing Z for UTC)")
        return moment.timestamp()
    raise ValueError(f"deadline must be an ISO 8601 string or Unix seconds, got {type(value).__name__}")


# --------------------------------------------------------------------------------------------
# Rows handed to the server
# --------------------------------------------------------------------------------------------

@dataclass
class User:
    id: int
    name: str
    is_admin: bool


@dataclass
class Leaderboard:
    id: int
    name: str
    spec_name: str
    spec_text: str
    spec_sha256: str
    secret_seed: int
    deadline: float | None
    created_at: float

    def public(self) -> dict:
        """What anyone may see: never the secret seed."""
        return {"name": self.name, "spec_name": self.spec_name, "spec_sha256": self.spec_sha256,
                "deadline": self.deadline, "created_at": self.created_at}


@dataclass
class Job:
    id: int
    lease: str
    submission_id: int
    attempts: int


def _leaderboard(row) -> Leaderboard:
    return Leaderboard(id=row.id, name=row.name, spec_name=row.spec_name, spec_text=row.spec_text,
                       spec_sha256=row.spec_sha256, secret_seed=int(row.secret_seed),
                       deadline=row.deadline, created_at=row.created_at)


class Database:
    """Every query the leaderboard makes, on one engine."""

    def __init__(self, db: str, *, lease_seconds: float = 7200.0):
        self.engine = make_engine(db)
        self.lease_seconds = lease_seconds
        migrate(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    # ---- users ------------------------------------------------------------------------------

    def add_user(self, name: str, *, admin: bool = False) -> str:
        """Create a user; returns its token (the only time it exists in clear)."""
        if not name or len(name) > 64 or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise DbError(f"user name {name!r}: use 1-64 letters, digits, '-', '_' or '.'")
        token = new_token()
        with self.engine.begin() as conn:
            if conn.execute(sa.text("SELECT 1 FROM users WHERE name = :n"), {"n": name}).first():
                raise DbError(f"user {name!r} already exists")
            conn.execute(sa.text("INSERT INTO users (name, token_hash, is_admin, created_at) "
                                 "VALUES (:n, :h, :a, :t)"),
                         {"n": name, "h": hash_token(token), "a": admin, "t": time.time()})
        return token

    def user_for_token(self, token: str) -> User | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.text("SELECT id, name, is_admin FROM users WHERE token_hash = :h"),
                               {"h": hash_token(token)}).first()
        return None if row is None else User(id=row.id, name=row.name, is_admin=bool(row.is_admin))

    # ---- leaderboards -----------------------------------------------------------------------

    def create_leaderboard(self, name: str, spec_name: str, spec_text: str, spec_sha256: str, *,
                           secret_seed: int | None = None, deadline: float | None = None) -> Leaderboard:
        if not name or len(name) > 64 or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise DbError(f"leaderboard name {name!r}: use 1-64 letters, digits, '-', '_' or '.'")
        if secret_seed is None:
            secret_seed = secrets.randbelow(2**31 - 1) + 1
        with self.engine.begin() as conn:
            if conn.execute(sa.text("SELECT 1 FROM leaderboards WHERE name = :n"), {"n": name}).first():
                raise DbError(f"leaderboard {name!r} already exists")
            conn.execute(sa.text(
                "INSERT INTO leaderboards (name, spec_name, spec_text, spec_sha256, secret_seed, "
                "deadline, created_at) VALUES (:n, :sn, :st, :sh, :seed, :d, :t)"),
                {"n": name, "sn": spec_name, "st": spec_text, "sh": spec_sha256,
                 "seed": int(secret_seed), "d": deadline, "t": time.time()})
        return self.leaderboard(name)

    def leaderboard(self, name: str) -> Leaderboard | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.text("SELECT * FROM leaderboards WHERE name = :n"), {"n": name}).first()
        return None if row is None else _leaderboard(row)

    def leaderboards(self) -> list[Leaderboard]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT * FROM leaderboards ORDER BY id")).all()
        return [_leaderboard(r) for r in rows]

    # ---- submissions ------------------------------------------------------------------------

    def add_submission(self, user: User, board: Leaderboard, file_name: str, source: str,
                       sha256: str, report_text: str, score_seconds: float) -> int:
        """Store an upload, its self-reported run and a queued verification job, all or nothing."""
        now = time.time()
        with self.engine.begin() as conn:
            submission_id = conn.execute(sa.text(
                "INSERT INTO submissions (user_id, leaderboard_id, file_name, source, sha256, created_at) "
                "VALUES (:u, :b, :f, :s, :h, :t) RETURNING id"),
                {"u": user.id, "b": board.id, "f": file_name, "s": source, "h": sha256, "t": now}
            ).scalar_one()
            conn.execute(sa.text(
                "INSERT INTO runs (submission_id, mode, secret, runner, gpu, score_seconds, passed, "
                "message, report, created_at) VALUES (:s, :m, :secret, :r, :g, :score, :p, :msg, :rep, :t)"),
                {"s": submission_id, "m": "self-reported", "secret": False, "r": user.name,
                 "g": _device_name(report_text), "score": score_seconds, "p": True,
                 "msg": "self-reported by the uploader", "rep": report_text, "t": now})
            conn.execute(sa.text(
                "INSERT INTO jobs (submission_id, state, attempts, created_at) VALUES (:s, 'queued', 0, :t)"),
                {"s": submission_id, "t": now})
        return submission_id

    def submission(self, submission_id: int) -> dict | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.text(
                "SELECT s.id, s.file_name, s.source, s.sha256, s.created_at, u.name AS user_name, "
                "b.name AS leaderboard FROM submissions s JOIN users u ON u.id = s.user_id "
                "JOIN leaderboards b ON b.id = s.leaderboard_id WHERE s.id = :i"),
                {"i": submission_id}).first()
            if row is None:
                return None
            runs = conn.execute(sa.text("SELECT * FROM runs WHERE submission_id = :i ORDER BY id"),
                                {"i": submission_id}).all()
            job = conn.execute(sa.text("SELECT state, attempts FROM jobs WHERE submission_id = :i "
                                       "ORDER BY id DESC"), {"i": submission_id}).first()
        return {"id": row.id, "user": row.user_name, "leaderboard": row.leaderboard,
                "file_name": row.file_name, "source": row.source, "sha256": row.sha256,
                "created_at": row.created_at,
                "job": None if job is None else {"state": job.state, "attempts": job.attempts},
                "runs": [_run(r) for r in runs]}

    def submissions(self, board: Leaderboard, limit: int = 50) -> list[dict]:
        """The latest submissions of a leaderboard with their verification state."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT s.id, s.file_name, s.sha256, s.created_at, u.name AS user_name, j.state "
                "FROM submissions s JOIN users u ON u.id = s.user_id "
                "LEFT JOIN jobs j ON j.submission_id = s.id "
                "WHERE s.leaderboard_id = :b ORDER BY s.id DESC LIMIT :l"),
                {"b": board.id, "l": limit}).all()
            verdicts = self._secret_verdicts(conn, board)
        out = []
        for r in rows:
            verdict = verdicts.get(r.id)
            status = r.state or "none"
            if verdict is not None:
                status = "verified" if verdict["passed"] else "failed"
            out.append({"id": r.id, "user": r.user_name, "file_name": r.file_name, "sha256": r.sha256,
                        "created_at": r.created_at, "status": status})
        return out

    # ---- ranking ----------------------------------------------------------------------------

    def _secret_verdicts(self, conn: sa.Connection, board: Leaderboard) -> dict[int, dict]:
        """The latest worker-verified (secret) run of each submission of a leaderboard."""
        rows = conn.execute(sa.text(
            "SELECT r.submission_id, r.passed, r.score_seconds, r.runner, r.gpu, r.created_at "
            "FROM runs r JOIN submissions s ON s.id = r.submission_id "
            "WHERE s.leaderboard_id = :b AND r.secret = :t ORDER BY r.id"), {"b": board.id, "t": True}).all()
        return {r.submission_id: {"passed": bool(r.passed), "score_seconds": r.score_seconds,
                                  "runner": r.runner, "gpu": r.gpu, "verified_at": r.created_at}
                for r in rows}

    def ranking(self, board: Leaderboard) -> list[dict]:
        """Each user's best verified submission: lower score first, ties to the earlier one."""
        with self.engine.connect() as conn:
            verdicts = self._secret_verdicts(conn, board)
            rows = conn.execute(sa.text(
                "SELECT s.id, s.file_name, s.created_at, u.name AS user_name, r.score_seconds AS self_score "
                "FROM submissions s JOIN users u ON u.id = s.user_id "
                "JOIN runs r ON r.submission_id = s.id AND r.mode = 'self-reported' "
                "WHERE s.leaderboard_id = :b ORDER BY s.id"), {"b": board.id}).all()
        best: dict[str, dict] = {}
        for r in rows:
            verdict = verdicts.get(r.id)
            if verdict is None or not verdict["passed"] or verdict["score_seconds"] is None:
                continue
            entry = {"user": r.user_name, "submission_id": r.id, "file_name": r.file_name,
                     "submitted_at": r.created_at, "score_seconds": verdict["score_seconds"],
                     "self_reported_seconds": r.self_score, "gpu": verdict["gpu"],
                     "runner": verdict["runner"], "verified_at": verdict["verified_at"]}
            held = best.get(r.user_name)
            if held is None or (entry["score_seconds"], entry["submitted_at"], entry["submission_id"]) < \
                    (held["score_seconds"], held["submitted_at"], held["submission_id"]):
                best[r.user_name] = entry
        ranked = sorted(best.values(), key=lambda e: (e["score_seconds"], e["submitted_at"], e["submission_id"]))
        for place, entry in enumerate(ranked, start=1):
            entry["rank"] = place
        return ranked

    # ---- jobs -------------------------------------------------------------------------------

    def claim_job(self, worker: str) -> Job | None:
        """Atomically take the oldest queued job (or one whose lease ran out); None when idle.

        The claim is a compare-and-set: an UPDATE that only matches while the job is still free,
        so of two workers racing for one job exactly one updates a row.
        """
        free = "(state = 'queued' OR (state = 'claimed' AND lease_until < :now))"
        for _attempt in range(20):
            now = time.time()
            with self.engine.begin() as conn:
                row = conn.execute(sa.text(f"SELECT id, submission_id, attempts FROM jobs WHERE {free} "
                                           "ORDER BY id LIMIT 1"), {"now": now}).first()
                if row is None:
                    return None
                lease = secrets.token_hex(16)
                taken = conn.execute(sa.text(
                    f"UPDATE jobs SET state = 'claimed', worker = :w, lease = :l, lease_until = :until, "
                    f"attempts = attempts + 1 WHERE id = :i AND {free}"),
                    {"w": worker, "l": lease, "until": now + self.lease_seconds, "i": row.id, "now": now})
                if taken.rowcount == 1:
                    return Job(id=row.id, lease=lease, submission_id=row.submission_id,
                               attempts=row.attempts + 1)
        return None

    def job_for_lease(self, job_id: int, lease: str) -> Job | None:
        """The job, if ``lease`` is its current claim and the claim has not run out."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.text("SELECT id, submission_id, attempts, state, lease, lease_until "
                                       "FROM jobs WHERE id = :i"), {"i": job_id}).first()
        if row is None or row.state != "claimed" or row.lease != lease or row.lease_until < time.time():
            return None
        return Job(id=row.id, lease=row.lease, submission_id=row.submission_id, attempts=row.attempts)

    def finish_job(self, job: Job, *, runner: str, gpu: str, score_seconds: float | None,
                   passed: bool, message: str, report_text: str) -> bool:
        """Store a worker's run and close the job, only if the claim still holds (else False)."""
        now = time.time()
        with self.engine.begin() as conn:
            closed = conn.execute(sa.text(
                "UPDATE jobs SET state = 'done', finished_at = :t WHERE id = :i AND state = 'claimed' "
                "AND lease = :l AND lease_until >= :t"), {"t": now, "i": job.id, "l": job.lease})
            if closed.rowcount != 1:
                return False
            conn.execute(sa.text(
                "INSERT INTO runs (submission_id, mode, secret, runner, gpu, score_seconds, passed, "
                "message, report, created_at) VALUES (:s, 'leaderboard', :secret, :r, :g, :score, :p, "
                ":msg, :rep, :t)"),
                {"s": job.submission_id, "secret": True, "r": runner, "g": gpu, "score": score_seconds,
                 "p": passed, "msg": message, "rep": report_text, "t": now})
        return True

    # ---- for tests and the admin ------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return {table: conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one()
                    for table in ("leaderboards", "users", "submissions", "runs", "jobs")}


def _device_name(report_text: str) -> str:
    try:
        device = json.loads(report_text).get("device") or {}
        return str(device.get("name") or device.get("kind") or "unknown")
    except (ValueError, AttributeError):
        return "unknown"


def _run(row) -> dict:
    return {"id": row.id, "mode": row.mode, "secret": bool(row.secret), "runner": row.runner,
            "gpu": row.gpu, "score_seconds": row.score_seconds, "passed": bool(row.passed),
            "message": row.message, "report": json.loads(row.report) if row.report else None,
            "created_at": row.created_at}
