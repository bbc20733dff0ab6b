"""The database layer on a real SQLite file: migrations, tokens, the atomic claim, leases, ranking."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time

import pytest
import sqlalchemy as sa

from eval.leaderboard.auth import hash_token
from eval.leaderboard.db import MIGRATIONS, Database, _write_ahead_log, schema_version

SPEC = "tests:\n  - {batch: 1, n: 4, cond: 1, seed: 1}\nbenchmarks:\n  - {batch: 1, n: 4, cond: 1, seed: 2}\n"


def make_db(tmp_path, **kwargs) -> Database:
    return Database(str(tmp_path / "lb.db"), **kwargs)


def add_board(db: Database, name="qr"):
    return db.create_leaderboard(name, "spec.yml", SPEC, hashlib.sha256(SPEC.encode()).hexdigest(),
                                 secret_seed=99)


def submit(db: Database, user, board, n=0) -> int:
    return db.add_submission(user, board, "submission.py", f"# {n}\n", f"{n:064x}",
                             json.dumps({"device": {"name": "cpu"}}), 1e-5 * (n + 1), max_waiting=1000)[0]


def test_migrations_run_once_and_record_the_version(tmp_path):
    db = make_db(tmp_path)
    with db.engine.connect() as conn:
        assert schema_version(conn) == len(MIGRATIONS)
        tables = set(sa.inspect(conn).get_table_names())
    assert {"leaderboards", "users", "submissions", "runs", "jobs", "schema_version"} <= tables
    db.add_user("alice")
    db.close()
    again = make_db(tmp_path)           # a second open migrates nothing and keeps the rows
    assert again.counts()["users"] == 1
    again.close()


def test_tokens_are_stored_only_as_hashes(tmp_path):
    db = make_db(tmp_path)
    token = db.add_user("alice", admin=True)
    raw = (tmp_path / "lb.db").read_bytes() + (tmp_path / "lb.db-wal").read_bytes() \
        if (tmp_path / "lb.db-wal").exists() else (tmp_path / "lb.db").read_bytes()
    assert token.encode() not in raw
    assert hash_token(token).encode() in raw
    user = db.user_for_token(token)
    assert user.name == "alice" and user.is_admin
    assert db.user_for_token(token + "x") is None


def test_a_job_whose_lease_ran_out_is_given_out_again(tmp_path):
    db = make_db(tmp_path, lease_seconds=0.3)
    alice = db.user_for_token(db.add_user("alice"))
    submit(db, alice, add_board(db))
    first = db.claim_job("w1")
    assert db.claim_job("w2") is None          # still held
    time.sleep(0.4)
    second = db.claim_job("w2")
    assert second.id == first.id and second.attempts == 2
    # the first worker's late result is refused; the second one's is stored
    assert db.job_for_lease(first.id, first.lease) is None
    assert db.finish_job(second, runner="w2", gpu="cpu", score_seconds=1e-5, passed=True, failure=None,
                         message="ok", report_text="{}", public=[])
    assert db.finish_job(first, runner="w1", gpu="cpu", score_seconds=1e-6, passed=True, failure=None,
                         message="late", report_text="{}", public=[]) is False
    assert db.counts()["runs"] == 2            # the self-reported run and one verified run


def verify(db, job, score, passed=True):
    assert db.finish_job(job, runner="w", gpu="cpu", score_seconds=score, passed=passed, failure=None,
                         message="", report_text="{}", public=[])


def test_ranking_takes_each_users_best_verified_entry_ties_to_the_earlier(tmp_path):
    db = make_db(tmp_path)
    alice = db.user_for_token(db.add_user("alice"))
    bob = db.user_for_token(db.add_user("bob"))
    carol = db.user_for_token(db.add_user("carol"))
    board = add_board(db)
    a1, a2, b1, c1, c2 = (submit(db, alice, board, 1), submit(db, alice, board, 2),
                          submit(db, bob, board, 3), submit(db, carol, board, 4), submit(db, carol, board, 5))
    jobs = {}
    while (job := db.claim_job("w")) is not None:
        jobs[job.submission_id] = job
    verify(db, jobs[a1], 3e-5)
    verify(db, jobs[a2], 2e-5)                   # alice's better entry
    verify(db, jobs[b1], 2e-5)                   # ties with alice's, but later
    verify(db, jobs[c1], 1e-6, passed=False)     # failed: never ranked
    # c2 never verified: not ranked either
    ranking = db.ranking(board)
    assert [(e["user"], e["submission_id"]) for e in ranking] == [("alice", a2), ("bob", b1)]
    assert [e["rank"] for e in ranking] == [1, 2]
    assert ranking[0]["self_reported_seconds"] == 1e-5 * 3
    states = {s["id"]: s["status"] for s in db.submissions(board)}
    assert states[c1] == "failed" and states[c2] == "claimed" and states[a2] == "verified"


def test_an_older_database_is_brought_up_to_date_in_order(tmp_path, monkeypatch):
    import eval.leaderboard.db as db_module

    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:1])     # a database made by older code
    old = make_db(tmp_path)
    old.add_user("alice")
    with old.engine.connect() as conn:
        assert schema_version(conn) == 1
        assert not sa.inspect(conn).get_indexes("jobs")
    old.close()
    monkeypatch.undo()
    new = make_db(tmp_path)
    with new.engine.connect() as conn:
        assert schema_version(conn) == len(MIGRATIONS)
        assert sorted(i["name"] for i in sa.inspect(conn).get_indexes("jobs")) == \
            ["jobs_by_state", "jobs_by_submission"]
    assert new.counts()["users"] == 1


def test_schema_3_withholds_old_worker_messages_and_keys_old_leaderboards(tmp_path, monkeypatch):
    """A database of schema 2 held failed runs whose message was the worker's raw error (which
    could quote a token or a seed): after the migration no such text is served."""
    import eval.leaderboard.db as db_module

    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS[:2])
    old = make_db(tmp_path)
    token = old.add_user("alice")
    leak = f"the evaluator exited with code 112: RuntimeError: environ({{'LEADERBOARD_TOKEN': '{token}'}})"
    report = {"benchmarks": [{"spec": {"batch": 1, "n": 4, "cond": 1, "seed": 10**17, "case": "dense"},
                              "status": "pass", "message": leak, "stats": {"mean": 5000.0, "runs": 7}}]}
    with old.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO leaderboards (name, spec_name, spec_text, spec_sha256, secret_seed, "
                             "created_at) VALUES ('qr', 's.yml', :t, 'x', 77, 0)"), {"t": SPEC})
        conn.execute(sa.text("INSERT INTO submissions (user_id, leaderboard_id, file_name, source, sha256, "
                             "created_at) VALUES (1, 1, 's.py', '#', 'y', 0)"))
        conn.execute(sa.text("INSERT INTO runs (submission_id, mode, secret, runner, gpu, passed, message, report, "
                             "created_at) VALUES (1, 'leaderboard', :t, 'w', 'cpu', :f, :m, :r, 0)"),
                     {"t": True, "f": False, "m": leak, "r": json.dumps(report)})
    old.close()
    monkeypatch.undo()
    new = make_db(tmp_path)
    shown = new.submission(1)
    assert token not in json.dumps(shown) and str(10**17) not in json.dumps(shown)
    assert shown["runs"][0]["failure"] == "legacy" and "withheld" in shown["runs"][0]["message"]
    assert shown["runs"][0]["cases"][0]["mean_ns"] == 5000.0 and shown["runs"][0]["cases"][0]["runs"] == 7
    key = new.leaderboard("qr").seed_key
    assert len(key) == 64 and int(key, 16) > 0


def _locked_sqlite_file(path):
    """A SQLite file in rollback-journal mode, and a connection holding its exclusive lock."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    return holder


def test_conversion_to_wal_tries_again_while_the_file_is_locked(tmp_path):
    # Processes opening a new file together can make SQLite refuse the conversion at once ("database is
    # locked", no waiting); a connection that does not wait (timeout 0) meets the same refusal here.
    path = tmp_path / "board.db"
    holder = _locked_sqlite_file(path)
    threading.Timer(0.3, holder.execute, ["ROLLBACK"]).start()
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    started = time.monotonic()
    _write_ahead_log(conn.cursor())
    assert time.monotonic() - started >= 0.25
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_conversion_to_wal_gives_up_after_its_patience(tmp_path):
    path = tmp_path / "board.db"
    holder = _locked_sqlite_file(path)
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        _write_ahead_log(conn.cursor(), patience_s=0.2)
    assert 0.2 <= time.monotonic() - started < 5
    holder.execute("ROLLBACK")
