"""Two Linux process settings (``prctl``) that keep a submission away from the processes around it.

Used by the evaluator's parent (non-dumpable), its child (killed with the parent) and the leaderboard
worker (both). Elsewhere than Linux they do nothing.
"""

from __future__ import annotations

import ctypes
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4


def prctl(option: int, arg: int = 0) -> int:
    """``prctl(option, arg)`` of this process; its return value (-1 on error), 0 off Linux."""
    if not sys.platform.startswith("linux"):
        return 0
    return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)


def make_undumpable() -> None:
    """Processes of the same user without CAP_SYS_PTRACE can no longer read this one's memory or
    /proc/PID/environ, nor open /proc/PID/fd/*."""
    prctl(PR_SET_DUMPABLE, 0)


def die_with_parent() -> None:
    """SIGKILL this process when the thread that started it goes away."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
