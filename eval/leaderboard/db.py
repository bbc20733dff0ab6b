"""The leaderboard's database: schema, ordered migrations and every query the server makes.

SQLAlchemy Core with plain SQL, so one SQLite file (the default) and a PostgreSQL URL both work.
Times are stored as Unix seconds (floats). Every write happens in one transaction. Migrations hold
a lock (PostgreSQL: an advisory lock; SQLite: the write lock), so servers started together migrate
once. A run's public view (``runs.public``, built by ``publish``) is stored beside its raw report,
which is never published.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from eval.leaderboard.auth import hash_token, new_token
from eval.leaderboard.publish import failure_message, public_cases
from eval.leaderboard.seeds import new_seed_key, seed_key_from_number

DEFAULT_DB = "leaderboard.db"
MIGRATION_LOCK = 0x51524C42      # the PostgreSQL advisory lock key ("QRLB")


class DbError(ValueError):
    """A request the database refuses (a duplicate name, an unknown row); one-line message."""


class QueueFull(DbError):
    """A user already has as many submissions waiting for verification as allowed."""


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


def _fill_seed_keys(conn: sa.Connection) -> None:
    for row in conn.execute(sa.text("SELECT id FROM leaderboards WHERE seed_key IS NULL")).all():
        conn.execute(sa.text("UPDATE leaderboards SET seed_key = :k WHERE id = :i"),
                     {"k": new_seed_key(), "i": row.id})


def _fill_public_views(conn: sa.Connection) -> None:
    """Runs stored before schema 3: their public view, and no worker message published as it was."""
    for row in conn.execute(sa.text("SELECT id, secret, passed, report FROM runs WHERE public IS NULL")).all():
        try:
            report = json.loads(row.report) if row.report else None
        except ValueError:
            report = None
        public = json.dumps(public_cases(report))
        if row.secret and not row.passed:
            conn.execute(sa.text("UPDATE runs SET public = :p, failure = 'legacy', message = :m WHERE id = :i"),
                         {"p": public, "m": failure_message("legacy"), "i": row.id})
        else:
            conn.execute(sa.text("UPDATE runs SET public = :p WHERE id = :i"), {"p": public, "i": row.id})


def _migration_3(dialect: str) -> list:
    return [
        "ALTER TABLE leaderboards ADD COLUMN seed_key TEXT",
        "ALTER TABLE users ADD COLUMN last_upload_at DOUBLE PRECISION",
        "ALTER TABLE runs ADD COLUMN failure TEXT",
        "ALTER TABLE runs ADD COLUMN public TEXT",
        "ALTER TABLE jobs ADD COLUMN heartbeat_at DOUBLE PRECISION",
        "CREATE INDEX jobs_by_submission ON jobs (submission_id)",
        _fill_seed_keys,
        _fill_public_views,
    ]


# Append only; never edit one that has shipped. A step is SQL text or a function of the connection.
MIGRATIONS = [_migration_1, _migration_2, _migration_3]


def make_engine(db: str) -> sa.Engine:
    """An engine for a database URL (``postgresql://…``) or a SQLite file path."""
    url = db if "://" in db else f"sqlite:///{db}"
    if "://" not in db and db != ":memory:" and not os.path.exists(db):
        os.close(os.open(db, os.O_CREAT | os.O_WRONLY, 0o600))   # the secrets' file: owner only
    if url.startswith("sqlite"):
        engine = sa.create_engine(url, connect_args={"timeout": 30, "check_same_thread": False},
                                  pool_size=20, max_overflow=40)

        @sa.event.listens_for(engine, "connect")
        def _sqlite_settings(dbapi_connection, _record):
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA busy_timeout=30000")
            _write_ahead_log(cursor)
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()
        return engine
    return sa.create_engine(url, pool_pre_ping=True)


def _write_ahead_log(cursor, patience_s: float = 30.0) -> None:
    """Put the SQLite file in WAL mode (the file keeps it: the first connection does the work).  Connections of
    several processes that open a new file at the same moment may all try to convert it; SQLite then fails
    all but one of them at once with "database is locked", without waiting (each holds the shared lock the
    others need), so a failed one tries again until the file is converted or ``patience_s`` has passed."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def schema_version(conn: sa.Connection) -> int:
    if not sa.inspect(conn).has_table("schema_version"):
        return 0
    return conn.execute(sa.text("SELECT version FROM schema_version")).scalar_one()


def _lock_for_migration(conn: sa.Connection) -> None:
    """Hold the database's migration lock until this transaction ends."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
    elif conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")     # the write lock, and DDL inside the transaction


def migrate(engine: sa.Engine) -> int:
    """Apply every migration not yet applied, in order, under the migration lock (another server
    migrating at the same moment waits, then finds nothing left to do); returns the schema version.
    SQLite may refuse a lock without waiting while a new file turns to WAL mode: then try again."""
    for attempt in range(10):
        try:
            return _migrate_locked(engine)
        except sa.exc.OperationalError as exc:
            if engine.dialect.name != "sqlite" or "locked" not in str(exc) or attempt == 9:
                raise
            time.sleep(0.1 * (attempt + 1))


def _migrate_locked(engine: sa.Engine) -> int:
    dialect = engine.dialect.name
    with engine.begin() as conn:
        _lock_for_migration(conn)
        if not sa.inspect(conn).has_table("schema_version"):
            conn.execute(sa.text("CREATE TABLE schema_version (version INTEGER NOT NULL)"))
            conn.execute(sa.text("INSERT INTO schema_version (version) VALUES (0)"))
        current = schema_version(conn)
        if current > len(MIGRATIONS):
            raise DbError(f"database schema version {current} is newer than this code "
                          f"({len(MIGRATIONS)}); upgrade the evaluator")
        for number in range(current + 1, len(MIGRATIONS) + 1):
            for step in MIGRATIONS[number - 1](dialect):
                if callable(step):
                    step(conn)
                else:
                    conn.execute(sa.text(step))
            conn.execute(sa.text("UPDATE schema_version SET version = :v"), {"v": number})
    return len(MIGRATIONS)


def parse_deadline(value) -> float | None:
    """A deadline as Unix seconds, from null, a number or an ISO 8601 time (``…Z`` for UTC)."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value) or not 0 <= value < 1e11:
            raise ValueError(f"deadline {value!r} is not a time (Unix seconds between 0 and 1e11)")
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
    seed_key: str
    deadline: float | None
    created_at: float

    def public(self) -> dict:
        """What anyone may see: never the seed key."""
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
                       spec_sha256=row.spec_sha256, seed_key=row.seed_key, deadline=row.deadline,
                       created_at=row.created_at)


_RUN_INSERT = sa.text(
    "INSERT INTO runs (submission_id, mode, secret, runner, gpu, score_seconds, passed, failure, message, "
    "report, public, created_at) VALUES (:s, :mode, :secret, :r, :g, :score, :p, :f, :msg, :rep, :pub, :t)")

# A job a worker may take: queued, or claimed by a worker whose lease ran out (and attempts are left).
_FREE = "(j.state = 'queued' OR (j.state = 'claimed' AND j.lease_until < :now AND j.attempts < :cap))"

# Fair order: users take turns. A job's turn is its place among its user's unfinished jobs (those
# running count), so a user with a job running waits behind one with none; ties go to the oldest.
_PICK = sa.text(
    "SELECT id, submission_id, attempts FROM (SELECT j.id, j.submission_id, j.attempts, j.state, "
    "j.lease_until, ROW_NUMBER() OVER (PARTITION BY s.user_id ORDER BY j.id) AS turn "
    "FROM jobs j JOIN submissions s ON s.id = j.submission_id WHERE j.state IN ('queued', 'claimed')) AS j "
    f"WHERE {_FREE} ORDER BY turn, id LIMIT 1")


class Database:
    """Every query the leaderboard makes, on one engine."""

    def __init__(self, db: str, *, lease_seconds: float = 600.0, max_attempts: int = 3):
        self.engine = make_engine(db)
        self.lease_seconds = lease_seconds
        self.max_attempts = max_attempts
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
        """A new leaderboard. Its jobs' seeds are keyed hashes under a random 256-bit key, or, with
        ``secret_seed``, under a key made from that number (reproducible, for tests and audits)."""
        if not name or len(name) > 64 or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise DbError(f"leaderboard name {name!r}: use 1-64 letters, digits, '-', '_' or '.'")
        key = new_seed_key() if secret_seed is None else seed_key_from_number(secret_seed)
        with self.engine.begin() as conn:
            if conn.execute(sa.text("SELECT 1 FROM leaderboards WHERE name = :n"), {"n": name}).first():
                raise DbError(f"leaderboard {name!r} already exists")
            # secret_seed: the column of schema 1, unused since the seed key (schema 3) replaced it
            conn.execute(sa.text(
                "INSERT INTO leaderboards (name, spec_name, spec_text, spec_sha256, secret_seed, seed_key, "
                "deadline, created_at) VALUES (:n, :sn, :st, :sh, 0, :k, :d, :t)"),
                {"n": name, "sn": spec_name, "st": spec_text, "sh": spec_sha256, "k": key,
                 "d": deadline, "t": time.time()})
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

    def add_submission(self, user: User, board: Leaderboard, file_name: str, source: str, sha256: str,
                       report_text: str, score_seconds: float, *, max_waiting: int) -> tuple[int, bool]:
        """Store an upload, its self-reported run and a queued verification job, all or nothing.

        Returns (submission id, created). The same source uploaded again by the same user to the
        same leaderboard (a client retrying) gives the first submission back, ``created`` False.
        Raises ``QueueFull`` when the user already has ``max_waiting`` jobs waiting.
        """
        now = time.time()
        with self.engine.begin() as conn:
            # A write first: it locks the user's row (PostgreSQL) or the database (SQLite), so one
            # user's uploads are checked and stored one at a time.
            conn.execute(sa.text("UPDATE users SET last_upload_at = :t WHERE id = :u"), {"t": now, "u": user.id})
            existing = conn.execute(sa.text(
                "SELECT id FROM submissions WHERE leaderboard_id = :b AND user_id = :u AND sha256 = :h "
                "ORDER BY id LIMIT 1"), {"b": board.id, "u": user.id, "h": sha256}).first()
            if existing is not None:
                return existing.id, False
            waiting = conn.execute(sa.text(
                "SELECT COUNT(*) FROM jobs j JOIN submissions s ON s.id = j.submission_id "
                "WHERE s.user_id = :u AND j.state IN ('queued', 'claimed')"), {"u": user.id}).scalar_one()
            if waiting >= max_waiting:
                raise QueueFull(f"user {user.name!r} already has {waiting} submission(s) waiting for "
                                f"verification (the limit is {max_waiting}); upload again once one is verified")
            submission_id = conn.execute(sa.text(
                "INSERT INTO submissions (user_id, leaderboard_id, file_name, source, sha256, created_at) "
                "VALUES (:u, :b, :f, :s, :h, :t) RETURNING id"),
                {"u": user.id, "b": board.id, "f": file_name, "s": source, "h": sha256, "t": now}
            ).scalar_one()
            report = json.loads(report_text)
            conn.execute(_RUN_INSERT, {
                "s": submission_id, "mode": "self-reported", "secret": False, "r": user.name,
                "g": _device_name(report), "score": score_seconds, "p": True, "f": None,
                "msg": "self-reported by the uploader", "rep": report_text,
                "pub": json.dumps(public_cases(report)), "t": now})
            conn.execute(sa.text(
                "INSERT INTO jobs (submission_id, state, attempts, created_at) VALUES (:s, 'queued', 0, :t)"),
                {"s": submission_id, "t": now})
        return submission_id, True

    def submission(self, submission_id: int) -> dict | None:
        """A submission with its runs' public views (never a raw report)."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.text(
                "SELECT s.id, s.file_name, s.source, s.sha256, s.created_at, u.name AS user_name, "
                "b.name AS leaderboard FROM submissions s JOIN users u ON u.id = s.user_id "
                "JOIN leaderboards b ON b.id = s.leaderboard_id WHERE s.id = :i"),
                {"i": submission_id}).first()
            if row is None:
                return None
            runs = conn.execute(sa.text(
                "SELECT id, mode, secret, runner, gpu, score_seconds, passed, failure, message, public, "
                "created_at FROM runs WHERE submission_id = :i ORDER BY id"), {"i": submission_id}).all()
            job = conn.execute(sa.text("SELECT state, attempts FROM jobs WHERE submission_id = :i "
                                       "ORDER BY id DESC"), {"i": submission_id}).first()
        return {"id": row.id, "user": row.user_name, "leaderboard": row.leaderboard,
                "file_name": row.file_name, "source": row.source, "sha256": row.sha256,
                "created_at": row.created_at,
                "job": None if job is None else {"state": job.state, "attempts": job.attempts},
                "runs": [_run(r) for r in runs]}

    def submission_version(self, submission_id: int) -> tuple | None:
        """What a cached page of the submission depends on: its last run and its job's state."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.text(
                "SELECT (SELECT MAX(id) FROM runs WHERE submission_id = :i) AS last_run, "
                "(SELECT state FROM jobs WHERE submission_id = :i ORDER BY id DESC LIMIT 1) AS state, "
                "(SELECT attempts FROM jobs WHERE submission_id = :i ORDER BY id DESC LIMIT 1) AS attempts"),
                {"i": submission_id}).first()
        return None if row is None or row.last_run is None else (row.last_run, row.state, row.attempts)

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

    def _give_up_lost_jobs(self, conn: sa.Connection, now: float) -> None:
        """Jobs whose last allowed attempt's lease ran out: failed, with a 'worker lost' run."""
        lost = conn.execute(sa.text(
            "SELECT id, submission_id, attempts FROM jobs WHERE state = 'claimed' AND lease_until < :now "
            "AND attempts >= :cap"), {"now": now, "cap": self.max_attempts}).all()
        for job in lost:
            closed = conn.execute(sa.text(
                "UPDATE jobs SET state = 'failed', finished_at = :now WHERE id = :i AND state = 'claimed' "
                "AND lease_until < :now"), {"now": now, "i": job.id})
            if closed.rowcount == 1:
                conn.execute(_RUN_INSERT, {
                    "s": job.submission_id, "mode": "leaderboard", "secret": True, "r": "server", "g": "-",
                    "score": None, "p": False, "f": "worker-lost",
                    "msg": failure_message("worker-lost", f"{job.attempts} attempt(s), each outlived its lease"),
                    "rep": "null", "pub": "[]", "t": now})

    def claim_job(self, worker: str) -> Job | None:
        """Atomically take a free job, users in turn; None when idle.

        The claim is a compare-and-set: an UPDATE that only matches while the job is still free,
        so of two workers racing for one job exactly one updates a row. Jobs whose last attempt
        was lost are closed first (``max_attempts``).
        """
        for _attempt in range(20):
            now = time.time()
            with self.engine.begin() as conn:
                self._give_up_lost_jobs(conn, now)
                row = conn.execute(_PICK, {"now": now, "cap": self.max_attempts}).first()
                if row is None:
                    return None
                lease = secrets.token_hex(16)
                taken = conn.execute(sa.text(
                    "UPDATE jobs SET state = 'claimed', worker = :w, lease = :l, lease_until = :until, "
                    "heartbeat_at = :now, attempts = attempts + 1 WHERE id = :i AND "
                    + _FREE.replace("j.", "")),
                    {"w": worker, "l": lease, "until": now + self.lease_seconds, "i": row.id, "now": now,
                     "cap": self.max_attempts})
                if taken.rowcount == 1:
                    return Job(id=row.id, lease=lease, submission_id=row.submission_id,
                               attempts=row.attempts + 1)
        return None

    def heartbeat(self, job_id: int, lease: str) -> bool:
        """Extend a live claim by a full lease (the worker is still running it); False if it is lost."""
        now = time.time()
        with self.engine.begin() as conn:
            kept = conn.execute(sa.text(
                "UPDATE jobs SET lease_until = :until, heartbeat_at = :now WHERE id = :i AND "
                "state = 'claimed' AND lease = :l AND lease_until >= :now"),
                {"until": now + self.lease_seconds, "now": now, "i": job_id, "l": lease})
        return kept.rowcount == 1

    def job_for_lease(self, job_id: int, lease: str) -> Job | None:
        """The job, if ``lease`` is its current claim and the claim has not run out."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.text("SELECT id, submission_id, attempts, state, lease, lease_until "
                                       "FROM jobs WHERE id = :i"), {"i": job_id}).first()
        if row is None or row.state != "claimed" or row.lease != lease or row.lease_until < time.time():
            return None
        return Job(id=row.id, lease=row.lease, submission_id=row.submission_id, attempts=row.attempts)

    def finish_job(self, job: Job, *, runner: str, gpu: str, score_seconds: float | None, passed: bool,
                   failure: str | None, message: str, report_text: str, public: list) -> bool:
        """Store a worker's run and close the job, only if the claim still holds (else False)."""
        now = time.time()
        with self.engine.begin() as conn:
            closed = conn.execute(sa.text(
                "UPDATE jobs SET state = 'done', finished_at = :t WHERE id = :i AND state = 'claimed' "
                "AND lease = :l AND lease_until >= :t"), {"t": now, "i": job.id, "l": job.lease})
            if closed.rowcount != 1:
                return False
            conn.execute(_RUN_INSERT, {
                "s": job.submission_id, "mode": "leaderboard", "secret": True, "r": runner, "g": gpu,
                "score": score_seconds, "p": passed, "f": failure, "msg": message, "rep": report_text,
                "pub": json.dumps(public), "t": now})
        return True

    # ---- for tests and the admin ------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return {table: conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one()
                    for table in ("leaderboards", "users", "submissions", "runs", "jobs")}


def _device_name(report) -> str:
    device = report.get("device") if isinstance(report, dict) else None
    name = (device.get("name") or device.get("kind")) if isinstance(device, dict) else None
    return name[:128] if isinstance(name, str) and name else "unknown"


def _run(row) -> dict:
    try:
        cases = json.loads(row.public) if row.public else []
    except ValueError:
        cases = []
    return {"id": row.id, "mode": row.mode, "secret": bool(row.secret), "runner": row.runner,
            "gpu": row.gpu, "score_seconds": row.score_seconds, "passed": bool(row.passed),
            "failure": row.failure, "message": row.message, "cases": cases, "created_at": row.created_at}
