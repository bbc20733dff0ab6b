"""The leaderboard's HTTP server: a JSON API under /api and HTML pages, on FastAPI.

Every error is a 4xx/5xx response whose JSON body is ``{"error": "<what was wrong>"}``.
Uploads and worker calls need ``Authorization: Bearer <token>``; tokens are never logged or shown.
Every request passes ``limits`` first (a rate per client address, a body size per path, read as it
streams); every response carries a strict Content-Security-Policy. What is published of a run is
its public view (``publish``), never a report or a worker's text.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from eval.leaderboard import pages
from eval.leaderboard.auth import bearer_token
from eval.leaderboard.db import Database, DbError, QueueFull, User, parse_deadline
from eval.leaderboard.limits import SMALL_BODY_BYTES, BodyLimit, RateLimit, RateLimiter, SecurityHeaders
from eval.leaderboard.publish import failure_message, first_failed_case, public_cases, scrub
from eval.leaderboard.seeds import job_seed
from eval.leaderboard.verify import (MAX_REPORT_BYTES, MAX_SOURCE_BYTES, ReportError, check_report, parse_json,
                                     spec_from_text)
from eval.specs import SpecError
from eval.upload_rules import upload_refusal

log = logging.getLogger("eval.leaderboard")

MAX_BODY_BYTES = MAX_SOURCE_BYTES * 6 + MAX_REPORT_BYTES * 2   # JSON escaping can grow text
FILE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
BIG_BODY_PATHS = re.compile(r"^/api/(leaderboards/[^/]+/submissions|jobs/\d+/result)$")
WORKER_FAILURES = ("evaluator-exit", "timeout", "no-report", "bad-job")   # what a worker may report


@dataclass
class Limits:
    """The server's limits (``serve`` options)."""
    requests_per_second: float = 20.0      # per client address, on average
    burst: float = 60.0                    # per client address, at once
    max_waiting: int = 3                   # a user's submissions queued or running at once
    page_cache: int = 256                  # rendered submission pages kept


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class PageCache:
    """Rendered pages by key, least recently used dropped first."""

    def __init__(self, size: int):
        self.size, self.pages, self.lock = size, OrderedDict(), threading.Lock()

    def get(self, key):
        with self.lock:
            if key in self.pages:
                self.pages.move_to_end(key)
                return self.pages[key]
        return None

    def put(self, key, page: str) -> None:
        with self.lock:
            self.pages[key] = page
            while len(self.pages) > self.size:
                self.pages.popitem(last=False)


def body_limit(path: str) -> int:
    return MAX_BODY_BYTES if BIG_BODY_PATHS.match(path) else SMALL_BODY_BYTES


