"""The JSON API against a real server process on loopback with a real SQLite file."""

from __future__ import annotations

import copy
import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from eval.leaderboard.client import ClientError

from .helpers import (GEQRF_SUBMISSION, SECRET_SEED, ServerProcess, ThreadServer, counts, job_seed_of, run_cli,
                      upload_body, variant)


def raw_post(url: str, data: bytes, token: str | None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def upload(board, report, *, user="alice", source=None, leaderboard="qr"):
    client = board["server"].client(board["tokens"][user])
    return client.post(f"/api/leaderboards/{leaderboard}/submissions",
                       upload_body(board["files"], report, source=source))["submission"]


def test_upload_stores_submission_self_run_and_queued_job(board, own_report):
    answer = upload(board, own_report)
    assert answer["status"] == "queued"
    means = [b["stats"]["mean"] for b in own_report["benchmarks"]]
    assert answer["self_reported_seconds"] == pytest.approx((means[0] * means[1]) ** 0.5 / 1e9)
    stored = counts(board["db"])
    assert (stored["submissions"], stored["runs"], stored["jobs"]) == (1, 1, 1)
    shown = board["server"].client().get(f"/api/submissions/{answer['id']}")["submission"]
    assert shown["user"] == "alice" and shown["source"] == GEQRF_SUBMISSION
    assert [r["mode"] for r in shown["runs"]] == ["self-reported"]
    # not ranked before a worker verified it
    assert board["server"].client().get("/api/leaderboards/qr/ranking")["ranking"] == []


def test_a_sent_score_is_ignored(board, own_report):
    report = copy.deepcopy(own_report)
    report["score"] = {"passed": True, "seconds": 1e-12, "us": 1e-6}
    answer = upload(board, report)
    assert answer["self_reported_seconds"] > 1e-9


def big_source() -> str:
    return "# " + "x" * (1 << 20) + "\n"


@pytest.mark.parametrize("case, status, message", [
    ("bad token", 401, "invalid token"),
    ("no token", 401, "missing bearer token"),
    ("bad JSON", 400, "request body is not valid JSON"),
    ("bad report JSON", 400, "report is not valid JSON"),
    ("oversize source", 413, "source is 1048579 bytes, over the 1048576 byte limit"),
    ("mismatched spec hash", 422, "does not match the leaderboard's spec"),
    ("failed report", 422, "did not pass"),
    ("flagged report", 422, "flagged by the evaluator's integrity checks: clock-skew"),
    ("missing case", 422, "case(s) of the spec missing"),
    ("unknown leaderboard", 404, "unknown leaderboard 'nope'"),
    ("other source", 422, "submission sha256 does not match the uploaded source"),
    ("bad file name", 400, "expected a plain name ending in .py"),
])
def test_bad_uploads_are_refused_with_their_own_message_and_nothing_stored(board, own_report, case, status,
                                                                           message):
    url = f"{board['server'].url}/api/leaderboards/qr/submissions"
    token = board["tokens"]["alice"]
    report = copy.deepcopy(own_report)
    body = upload_body(board["files"], report)
    if case == "bad token":
        token = token[:-2] + "xx"
    elif case == "no token":
        token = None
    elif case == "bad report JSON":
        body["report"] = body["report"][:-5]
    elif case == "oversize source":
        body["source"] = big_source()
    elif case == "mismatched spec hash":
        report["spec"]["sha256"] = "0" * 64
    elif case == "failed report":
        report["tests"][0]["status"] = "fail"
    elif case == "flagged report":
        report["benchmarks"][0]["flags"] = ["clock-skew"]
    elif case == "missing case":
        report["benchmarks"].pop()
    elif case == "unknown leaderboard":
        url = url.replace("/qr/", "/nope/")
    elif case == "other source":
        body["source"] = GEQRF_SUBMISSION + "# changed\n"
    elif case == "bad file name":
        body["file_name"] = "../evil.py"
    if case in ("mismatched spec hash", "failed report", "flagged report", "missing case"):
        body["report"] = json.dumps(report)
    data = b'{"file_name": "s.py", "source": ' if case == "bad JSON" else json.dumps(body).encode()
    before = counts(board["db"])
    got_status, got = raw_post(url, data, token)
    assert got_status == status
    assert message in got["error"]
    assert counts(board["db"]) == before


def test_upload_after_the_deadline_is_refused(board, own_report):
    admin = board["server"].client(board["tokens"]["admin"])
    admin.post("/api/leaderboards", {"name": "closed", "spec_name": "tiny.yml",
                                     "spec_text": board["files"]["spec"].read_text(),
                                     "deadline": "2020-01-01T00:00:00Z"})
    with pytest.raises(ClientError, match="403: leaderboard 'closed' closed at 2020-01-01"):
        upload(board, own_report, leaderboard="closed")
    assert counts(board["db"])["submissions"] == 0


# The contest's upload server refuses a file holding the word anywhere (eval/upload_rules.py); so does ours.
REFUSED_SOURCE = GEQRF_SUBMISSION + "# a side Stream would be refused here\n"
CONTEST_RULE = ("submission.py: the contest's upload server refuses any file containing the word 'stream' in any "
                "letter case (comments, strings and names count too), before running anything; "
                "found on line 6: '# a side Stream would be refused here'")


def test_an_upload_the_contest_would_refuse_is_refused_and_nothing_stored(board, own_report):
    """The report is otherwise acceptable (its sha256 is the source's): the contest's rule alone refuses it."""
    before = counts(board["db"])
    status, got = raw_post(f"{board['server'].url}/api/leaderboards/qr/submissions",
                           json.dumps(upload_body(board["files"], own_report, source=REFUSED_SOURCE)).encode(),
                           board["tokens"]["alice"])
    assert (status, got) == (422, {"error": CONTEST_RULE})
    assert counts(board["db"]) == before


def test_a_source_that_is_not_utf8_text_is_refused_not_a_server_error(board, own_report):
    """JSON can carry a lone surrogate ("\\ud800"), which no UTF-8 file holds: the contest's rule refuses it."""
    body = upload_body(board["files"], own_report)
    data = json.dumps(body).encode().replace(b'"source": "', b'"source": "x = 1\\n\\ud800', 1)
    before = counts(board["db"])
    status, got = raw_post(f"{board['server'].url}/api/leaderboards/qr/submissions", data, board["tokens"]["alice"])
    assert status == 422 and got["error"].endswith("line 2: character U+D800 is not valid UTF-8"), got
    assert counts(board["db"]) == before


def test_the_upload_command_prints_the_refusal_as_one_line(board, own_report):
    folder = board["tmp"]
    submission = folder / "submission.py"
    submission.write_text(REFUSED_SOURCE)
    report = folder / "report.json"
    report.write_text(upload_body(board["files"], own_report, source=REFUSED_SOURCE)["report"])
    before = counts(board["db"])
    done = run_cli("upload", "--submission", submission, "--report", report, "--leaderboard", "qr",
                   "--server", board["server"].url, env={"LEADERBOARD_TOKEN": board["tokens"]["alice"]},
                   check=False)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"Error: upload refused: server said 422: {CONTEST_RULE}"]
    assert "Traceback" not in done.stdout + done.stderr
    assert counts(board["db"]) == before


