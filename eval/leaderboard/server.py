"""The leaderboard's HTTP server: a JSON API under /api and HTML pages, on FastAPI.

Every error is a 4xx/5xx response whose JSON body is ``{"error": "<what was wrong>"}``.
Uploads and worker calls need ``Authorization: Bearer <token>``; tokens are never logged or shown.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from eval.leaderboard import pages
from eval.leaderboard.auth import bearer_token
from eval.leaderboard.db import Database, DbError, User, parse_deadline
from eval.leaderboard.verify import (MAX_REPORT_BYTES, MAX_SOURCE_BYTES, ReportError, check_report,
                                     public_report, secret_numbers, spec_from_text)
from eval.specs import SpecError

log = logging.getLogger("eval.leaderboard")

MAX_BODY_BYTES = MAX_SOURCE_BYTES * 6 + MAX_REPORT_BYTES * 2   # JSON escaping can grow text
FILE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def create_app(db: Database) -> FastAPI:
    app = FastAPI(title="QR kernel leaderboard", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.db = db

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
        log.error("internal error: %s: %s", type(exc).__name__, exc)
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
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            raise ApiError(413, f"request body of {int(declared)} bytes is over the {MAX_BODY_BYTES} byte limit")
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            raise ApiError(413, f"request body of {len(raw)} bytes is over the {MAX_BODY_BYTES} byte limit")
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError(400, f"request body is not valid JSON: {exc}") from None
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

    @app.post("/api/leaderboards/{name}/submissions", status_code=201)
    async def upload(name: str, request: Request):
        user = await authenticate(request)
        board = await leaderboard_or_404(name)
        body = await json_body(request)
        file_name = field(body, "file_name", str)
        source = field(body, "source", str)
        report_text = field(body, "report", str)
        if not FILE_NAME.match(file_name) or not file_name.endswith(".py"):
            raise ApiError(400, f"file name {file_name[:80]!r}: expected a plain name ending in .py")
        source_bytes = source.encode("utf-8")
        if len(source_bytes) > MAX_SOURCE_BYTES:
            raise ApiError(413, f"source is {len(source_bytes)} bytes, over the {MAX_SOURCE_BYTES} byte limit")
        if len(report_text.encode("utf-8")) > MAX_REPORT_BYTES:
            raise ApiError(413, f"report is {len(report_text.encode('utf-8'))} bytes, "
                                f"over the {MAX_REPORT_BYTES} byte limit")
        if board.deadline is not None and time.time() > board.deadline:
            raise ApiError(403, f"leaderboard {board.name!r} closed at "
                                f"{pages.format_time(board.deadline)}")
        try:
            report = json.loads(report_text)
        except ValueError as exc:
            raise ApiError(400, f"report is not valid JSON: {exc}") from None
        sha = hashlib.sha256(source_bytes).hexdigest()
        try:
            spec = spec_from_text(board.spec_name, board.spec_text)
            score = check_report(report, spec)
            sent = report.get("submission") if isinstance(report.get("submission"), dict) else {}
            if sent.get("sha256") != sha:
                raise ReportError("report: submission sha256 does not match the uploaded source "
                                  "(the report is for another file)")
        except ReportError as exc:
            raise ApiError(422, str(exc)) from None
        submission_id = await run_in_threadpool(
            db.add_submission, user, board, file_name, source, sha, report_text, score)
        return {"submission": {"id": submission_id, "sha256": sha, "self_reported_seconds": score,
                               "status": "queued", "url": f"/submissions/{submission_id}"}}

    # ---- submissions ------------------------------------------------------------------------

    async def public_submission(submission_id: int) -> dict:
        found = await run_in_threadpool(db.submission, submission_id)
        if found is None:
            raise ApiError(404, f"unknown submission {submission_id}")
        board = await run_in_threadpool(db.leaderboard, found["leaderboard"])
        hidden = secret_numbers(spec_from_text(board.spec_name, board.spec_text), board.secret_seed)
        for run in found["runs"]:
            run["report"] = public_report(run["report"], hidden)
            run["message"] = public_report(run["message"], hidden)
        return found

    @app.get("/api/submissions/{submission_id}")
    async def show_submission(submission_id: int):
        return {"submission": await public_submission(submission_id)}

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
            "secret_seed": board.secret_seed, "ranked_timeout": spec.ranked_timeout}}

    @app.post("/api/jobs/{job_id}/result")
    async def post_result(job_id: int, request: Request):
        user = await authenticate(request, admin=True)
        body = await json_body(request)
        lease = field(body, "lease", str)
        gpu = str(body.get("gpu") or "unknown")[:128]
        host = str(body.get("host") or "unknown")[:64]
        job = await run_in_threadpool(db.job_for_lease, job_id, lease)
        if job is None:
            raise ApiError(409, f"job {job_id} is not held by this lease (it ran out, "
                                f"was given to another worker, or is finished)")
        found = await run_in_threadpool(db.submission, job.submission_id)
        board = await run_in_threadpool(db.leaderboard, found["leaderboard"])
        report_text = body.get("report")
        error = str(body.get("error") or "")[:2000]
        score, passed, message = None, False, error or "the worker sent no report"
        if isinstance(report_text, str) and len(report_text.encode("utf-8")) > MAX_REPORT_BYTES:
            raise ApiError(413, f"report is over the {MAX_REPORT_BYTES} byte limit")
        if isinstance(report_text, str):
            try:
                report = json.loads(report_text)
                spec = spec_from_text(board.spec_name, board.spec_text)
                score = check_report(report, spec, expected_seed=board.secret_seed, require_seed=True)
                if (report.get("submission") or {}).get("sha256") != found["sha256"]:
                    raise ReportError("report: submission sha256 does not match the stored source")
                passed, message = True, "verified with the secret seed"
            except ValueError as exc:     # ReportError, bad JSON
                score, passed = None, False
                message = (f"{error}; " if error else "") + str(exc)
        else:
            report_text = "null"
        stored = await run_in_threadpool(lambda: db.finish_job(
            job, runner=f"{user.name}@{host}", gpu=gpu, score_seconds=score, passed=passed,
            message=message, report_text=report_text))
        if not stored:
            raise ApiError(409, f"job {job_id} is not held by this lease any more")
        return {"run": {"submission_id": job.submission_id, "passed": passed, "score_seconds": score,
                        "message": message}}

    # ---- HTML pages -------------------------------------------------------------------------

    @app.get("/", response_class=HTMLResponse)
    async def index_page():
        def gather():
            return [(b, db.ranking(b), db.submissions(b, limit=10)) for b in db.leaderboards()]
        return HTMLResponse(pages.index_page(await run_in_threadpool(gather)))

    @app.get("/leaderboards/{name}", response_class=HTMLResponse)
    async def leaderboard_page(name: str):
        board = await run_in_threadpool(db.leaderboard, name)
        if board is None:
            return HTMLResponse(pages.not_found_page(f"unknown leaderboard {name!r}"), status_code=404)
        ranking = await run_in_threadpool(db.ranking, board)
        recent = await run_in_threadpool(db.submissions, board, 100)
        return HTMLResponse(pages.leaderboard_page(board, ranking, recent))

    @app.get("/submissions/{submission_id}", response_class=HTMLResponse)
    async def submission_page(submission_id: int):
        try:
            found = await public_submission(submission_id)
        except ApiError as exc:
            return HTMLResponse(pages.not_found_page(exc.message), status_code=exc.status)
        return HTMLResponse(pages.submission_page(found))

    return app


def serve(db_url: str, host: str, port: int, *, lease_seconds: float, log_level: str = "info") -> None:
    """Run the server until interrupted (the ``python -m eval serve`` command)."""
    import uvicorn

    db = Database(db_url, lease_seconds=lease_seconds)
    app = create_app(db)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=log_level == "debug")