def create_app(db: Database, limits: Limits | None = None):
    """The ASGI app: FastAPI wrapped in the security headers, the rate limit and the body limit."""
    limits = limits or Limits()
    app = FastAPI(title="QR kernel leaderboard", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.db = db
    cache = PageCache(limits.page_cache)

    # ---- errors: always a JSON body with one message -----------------------------------------

    @app.exception_handler(ApiError)
    async def _api_error(_request, exc: ApiError):
        return JSONResponse({"error": exc.message}, status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request, exc: StarletteHTTPException):
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 404 and message == "Not Found":
            message = "no such page or API endpoint"
        return JSONResponse({"error": message}, status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request, exc: RequestValidationError):
        return JSONResponse({"error": f"bad request: {exc.errors()[0].get('msg', 'invalid')}"}, status_code=422)

    @app.exception_handler(Exception)
    async def _internal_error(_request, exc: Exception):
        log.error("internal error: %s", type(exc).__name__)      # never the text: it may quote a body
        return JSONResponse({"error": "internal server error"}, status_code=500)

    # ---- helpers ----------------------------------------------------------------------------

    async def authenticate(request: Request, *, admin: bool = False) -> User:
        token = bearer_token(request.headers.get("authorization"))
        if token is None:
            raise ApiError(401, "missing bearer token (send 'Authorization: Bearer <token>')")
        user = await run_in_threadpool(db.user_for_token, token)
        if user is None:
            raise ApiError(401, "invalid token")
        if admin and not user.is_admin:
            raise ApiError(403, f"user {user.name!r} is not an admin")
        return user

    async def json_body(request: Request) -> dict:
        raw = await request.body()           # already read, within its limit, by BodyLimit
        try:
            body = parse_json(raw.decode("utf-8"), "request body")
        except UnicodeDecodeError:
            raise ApiError(400, "request body is not UTF-8") from None
        except ReportError as exc:
            raise ApiError(400, str(exc)) from None
        if not isinstance(body, dict):
            raise ApiError(400, "request body must be a JSON object")
        return body

    async def leaderboard_or_404(name: str):
        board = await run_in_threadpool(db.leaderboard, name)
        if board is None:
            raise ApiError(404, f"unknown leaderboard {name!r}")
        return board

    def field(body: dict, name: str, kind, *, required: bool = True):
        value = body.get(name)
        if value is None:
            if required:
                raise ApiError(400, f"field {name!r} is missing")
            return None
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            raise ApiError(400, f"field {name!r} must be a {kind.__name__}")
        return value

    # ---- leaderboards -----------------------------------------------------------------------

    @app.get("/api/leaderboards")
    async def list_leaderboards():
        boards = await run_in_threadpool(db.leaderboards)
        return {"leaderboards": [b.public() for b in boards]}

    @app.post("/api/leaderboards", status_code=201)
    async def create_leaderboard(request: Request):
        await authenticate(request, admin=True)
        body = await json_body(request)
        name = field(body, "name", str)
        spec_name = field(body, "spec_name", str)
        spec_text = field(body, "spec_text", str)
        seed = field(body, "secret_seed", int, required=False)
        try:
            deadline = parse_deadline(body.get("deadline"))
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        try:
            spec_from_text(spec_name, spec_text)
        except SpecError as exc:
            raise ApiError(400, f"bad spec: {exc}") from None
        sha = hashlib.sha256(spec_text.encode("utf-8")).hexdigest()
        try:
            board = await run_in_threadpool(lambda: db.create_leaderboard(
                name, spec_name, spec_text, sha, secret_seed=seed, deadline=deadline))
        except DbError as exc:
            raise ApiError(409, str(exc)) from None
        return {"leaderboard": board.public()}

    @app.get("/api/leaderboards/{name}")
    async def show_leaderboard(name: str):
        board = await leaderboard_or_404(name)
        ranking = await run_in_threadpool(db.ranking, board)
        return {"leaderboard": board.public(), "ranking": ranking}

    @app.get("/api/leaderboards/{name}/ranking")
    async def show_ranking(name: str):
        board = await leaderboard_or_404(name)
        return {"ranking": await run_in_threadpool(db.ranking, board)}

    # ---- upload -----------------------------------------------------------------------------

    def check_upload(board, file_name: str, source: str, report_text: str) -> tuple[str, float]:
        """The upload's sha256 and recomputed score, or an ApiError saying what is wrong."""
        if not FILE_NAME.match(file_name) or not file_name.endswith(".py"):
            raise ApiError(400, f"file name {file_name[:80]!r}: expected a plain name ending in .py")
        refusal = upload_refusal(source)       # the contest's own upload rules, before anything else
        if refusal is not None:
            raise ApiError(422, f"{file_name}: {refusal}")
        source_bytes = source.encode("utf-8")
        if len(source_bytes) > MAX_SOURCE_BYTES:
            raise ApiError(413, f"source is {len(source_bytes)} bytes, over the {MAX_SOURCE_BYTES} byte limit")
        if len(report_text.encode("utf-8")) > MAX_REPORT_BYTES:
            raise ApiError(413, f"report is {len(report_text.encode('utf-8'))} bytes, "
                                f"over the {MAX_REPORT_BYTES} byte limit")
        if board.deadline is not None and time.time() > board.deadline:
            raise ApiError(403, f"leaderboard {board.name!r} closed at {pages.format_time(board.deadline)}")
        try:
            report = parse_json(report_text, "report")
        except ReportError as exc:
            raise ApiError(400, str(exc)) from None
        sha = hashlib.sha256(source_bytes).hexdigest()
        try:
            score = check_report(report, spec_from_text(board.spec_name, board.spec_text))
            sent = report.get("submission") if isinstance(report.get("submission"), dict) else {}
            if sent.get("sha256") != sha:
                raise ReportError("report: submission sha256 does not match the uploaded source "
                                  "(the report is for another file)")
        except ReportError as exc:
            raise ApiError(422, str(exc)) from None
        return sha, score

    @app.post("/api/leaderboards/{name}/submissions", status_code=201)
    async def upload(name: str, request: Request):
        user = await authenticate(request)
        board = await leaderboard_or_404(name)
        body = await json_body(request)
        file_name, source = field(body, "file_name", str), field(body, "source", str)
        report_text = field(body, "report", str)
        sha, score = await run_in_threadpool(check_upload, board, file_name, source, report_text)
        try:
            submission_id, created = await run_in_threadpool(lambda: db.add_submission(
                user, board, file_name, source, sha, report_text, score, max_waiting=limits.max_waiting))
        except QueueFull as exc:
            raise ApiError(429, str(exc)) from None
        answer = {"submission": {"id": submission_id, "sha256": sha, "self_reported_seconds": score,
                                 "status": "queued" if created else "already uploaded",
                                 "url": f"/submissions/{submission_id}"}}
        return JSONResponse(answer, status_code=201 if created else 200)

    # ---- submissions ------------------------------------------------------------------------

    async def found_submission(submission_id: int) -> dict:
        found = await run_in_threadpool(db.submission, submission_id)
        if found is None:
            raise ApiError(404, f"unknown submission {submission_id}")
        return found

    @app.get("/api/submissions/{submission_id}")
    async def show_submission(submission_id: int):
        return {"submission": await found_submission(submission_id)}

    # ---- jobs (workers, admin tokens) ---------------------------------------------------------

    @app.post("/api/jobs/claim")
    async def claim(request: Request):
        user = await authenticate(request, admin=True)
        body = await json_body(request)
        worker = f"{user.name}@{str(body.get('host') or 'unknown')[:64]}"
        job = await run_in_threadpool(db.claim_job, worker)
        if job is None:
            return {"job": None}
        found = await run_in_threadpool(db.submission, job.submission_id)
        board = await run_in_threadpool(db.leaderboard, found["leaderboard"])
        spec = spec_from_text(board.spec_name, board.spec_text)
        return {"job": {
            "id": job.id, "lease": job.lease, "attempt": job.attempts, "lease_seconds": db.lease_seconds,
            "submission": {"id": found["id"], "file_name": found["file_name"], "source": found["source"],
                           "sha256": found["sha256"], "user": found["user"]},
            "leaderboard": board.name,
            "spec": {"name": board.spec_name, "text": board.spec_text, "sha256": board.spec_sha256},
            "seed": job_seed(board.seed_key, job.id, job.attempts), "ranked_timeout": spec.ranked_timeout}}

    @app.post("/api/jobs/{job_id}/heartbeat")
    async def heartbeat(job_id: int, request: Request):
        await authenticate(request, admin=True)
        lease = field(await json_body(request), "lease", str)
        if not await run_in_threadpool(db.heartbeat, job_id, lease):
            raise ApiError(409, f"job {job_id} is not held by this lease (it ran out, was given to "
                                f"another worker, or is finished)")
        return {"lease_seconds": db.lease_seconds}

    def judge(job, board, found, report_text, failure: str | None, exit_code) -> dict:
        """A worker's result as the server publishes it: score, verdict, failure class, message."""
        def failed(failure_class: str, detail: str = "", public: list | None = None) -> dict:
            return {"score": None, "passed": False, "failure": failure_class,
                    "message": failure_message(failure_class, detail), "public": public or []}

        if not isinstance(report_text, str):
            return failed(failure or "no-report", _exit_detail(exit_code))
        try:
            report = parse_json(report_text, "the verified report")
        except ReportError as exc:
            return failed("report-invalid", str(exc))
        public = public_cases(report)
        failed_case = first_failed_case(report)
        if failed_case is not None:
            return failed("case-failed", failed_case, public)
        seed = job_seed(board.seed_key, job.id, job.attempts)
        if not isinstance(report, dict) or report.get("seed") != seed:
            return failed("wrong-seed", public=public)
        try:
            score = check_report(report, spec_from_text(board.spec_name, board.spec_text),
                                 expected_seed=seed, require_seed=True)
            if (report.get("submission") or {}).get("sha256") != found["sha256"]:
                raise ReportError("report: submission sha256 does not match the stored source")
        except ReportError as exc:
            return failed("report-invalid", str(exc), public)
        if failure is not None:
            return failed(failure, _exit_detail(exit_code), public)
        return {"score": score, "passed": True, "failure": None, "message": "verified with a secret seed",
                "public": public}

    @app.post("/api/jobs/{job_id}/result")
    async def post_result(job_id: int, request: Request):
        user = await authenticate(request, admin=True)
        body = await json_body(request)
        lease = field(body, "lease", str)
        gpu = scrub(str(body.get("gpu") or "unknown"), 128)
        host = scrub(str(body.get("host") or "unknown"), 64)
        failure = body.get("failure")
        if failure is not None and failure not in WORKER_FAILURES:
            raise ApiError(400, f"field 'failure' must be null or one of {', '.join(WORKER_FAILURES)}")
        exit_code = body.get("exit_code")
        if exit_code is not None and (isinstance(exit_code, bool) or not isinstance(exit_code, int)):
            raise ApiError(400, "field 'exit_code' must be an integer or null")
        report_text = body.get("report")
        if report_text is not None and not isinstance(report_text, str):
            raise ApiError(400, "field 'report' must be a string (the report's JSON) or null")
        if isinstance(report_text, str) and len(report_text.encode("utf-8")) > MAX_REPORT_BYTES:
            raise ApiError(413, f"report is over the {MAX_REPORT_BYTES} byte limit")
        job = await run_in_threadpool(db.job_for_lease, job_id, lease)
        if job is None:
            raise ApiError(409, f"job {job_id} is not held by this lease (it ran out, "
                                f"was given to another worker, or is finished)")
        found = await run_in_threadpool(db.submission, job.submission_id)
        board = await run_in_threadpool(db.leaderboard, found["leaderboard"])
        verdict = await run_in_threadpool(judge, job, board, found, report_text, failure, exit_code)
        stored = await run_in_threadpool(lambda: db.finish_job(
            job, runner=f"{user.name}@{host}", gpu=gpu, score_seconds=verdict["score"], passed=verdict["passed"],
            failure=verdict["failure"], message=verdict["message"], report_text=report_text or "null",
            public=verdict["public"]))
        if not stored:
            raise ApiError(409, f"job {job_id} is not held by this lease any more")
        return {"run": {"submission_id": job.submission_id, "passed": verdict["passed"],
                        "score_seconds": verdict["score"], "failure": verdict["failure"],
                        "message": verdict["message"]}}

    # ---- HTML pages -------------------------------------------------------------------------

    @app.get("/static/leaderboard.css")
    async def stylesheet():
        return Response(pages.STYLESHEET, media_type="text/css",
                        headers={"cache-control": "public, max-age=3600"})

    @app.get("/", response_class=HTMLResponse)
    async def index_page():
        def render():
            return pages.index_page([(b, db.ranking(b), db.submissions(b, limit=10)) for b in db.leaderboards()])
        return HTMLResponse(await run_in_threadpool(render))

    @app.get("/leaderboards/{name}", response_class=HTMLResponse)
    async def leaderboard_page(name: str):
        def render():
            board = db.leaderboard(name)
            if board is None:
                return None
            return pages.leaderboard_page(board, db.ranking(board), db.submissions(board, 100))
        page = await run_in_threadpool(render)
        if page is None:
            return HTMLResponse(pages.not_found_page(f"unknown leaderboard {name!r}"), status_code=404)
        return HTMLResponse(page)

    @app.get("/submissions/{submission_id}", response_class=HTMLResponse)
    async def submission_page(submission_id: int):
        def render():
            version = db.submission_version(submission_id)
            if version is None:
                return None
            key = (submission_id, version)
            page = cache.get(key)
            if page is None:
                found = db.submission(submission_id)
                page = pages.submission_page(found)
                cache.put(key, page)
            return page
        page = await run_in_threadpool(render)
        if page is None:
            return HTMLResponse(pages.not_found_page(f"unknown submission {submission_id}"), status_code=404)
        return HTMLResponse(page)

    return SecurityHeaders(RateLimit(BodyLimit(app, body_limit),
                                     RateLimiter(limits.requests_per_second, limits.burst)))


def _exit_detail(exit_code) -> str:
    return f"exit code {exit_code}" if isinstance(exit_code, int) and not isinstance(exit_code, bool) else ""


def serve(db_url: str, host: str, port: int, *, lease_seconds: float, max_attempts: int, limits: Limits,
          log_level: str = "info") -> None:
    """Run the server until interrupted (the ``python -m eval serve`` command)."""
    import uvicorn

    db = Database(db_url, lease_seconds=lease_seconds, max_attempts=max_attempts)
    app = create_app(db, limits)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=log_level == "debug")