def test_only_admins_create_leaderboards_and_specs_are_checked(board):
    spec_text = board["files"]["spec"].read_text()
    body = {"name": "second", "spec_name": "tiny.yml", "spec_text": spec_text}
    with pytest.raises(ClientError, match="403: user 'alice' is not an admin"):
        board["server"].client(board["tokens"]["alice"]).post("/api/leaderboards", body)
    admin = board["server"].client(board["tokens"]["admin"])
    with pytest.raises(ClientError, match="400: bad spec: .*n: must be positive"):
        admin.post("/api/leaderboards", {**body, "spec_text": spec_text.replace("n: 4", "n: 0")})
    created = admin.post("/api/leaderboards", body)["leaderboard"]
    assert "secret_seed" not in created
    with pytest.raises(ClientError, match="409: leaderboard 'second' already exists"):
        admin.post("/api/leaderboards", body)
    listed = board["server"].client().get("/api/leaderboards")["leaderboards"]
    assert [b["name"] for b in listed] == ["qr", "second"]
    assert all("secret_seed" not in b for b in listed)


def test_fifty_concurrent_uploads_are_all_stored_once(board, own_report):
    def one(i):
        return upload(board, own_report, user="alice" if i % 2 else "bob", source=variant(i))["id"]
    with ThreadPoolExecutor(max_workers=50) as pool:
        ids = list(pool.map(one, range(50)))
    assert len(set(ids)) == 50
    stored = counts(board["db"])
    assert (stored["submissions"], stored["runs"], stored["jobs"]) == (50, 50, 50)


