"""Limits on what a client can make the server do: body sizes, request rates, response headers.

``BodyLimit`` is ASGI middleware: it reads every request body itself, chunk by chunk, and answers
413 as soon as the body passes the limit of its path (Content-Length declared or not, chunked or
not), so no more than the limit is ever held in memory; the app then reads the buffered body.
``RateLimiter`` is a token bucket per key (the client's address). ``SecurityHeaders`` adds a strict
Content-Security-Policy and its companions to every response.
"""

from __future__ import annotations

import json
import threading
import time

SMALL_BODY_BYTES = 64 << 10      # every request but an upload or a worker's result

CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


async def _send_error(send, status: int, message: str, headers: list | None = None) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """Refuse a request body over its path's limit while it streams in (``limit_for(path)`` bytes)."""

    def __init__(self, app, limit_for):
        self.app, self.limit_for = app, limit_for

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.limit_for(scope["path"])
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            if not declared.isdigit():
                return await _send_error(send, 400, "Content-Length is not a number")
            if int(declared) > limit:
                return await _send_error(send, 413, f"request body of {int(declared)} bytes is over the "
                                                    f"{limit} byte limit of {scope['path']}")
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return await _send_error(send, 413, f"request body is over the {limit} byte limit of "
                                                    f"{scope['path']} (stopped reading at {size} bytes)")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        del chunks
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()
        return await self.app(scope, replay, send)


class RateLimiter:
    """A token bucket per key: ``rate`` requests a second on average, bursts of up to ``burst``."""

    def __init__(self, rate: float, burst: float):
        self.rate, self.burst = float(rate), float(burst)
        self.buckets: dict[str, tuple[float, float]] = {}      # key -> (tokens, last time)
        self.lock = threading.Lock()

    def take(self, key: str) -> float:
        """0 when a request may go ahead now, else how many seconds until it may."""
        now = time.monotonic()
        with self.lock:
            tokens, last = self.buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1:
                self.buckets[key] = (tokens - 1, now)
                wait = 0.0
            else:
                self.buckets[key] = (tokens, now)
                wait = (1 - tokens) / self.rate
            if len(self.buckets) > 100_000:         # forget the idle ones rather than grow for ever
                self.buckets = {k: v for k, v in self.buckets.items() if now - v[1] < 60}
        return wait


class RateLimit:
    """ASGI middleware: 429 with Retry-After for a client address over its rate."""

    def __init__(self, app, limiter: RateLimiter):
        self.app, self.limiter = app, limiter

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            client = (scope.get("client") or ("unknown", 0))[0]
            wait = self.limiter.take(client)
            if wait > 0:
                return await _send_error(send, 429, f"too many requests from {client}: try again in "
                                                    f"{wait:.1f} s", [(b"retry-after", str(int(wait) + 1).encode())])
        return await self.app(scope, receive, send)


class SecurityHeaders:
    """ASGI middleware: the CSP and companion headers on every response."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def with_headers(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)
        return await self.app(scope, receive, with_headers)
