"""Bearer tokens: made at random, shown once, stored only as a SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets

TOKEN_PREFIX = "lbt_"


def new_token() -> str:
    """A fresh random token (256 bits); the caller shows it once and stores only its hash."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The stored form of a token. Tokens are long random strings, so a plain hash is enough."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def bearer_token(authorization: str | None) -> str | None:
    """The token in an ``Authorization: Bearer <token>`` header, or None when there is none."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()