def test_two_workers_racing_for_one_job_exactly_one_gets_it(board, own_report):
    upload(board, own_report)
    admin_token = board["tokens"]["admin"]
    barrier = threading.Barrier(2)
    results = []

    def claim(name):
        client = board["server"].client(admin_token)
        barrier.wait()
        results.append(client.post("/api/jobs/claim", {"host": name})["job"])
    threads = [threading.Thread(target=claim, args=(f"host{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(job is not None for job in results) == 1


def test_workers_need_an_admin_token(board, own_report):
    upload(board, own_report)
    with pytest.raises(ClientError, match="403: user 'alice' is not an admin"):
        board["server"].client(board["tokens"]["alice"]).post("/api/jobs/claim", {})


def test_posted_results_are_checked_against_the_jobs_seed(board, own_report, seeded_report):
    first = upload(board, own_report)["id"]
    second = upload(board, own_report, user="bob")["id"]
    admin = board["server"].client(board["tokens"]["admin"])
    job_a = admin.post("/api/jobs/claim", {"host": "h"})["job"]
    # the worker gets this job's own seed, a keyed hash: never the leaderboard's secret
    assert job_a["seed"] == job_seed_of(job_a["id"]) and job_a["submission"]["id"] == first
    assert "secret_seed" not in job_a and str(SECRET_SEED) not in json.dumps(job_a)
    # a report made with the public seeds is not a verification
    run = admin.post(f"/api/jobs/{job_a['id']}/result",
                     {"lease": job_a["lease"], "report": json.dumps(own_report), "gpu": "cpu"})["run"]
    assert not run["passed"] and run["failure"] == "wrong-seed" and "seed" in run["message"]
    job_b = admin.post("/api/jobs/claim", {"host": "h"})["job"]
    assert job_b["submission"]["id"] == second and job_b["seed"] != job_a["seed"]
    with pytest.raises(ClientError, match="409: job .* not held by this lease"):
        admin.post(f"/api/jobs/{job_b['id']}/result", {"lease": "wrong", "report": None})
    verified = json.loads(upload_body(board["files"], seeded_report(job_b["seed"]))["report"])
    run = admin.post(f"/api/jobs/{job_b['id']}/result",
                     {"lease": job_b["lease"], "report": json.dumps(verified), "gpu": "cpu"})["run"]
    assert run["passed"], run
    ranking = board["server"].client().get("/api/leaderboards/qr/ranking")["ranking"]
    assert [(e["user"], e["submission_id"]) for e in ranking] == [("bob", second)]
    # nothing shown to the public carries a seed
    shown = json.dumps(board["server"].client().get(f"/api/submissions/{second}"))
    assert str(job_b["seed"]) not in shown and '"seed"' not in shown
    assert [c["mean_ns"] for c in json.loads(shown)["submission"]["runs"][-1]["cases"] if c["kind"] == "benchmark"] \
        == [b["stats"]["mean"] for b in verified["benchmarks"]]


def test_restarting_the_server_loses_nothing(board, own_report, seeded_report):
    ids = [upload(board, own_report, source=variant(i))["id"] for i in range(3)]
    admin = board["server"].client(board["tokens"]["admin"])
    job = admin.post("/api/jobs/claim", {"host": "h"})["job"]
    verified = upload_body(board["files"], seeded_report(job["seed"]), source=variant(0))["report"]
    assert admin.post(f"/api/jobs/{job['id']}/result",
                      {"lease": job["lease"], "report": verified, "gpu": "cpu"})["run"]["passed"]
    before = counts(board["db"])
    ranking = board["server"].client().get("/api/leaderboards/qr/ranking")["ranking"]
    board["server"].stop()
    restarted = ServerProcess(board["db"], board["tmp"] / "restarted.log").start()
    board["server"] = restarted              # the fixture stops it
    assert counts(board["db"]) == before
    assert board["server"].client().get("/api/leaderboards/qr/ranking")["ranking"] == ranking
    for i in ids:
        assert board["server"].client().get(f"/api/submissions/{i}")["submission"]["id"] == i
    # the queue carries on where it was: the next two jobs, then none
    admin = restarted.client(board["tokens"]["admin"])
    claimed = [admin.post("/api/jobs/claim", {"host": "h"})["job"] for _ in range(3)]
    assert [j["submission"]["id"] if j else None for j in claimed] == [ids[1], ids[2], None]


def test_a_dead_workers_job_is_given_out_again(tmp_path, board, own_report):
    board["server"].stop()
    short = ThreadServer(board["db"], lease_seconds=1).start()
    try:
        client = short.client(board["tokens"]["alice"])
        client.post("/api/leaderboards/qr/submissions", upload_body(board["files"], own_report))
        admin = short.client(board["tokens"]["admin"])
        first = admin.post("/api/jobs/claim", {"host": "dies"})["job"]
        assert admin.post("/api/jobs/claim", {"host": "other"})["job"] is None
        time.sleep(1.3)
        again = admin.post("/api/jobs/claim", {"host": "other"})["job"]
        assert again["id"] == first["id"] and again["attempt"] == 2
    finally:
        short.stop()


def test_every_error_is_json(board):
    client = board["server"].client()
    with pytest.raises(ClientError, match="404: unknown submission 999"):
        client.get("/api/submissions/999")
    with pytest.raises(ClientError, match="404: no such page or API endpoint"):
        client.get("/api/nothing-here")
    with pytest.raises(ClientError, match="404: unknown leaderboard 'nope'"):
        client.get("/api/leaderboards/nope")


def test_tokens_never_reach_the_server_log(board, own_report):
    board["server"].stop()
    board["server"] = ServerProcess(board["db"], board["tmp"] / "server.log").start()
    upload(board, own_report)
    board["server"].client(board["tokens"]["admin"]).post("/api/jobs/claim", {"host": "h"})
    board["server"].stop()
    log = (board["tmp"] / "server.log").read_text()
    assert "POST /api/leaderboards/qr/submissions" in log      # the access log was on
    assert all(token not in log for token in board["tokens"].values())
