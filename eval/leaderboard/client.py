"""HTTP calls to a leaderboard server, with the standard library only (no server packages needed)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


class ClientError(RuntimeError):
    """A call that failed; the message is the server's own error or why it could not be reached."""


class ApiClient:
    def __init__(self, server: str, token: str | None = None, *, timeout_s: float = 120.0):
        if not server.startswith(("http://", "https://")):
            raise ClientError(f"server {server!r}: expected a URL like http://127.0.0.1:8000")
        self.server = server.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.server + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error") or exc.reason
            except (ValueError, AttributeError):
                message = exc.reason
            raise ClientError(f"server said {exc.code}: {message}") from None
        except urllib.error.URLError as exc:
            raise ClientError(f"cannot reach {self.server}: {exc.reason}") from None
        except (TimeoutError, ConnectionError) as exc:
            raise ClientError(f"cannot reach {self.server}: {exc}") from None

    def get(self, path: str) -> dict:
        return self.call("GET", path)

    def post(self, path: str, body: dict) -> dict:
        return self.call("POST", path, body)
