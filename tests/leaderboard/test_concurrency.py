"""Races, on a SQLite file and on a real PostgreSQL server the tests start themselves: servers
migrating one database at once, workers claiming at once, one user's uploads at once, and a real
server process taking concurrent uploads and claims."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import sqlalchemy as sa

from eval.leaderboard.db import MIGRATIONS, Database, QueueFull, schema_version

from .helpers import ROOT, ServerProcess, upload_body, variant

SPEC = "tests:\n  - {batch: 1, n: 4, cond: 1, seed: 1}\nbenchmarks:\n  - {batch: 1, n: 4, cond: 1, seed: 2}\n"
MIGRATE_AT = """
import sys, time
from eval.leaderboard.db import make_engine, migrate
engine = make_engine(sys.argv[1])
engine.connect().close()                 # connected before the start, so all begin at once
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
migrate(engine)
"""


def setup(url: str):
    db = Database(url)
    alice = db.user_for_token(db.add_user("alice"))
    board = db.create_leaderboard("qr", "spec.yml", SPEC, hashlib.sha256(SPEC.encode()).hexdigest(), secret_seed=9)
    return db, alice, board


def submit(db, user, board, n: int, max_waiting: int = 1000):
    return db.add_submission(user, board, "submission.py", f"# {n}\n", f"{n:064x}",
                             json.dumps({"device": {"name": "cpu"}}), 1e-5, max_waiting=max_waiting)


def test_servers_starting_together_migrate_the_database_once(database_url):
    """Six processes open a fresh database at the same instant: all succeed, the schema is made once."""
    start = time.time() + 4          # after every interpreter has imported sqlalchemy
    processes = [subprocess.Popen([sys.executable, "-c", MIGRATE_AT, database_url, str(start)], cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    outcomes = [(p.wait(timeout=120), p.stderr.read()) for p in processes]
    assert [code for code, _ in outcomes] == [0] * 6, [err.strip().splitlines()[-4:-1] for _, err in outcomes]
    db = Database(database_url)
    with db.engine.connect() as conn:
        assert schema_version(conn) == len(MIGRATIONS)
        assert conn.execute(sa.text("SELECT COUNT(*) FROM schema_version")).scalar_one() == 1
    db.close()


def test_two_claimers_never_take_the_same_job(database_url):
    db, alice, board = setup(database_url)
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
    db.close()
    assert sorted(taken) == sorted(set(taken)) and len(taken) == 30


def test_one_users_uploads_at_once_respect_the_cap_and_are_not_duplicated(database_url):
    db, alice, board = setup(database_url)

    def one(n):
        try:
            return submit(db, alice, board, n, max_waiting=3)
        except QueueFull:
            return "full"
    with ThreadPoolExecutor(max_workers=16) as pool:
        outcomes = list(pool.map(one, range(16)))
    assert sum(o != "full" for o in outcomes) == 3 and db.counts()["jobs"] == 3
    first = [o for o in outcomes if o != "full"][0][0]
    n = next(i for i, o in enumerate(outcomes) if o != "full" and o[0] == first)
    with ThreadPoolExecutor(max_workers=12) as pool:       # the same file again, at once: a client retrying
        repeats = list(pool.map(lambda _: submit(db, alice, board, n, max_waiting=3), range(12)))
    assert set(repeats) == {(first, False)} and db.counts()["submissions"] == 3
    db.close()


def test_a_server_process_takes_concurrent_uploads_and_claims(database_url, tmp_path, project_files, own_report):
    from eval.specs import load_spec

    db = Database(database_url)
    tokens = {name: db.add_user(name) for name in ("alice", "bob")}
    admin = db.add_user("organiser", admin=True)
    spec = project_files["spec"]
    db.create_leaderboard("qr", spec.name, spec.read_text(), load_spec(spec).sha256, secret_seed=5)
    db.close()
    server = ServerProcess(database_url, tmp_path / "server.log").start()
    try:
        def upload(i):
            client = server.client(tokens["alice" if i % 2 else "bob"])
            return client.post("/api/leaderboards/qr/submissions",
                               upload_body(project_files, own_report, source=variant(i)))["submission"]["id"]
        with ThreadPoolExecutor(max_workers=20) as pool:
            ids = list(pool.map(upload, range(40)))
        assert len(set(ids)) == 40

        def claim(_):
            return server.client(admin).post("/api/jobs/claim", {"host": "h"})["job"]["id"]
        with ThreadPoolExecutor(max_workers=20) as pool:
            claimed = list(pool.map(claim, range(40)))
        assert sorted(claimed) == sorted(set(claimed)) and len(claimed) == 40
    finally:
        server.stop()
