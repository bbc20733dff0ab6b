"""The database layer on a real SQLite file: migrations, tokens, the atomic claim, leases, ranking."""

from __future__ import annotations

import hashlib
import json
import threading
import time

import sqlalchemy as sa

from eval.leaderboard.auth import hash_token
from eval.leaderboard.db import MIGRATIONS, Database, schema_version

SPEC = "tests:\n  - {batch: 1, n: 4, cond: 1, seed: 1}\nbenchmarks:\n  - {batch: 1, n: 4, cond: 1, seed: 2}\n"


def make_db(tmp_path, **kwargs) -> Database:
    return Database(str(tmp_path / "lb.db"), **kwargs)


def add_board(db: Database, name="qr"):
    return db.create_leaderboard(name, "spec.yml", SPEC, hashlib.sha256(SPEC.encode()).hexdigest(),
                                 secret_seed=99)


def submit(db: Database, user, board, n=0) -> int:
    return db.add_submission(user, board, "submission.py", f"# {n}\n", f"{n:064x}",
                             json.dumps({"device": {"name": "cpu"}}), 1e-5 * (n + 1))


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


def test_two_claimers_never_take_the_same_job(tmp_path):
    db = make_db(tmp_path)
    alice = db.user_for_token(db.add_user("alice"))
    board = add_board(db)
    for n in range(30):
        submit(db, alice, board, n)
    taken: list[int] = []
    lock = threading.Lock()

    def drain(name):
        while (job := db.claim_job(name)) is not None:
            with lock:
                taken.append(job.id)

    threads = [threading.Thread(target=drain, args=(f"w{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(taken) == sorted(set(taken)) and len(taken) == 30


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
    assert db.finish_job(second, runner="w2", gpu="cpu", score_seconds=1e-5, passed=True,
                         message="ok", report_text="{}")
    assert db.finish_job(first, runner="w1", gpu="cpu", score_seconds=1e-6, passed=True,
                         message="late", report_text="{}") is False
    assert db.counts()["runs"] == 2            # the self-reported run and one verified run


def verify(db, job, score, passed=True):
    assert db.finish_job(job, runner="w", gpu="cpu", score_seconds=score, passed=passed,
                         message="", report_text="{}")


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
        assert [i["name"] for i in sa.inspect(conn).get_indexes("jobs")] == ["jobs_by_state"]
    assert new.counts()["users"] == 1
