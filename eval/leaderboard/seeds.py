"""The seeds a worker runs a job with: a keyed hash per job, never the leaderboard's own secret.

The evaluator mixes its seed S into every case seed with the contest's pairing function
(``s + (s+S)(s+S+1)//2``), which anyone can invert from one published case seed. So S is never a
long-lived secret: each job attempt gets ``job_seed(key, job, attempt)``, an HMAC-SHA256 of the job
under the leaderboard's 256-bit key. A seed that leaks (printed by the submission, or inverted from
a case seed) tells nothing about the key, nor about any other job's inputs. Only the server holds the
key; a worker is sent the job's seed alone.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

# Job seeds lie in [2^30, 2^31): every one has 10 digits (so a message scrubber that hides long
# digit runs always hides it), and a mixed case seed (about S^2/2) stays below torch's 2^63.
SEED_LOW, SEED_SPAN = 1 << 30, 1 << 30


def new_seed_key() -> str:
    """A fresh random key (256 bits, hex)."""
    return secrets.token_hex(32)


def seed_key_from_number(secret_seed: int) -> str:
    """A key made from an organiser's chosen number (``--secret-seed``): reproducible job seeds, but
    only as unguessable as the number is. Without one the key is random."""
    return hashlib.sha256(f"qr-leaderboard seed key {int(secret_seed)}".encode()).hexdigest()


def job_seed(seed_key: str, job_id: int, attempt: int) -> int:
    """The seed of one attempt at one job."""
    digest = hmac.new(bytes.fromhex(seed_key), f"job {int(job_id)} attempt {int(attempt)}".encode(),
                      hashlib.sha256).digest()
    return SEED_LOW + int.from_bytes(digest[:8], "big") % SEED_SPAN
