"""Issue 11's attacks on the leaderboard, each against a real server process on loopback (and, where
the attack goes through the worker, the real worker and evaluator). Each test failed on the code
before the fix; docs/leaderboard-security.md lists attack, defence and test."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from eval.leaderboard.client import ClientError
from eval.specs import load_spec, mix_seed

from .helpers import (GEQRF_SUBMISSION, LOOSE, SECRET_SEED, ServerProcess, counts, job_seed_of, run_cli,
                      seed_board, upload_body, variant)
from .test_end_to_end import chromium


@pytest.fixture
def served(tmp_path, project_files):
    """``served(options, lease_seconds)``: a SQLite file with an admin, alice, bob and leaderboard
    'qr', served by ``python -m eval serve`` with those options. Stopped after the test."""
    started = []

    def start(options=LOOSE, lease_seconds: float = 600) -> dict:
        db = tmp_path / f"lb{len(started)}.db"
        tokens = seed_board(db, project_files["spec"])
        server = ServerProcess(db, tmp_path / f"server{len(started)}.log", lease_seconds, options).start()
        started.append(server)
        return {"server": server, "db": db, "tokens": tokens, "files": project_files}
    yield start
    for server in started:
        server.stop()


def fetch(url: str, data: bytes | None = None, token: str | None = None, method: str | None = None):
    """(status, headers, body text) of one request."""
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read().decode()


def published(server, submission_id: int) -> str:
    """Everything the public can read about a submission: the API answer and the pages."""
    parts = [fetch(f"{server.url}/api/submissions/{submission_id}")[2],
             fetch(f"{server.url}/submissions/{submission_id}")[2],
             fetch(f"{server.url}/")[2], fetch(f"{server.url}/leaderboards/qr")[2],
             fetch(f"{server.url}/api/leaderboards/qr")[2]]
    return "\n".join(parts)


def upload_source(lb, source: str, report: dict, user: str = "alice") -> dict:
    client = lb["server"].client(lb["tokens"][user])
    return client.post("/api/leaderboards/qr/submissions", upload_body(lb["files"], report, source=source))["submission"]


def run_worker(lb, *extra, gpu: str = "test-cpu"):
    return run_cli("worker", "--server", lb["server"].url, "--once", "--gpu", gpu, "--device", "cpu", *extra,
                   env={"LEADERBOARD_TOKEN": lb["tokens"]["admin"]}, timeout=600, check=False)


def secret_numbers(spec_path) -> set[str]:
    """Every number a run's seeds are made of: the leaderboard's secret, the job's seed, the case
    seeds mixed from either, and benchmark input seeds (case seed + 42·i, either numbering)."""
    spec = load_spec(spec_path)
    numbers = set()
    for seed in (SECRET_SEED, job_seed_of(1)):
        numbers.add(str(seed))
        for case in spec.tests + spec.benchmarks:
            mixed = mix_seed(case.seed, seed)
            numbers.update(str(mixed + 42 * i) for i in range(0, 1002))
    return numbers


# --------------------------------------------------------------------------------------------
# 1. The admin token, stolen through the worker's environment
# --------------------------------------------------------------------------------------------

STEAL_TOKEN = r'''
import glob, os, re
found = set(re.findall(r"lbt_[A-Za-z0-9_-]{20,}", repr(dict(os.environ))))
for path in glob.glob("/proc/[0-9]*/environ"):
    try:
        found.update(re.findall(r"lbt_[A-Za-z0-9_-]{20,}", open(path, "rb").read().decode("latin-1")))
    except OSError:
        pass
raise RuntimeError("stolen: " + " ".join(sorted(found)))
'''


def test_attack_1_the_submission_cannot_reach_the_workers_token(served, own_report):
    lb = served()
    upload_source(lb, STEAL_TOKEN, own_report)
    worked = run_worker(lb)
    token = lb["tokens"]["admin"]
    assert token not in published(lb["server"], 1)        # it found no token to put in its message
    assert worked.returncode == 0, worked.stdout + worked.stderr
    assert "job 1: failed" in worked.stdout, worked.stdout
    run = lb["server"].client().get("/api/submissions/1")["submission"]["runs"][-1]
    assert run["secret"] and not run["passed"] and run["failure"] == "case-failed", run
    assert "stolen:" in run["message"]                    # the message is published (scrubbed)
    lb["server"].stop()
    assert token.encode() not in lb["db"].read_bytes()    # nor in the raw report the server keeps


# --------------------------------------------------------------------------------------------
# 2 and 3. Secret-derived seeds in the messages of a failing run
# --------------------------------------------------------------------------------------------

FAIL_LATE = '''
import torch
calls = 0


def custom_kernel(A):
    global calls
    calls += 1
    H, tau = torch.geqrf(A)
    return (H + 1.0 if calls > 2 else H), tau
'''


def test_attack_2_and_3_no_seed_of_a_failing_run_is_published(served, own_report):
    lb = served()
    upload_source(lb, FAIL_LATE, own_report)
    worked = run_worker(lb)
    text = published(lb["server"], 1)
    leaked = [n for n in secret_numbers(lb["files"]["spec"]) if n in text]
    assert not leaked, f"secret-derived numbers published: {leaked[:5]}"
    assert worked.returncode == 0 and "job 1: failed" in worked.stdout, worked.stdout + worked.stderr
    run = lb["server"].client().get("/api/submissions/1")["submission"]["runs"][-1]
    assert run["failure"] == "case-failed" and "benchmark" in run["message"], run
    assert not re.search(r"\d{5,}", run["message"])


# --------------------------------------------------------------------------------------------
# 4. Hiding known secrets in uploaded text answers guesses
# --------------------------------------------------------------------------------------------

def test_attack_4_uploaded_guesses_are_not_answered(served, own_report):
    lb = served()
    spec = load_spec(lb["files"]["spec"])
    right = [SECRET_SEED, job_seed_of(1), mix_seed(spec.benchmarks[0].seed, SECRET_SEED)]
    views = []
    for i, guesses in enumerate((right, [n + 1 for n in right])):
        report = json.loads(json.dumps(own_report))
        text = " ".join(map(str, guesses))
        report["benchmarks"][0]["message"] = f"guesses {text}"
        report["device"]["name"] = f"guesses {text}"[:128]
        sid = upload_source(lb, variant(i), report)["id"]
        shown = lb["server"].client().get(f"/api/submissions/{sid}")["submission"]
        views.append(shown)
    assert "[secret]" not in json.dumps(views)
    # a right guess and a wrong one give the same public view (but for ids, times and the names)
    def blind(view):
        text = json.dumps({k: v for k, v in view.items() if k not in ("id", "created_at", "source", "sha256")})
        return re.sub(r'"(created_at|id)": [0-9.e+-]+|guesses[ 0-9]+', "", text)
    assert blind(views[0]) == blind(views[1])


# --------------------------------------------------------------------------------------------
# 5. Stored XSS through report values; no Content-Security-Policy
# --------------------------------------------------------------------------------------------

PWN = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"


def test_attack_5_report_values_cannot_inject_markup(served, own_report):
    lb = served()
    url = f"{lb['server'].url}/api/leaderboards/qr/submissions"
    report = json.loads(json.dumps(own_report))
    report["benchmarks"][0]["stats"]["runs"] = PWN
    body = json.dumps(upload_body(lb["files"], report)).encode()
    status, _, answer = fetch(url, body, lb["tokens"]["alice"])
    assert status == 422 and "benchmarks[0]: stats.runs must be a whole number" in json.loads(answer)["error"]
    assert counts(lb["db"])["submissions"] == 0
    # what is accepted (a device name is any short string) is escaped, and a script would be refused
    report = json.loads(json.dumps(own_report))
    report["device"]["name"] = PWN
    sid = upload_source(lb, GEQRF_SUBMISSION, report)["id"]
    status, headers, page = fetch(f"{lb['server'].url}/submissions/{sid}")
    assert status == 200 and PWN not in page and "&lt;img src=x onerror=" in page
    csp = headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "unsafe-inline" not in csp
    dom = chromium("--dump-dom", f"{lb['server'].url}/submissions/{sid}")
    assert "data-pwned" not in dom.split("<body", 1)[1].split(">", 1)[0]
    assert "Per-case times" in dom and dom.count('class="bar"') == 2


# --------------------------------------------------------------------------------------------
# 6. A chunked body without Content-Length, read whole before the size check
# --------------------------------------------------------------------------------------------

def peak_rss_mb(pid: int) -> float:
    status = open(f"/proc/{pid}/status").read()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024


def test_attack_6_a_chunked_body_is_refused_as_it_streams(served):
    lb = served()
    pid = lb["server"].process.pid
    before = peak_rss_mb(pid)
    connection = http.client.HTTPConnection("127.0.0.1", lb["server"].port, timeout=60)
    connection.putrequest("POST", "/api/leaderboards/qr/submissions")
    connection.putheader("Authorization", f"Bearer {lb['tokens']['alice']}")
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Transfer-Encoding", "chunked")
    connection.endheaders()
    chunk = b"x" * (1 << 20)
    sent = 0
    try:
        for _ in range(300):                         # 300 MiB, if the server lets it all in
            connection.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
        connection.send(b"0\r\n\r\n")
    except OSError:
        pass                                          # the server answered and closed: expected
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    assert response.status == 413 and "over the" in answer["error"], answer
    grown = peak_rss_mb(pid) - before
    assert grown < 80, f"the server's peak memory grew by {grown:.0f} MB for a {sent >> 20} MiB body"
    assert lb["server"].client().get("/api/leaderboards")["leaderboards"]      # still serving


# --------------------------------------------------------------------------------------------
# 7. A submission kills the worker; the job goes round again for ever; orphans live on
# --------------------------------------------------------------------------------------------

KILL_WORKER = r'''
import os, signal, subprocess, sys, tempfile, time
MARKER = "{marker}"
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) == os.getpid():
        continue
    try:
        cmdline = open(f"/proc/{{pid}}/cmdline", "rb").read()
    except OSError:
        continue
    if MARKER.encode() in cmdline and b"worker" in cmdline:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", MARKER + "-daemon"],
                 start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
flag = os.path.join(tempfile.gettempdir(), MARKER + "-slept")
if not os.path.exists(flag):
    open(flag, "w").close()
    time.sleep(4)          # longer than the lease: only the worker's heartbeat keeps the job
import torch


def custom_kernel(A):
    return torch.geqrf(A)
'''


def marked_processes(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in open(f"/proc/{pid}/cmdline", "rb").read():
                found.append(int(pid))
        except OSError:
            pass
    return found


def test_attack_7_the_submission_cannot_kill_the_worker_nor_outlive_the_run(served, own_report):
    lb = served(lease_seconds=2)
    marker = f"lbmark-{uuid.uuid4().hex[:10]}"
    upload_source(lb, KILL_WORKER.format(marker=marker), own_report)
    try:
        worked = run_worker(lb, gpu=marker)
        assert worked.returncode == 0, f"the worker died ({worked.returncode}): {worked.stdout}{worked.stderr}"
        assert "job 1: passed" in worked.stdout, worked.stdout + worked.stderr
        time.sleep(0.5)
        assert marked_processes(marker + "-daemon") == [], "the submission's daemon outlived the run"
        job = lb["server"].client().get("/api/submissions/1")["submission"]["job"]
        assert job == {"state": "done", "attempts": 1}     # the heartbeat kept it past the 2 s lease
    finally:
        for pid in marked_processes(marker + "-daemon"):   # only if the test failed: our own leftovers
            os.kill(pid, signal.SIGKILL)


def test_attack_7_a_job_whose_workers_keep_dying_fails_after_the_attempt_cap(served, own_report):
    lb = served(options=(*LOOSE, "--max-attempts", "2"), lease_seconds=1)
    upload_source(lb, GEQRF_SUBMISSION, own_report)
    admin = lb["server"].client(lb["tokens"]["admin"])
    for attempt in (1, 2):                        # each worker dies: it never answers
        job = admin.post("/api/jobs/claim", {"host": f"dies-{attempt}"})["job"]
        assert job["attempt"] == attempt
        time.sleep(1.3)
    assert admin.post("/api/jobs/claim", {"host": "next"})["job"] is None
    shown = lb["server"].client().get("/api/submissions/1")["submission"]
    assert shown["job"] == {"state": "failed", "attempts": 2}
    assert shown["runs"][-1]["failure"] == "worker-lost" and not shown["runs"][-1]["passed"]


def test_a_heartbeat_keeps_a_claim_alive_and_a_lost_lease_is_refused(served, own_report):
    lb = served(lease_seconds=1)
    upload_source(lb, GEQRF_SUBMISSION, own_report)
    admin = lb["server"].client(lb["tokens"]["admin"])
    job = admin.post("/api/jobs/claim", {"host": "slow"})["job"]
    for _ in range(8):                            # 2.4 s: more than twice the lease
        time.sleep(0.3)
        admin.post(f"/api/jobs/{job['id']}/heartbeat", {"lease": job["lease"]})
        assert admin.post("/api/jobs/claim", {"host": "other"})["job"] is None
    time.sleep(1.3)                               # no heartbeat: the claim runs out
    with pytest.raises(ClientError, match="409: job 1 is not held by this lease"):
        admin.post(f"/api/jobs/{job['id']}/heartbeat", {"lease": job["lease"]})
    assert admin.post("/api/jobs/claim", {"host": "other"})["job"]["attempt"] == 2


# --------------------------------------------------------------------------------------------
# 8. No rate limit, no fairness, a big report stalls every page
# --------------------------------------------------------------------------------------------

def test_attack_8_one_user_cannot_fill_the_queue_and_users_take_turns(served, own_report):
    lb = served(options=("--max-waiting", "3", "--rate", "1000", "--burst", "1000"))
    statuses = []
    for i in range(10):
        try:
            upload_source(lb, variant(i), own_report)
            statuses.append(201)
        except ClientError as exc:
            statuses.append(int(str(exc).split()[2].rstrip(":")))
            last_error = str(exc)
    assert statuses == [201] * 3 + [429] * 7
    assert "already has 3 submission(s) waiting for verification (the limit is 3)" in last_error
    bob = upload_source(lb, variant(0), own_report, user="bob")["id"]
    admin = lb["server"].client(lb["tokens"]["admin"])
    order = [admin.post("/api/jobs/claim", {"host": "h"})["job"]["submission"]["user"] for _ in range(4)]
    assert order == ["alice", "bob", "alice", "alice"]
    assert bob == 4


def test_attack_8_a_client_address_is_rate_limited(served):
    lb = served(options=("--rate", "5", "--burst", "10"))
    statuses, bodies = [], []
    for _ in range(40):
        status, headers, body = fetch(f"{lb['server'].url}/api/leaderboards")
        statuses.append(status)
        if status == 429:
            bodies.append((headers["Retry-After"], json.loads(body)["error"]))
    assert statuses.count(200) <= 12 and statuses.count(429) >= 28, statuses
    assert bodies[0][0].isdigit() and "too many requests from 127.0.0.1" in bodies[0][1]


def test_attack_8_readers_of_a_big_report_do_not_stall_other_pages(served, own_report):
    lb = served()
    report = json.loads(json.dumps(own_report))
    report["padding"] = "x" * ((4 << 20) - len(json.dumps(report)) - 100)      # just under the 4 MiB limit
    sid = upload_source(lb, GEQRF_SUBMISSION, report)["id"]
    url = lb["server"].url
    status, _, page = fetch(f"{url}/submissions/{sid}")
    assert status == 200 and len(page) < 50_000
    assert len(fetch(f"{url}/api/submissions/{sid}")[2]) < 50_000
    stop = threading.Event()

    def reader(path):
        while not stop.is_set():
            fetch(url + path)
    with ThreadPoolExecutor(max_workers=8) as pool:
        for i in range(8):
            pool.submit(reader, f"/submissions/{sid}" if i % 2 else f"/api/submissions/{sid}")
        latencies = []
        for _ in range(15):
            start = time.monotonic()
            assert fetch(f"{url}/api/leaderboards")[0] == 200
            latencies.append(time.monotonic() - start)
            time.sleep(0.1)
        stop.set()
    assert max(latencies) < 1.0, f"other pages took up to {max(latencies):.2f} s"


# --------------------------------------------------------------------------------------------
# Minor: odd values, NaN, retried uploads, headers
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case, status, message", [
    ("err is text", 422, "benchmarks[0]: stats.err must be a number of ns"),
    ("mean is subnormal", 422, "stats.mean must be a positive number of ns between"),
    ("deep nesting", 400, "report is nested too deeply"),
    ("NaN mean", 400, "report is not valid JSON: NaN is not a number JSON allows"),
])
def test_odd_report_values_are_refused_with_their_own_message(served, own_report, case, status, message):
    lb = served()
    report = json.loads(json.dumps(own_report))
    body = upload_body(lb["files"], report)
    if case == "err is text":
        report["benchmarks"][0]["stats"]["err"] = "x"
        body = upload_body(lb["files"], report)
    elif case == "mean is subnormal":
        report["benchmarks"][0]["stats"]["mean"] = 1e-320
        body = upload_body(lb["files"], report)
    elif case == "deep nesting":
        body["report"] = "[" * 200_000 + "]" * 200_000
    elif case == "NaN mean":
        body["report"] = body["report"].replace(json.dumps(report["benchmarks"][0]["stats"]["mean"]), "NaN", 1)
    got, _, answer = fetch(f"{lb['server'].url}/api/leaderboards/qr/submissions", json.dumps(body).encode(),
                           lb["tokens"]["alice"])
    assert got == status and message in json.loads(answer)["error"], answer
    assert counts(lb["db"])["submissions"] == 0


def test_a_nan_deadline_is_refused(served):
    lb = served()
    body = ('{"name": "nan", "spec_name": "tiny.yml", "spec_text": %s, "deadline": NaN}'
            % json.dumps(lb["files"]["spec"].read_text())).encode()
    status, _, answer = fetch(f"{lb['server'].url}/api/leaderboards", body, lb["tokens"]["admin"])
    assert status == 400 and "NaN is not a number JSON allows" in json.loads(answer)["error"]
    body = body.replace(b"NaN", b"1e300")
    status, _, answer = fetch(f"{lb['server'].url}/api/leaderboards", body, lb["tokens"]["admin"])
    assert status == 400 and "is not a time" in json.loads(answer)["error"]


def test_a_retried_upload_gives_the_same_submission(served, own_report):
    lb = served()
    first = upload_source(lb, GEQRF_SUBMISSION, own_report)
    body = json.dumps(upload_body(lb["files"], own_report)).encode()
    status, _, answer = fetch(f"{lb['server'].url}/api/leaderboards/qr/submissions", body, lb["tokens"]["alice"])
    again = json.loads(answer)["submission"]
    assert first["status"] == "queued" and status == 200 and again["status"] == "already uploaded"
    assert again["id"] == first["id"]
    assert (counts(lb["db"])["submissions"], counts(lb["db"])["jobs"]) == (1, 1)


def test_every_response_carries_the_security_headers(served):
    lb = served()
    for path in ("/", "/leaderboards/qr", "/submissions/9", "/api/leaderboards", "/static/leaderboard.css"):
        _, headers, _ = fetch(lb["server"].url + path)
        assert headers["Content-Security-Policy"].startswith("default-src 'none'"), path
        assert headers["X-Content-Type-Options"] == "nosniff" and headers["X-Frame-Options"] == "DENY"
