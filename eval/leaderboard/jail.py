"""Running the evaluator on a submission out of the worker's reach.

The worker holds an admin token and the server's trust; the submission is hostile code. So the
evaluator (and with it the submission's child) starts:

- with a minimal, explicit environment (``runner_env``): no token, no variable of the worker's,
  only the job's seed in ``POPCORN_SEED`` (which the evaluator removes before its child starts);
- in new PID and mount namespaces (``unshare``; a user namespace too when the worker is not root):
  the worker and every other process of the machine are invisible to it, so it can neither signal
  them nor read their ``/proc/PID/environ``; the evaluator is PID 1 there, so when it ends the
  kernel kills whatever the submission left running;
- with every mount read-only except its own scratch folder and a fresh ``/dev/shm``, so it can
  change nothing the next job would see (the evaluator's sources, the Python install, caches);
- with no capabilities and no way to gain any (``setpriv``), in a session of its own, killed
  with the worker (parent-death signal on ``unshare``, whose ``--kill-child`` passes it on).

Measured here (as root, util-linux 2.38): all of the above works; a separate Unix user cannot even
start this machine's Python (it lives under /root, mode 0700), so no user switch is attempted.
Where namespaces are not available, ``isolation="session"`` keeps the minimal environment, the new
session and the parent-death signal, and the worker makes itself non-dumpable, but a submission of
the same user can then still signal the worker (the attempt cap bounds the damage).

``python -m eval.leaderboard.jail WORK -- ARGV...`` is the step that runs inside the namespaces,
as their root, before dropping every capability and executing ARGV.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from eval.prctl import die_with_parent

PROJECT_ROOT = Path(__file__).resolve().parents[2]   # where `python -m eval` and reference.py live

# Passed on from the worker's environment when set: what a GPU host may need to find its devices
# and libraries. Nothing else of the worker's environment reaches the evaluator.
PASSED_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
              "LD_LIBRARY_PATH", "CUDA_HOME", "TRITON_PTXAS_PATH")
ISOLATIONS = ("namespaces", "session")

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT, _MS_NOATIME, _MS_NODIRATIME, _MS_BIND = \
    1, 2, 4, 8, 32, 1024, 2048, 4096
_MS_RELATIME, _MS_STRICTATIME = 1 << 21, 1 << 24
_MOUNT_FLAGS = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC, "noatime": _MS_NOATIME,
                "nodiratime": _MS_NODIRATIME, "relatime": _MS_RELATIME, "strictatime": _MS_STRICTATIME}
_KEEP_WRITABLE = ("/proc", "/dev", "/dev/pts", "/dev/shm", "/dev/mqueue")


class JailError(RuntimeError):
    """The isolation asked for cannot be set up here; the message says why."""


def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def runner_env(home: Path, seed: int) -> dict[str, str]:
    """The evaluator's whole environment."""
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env.update({"HOME": str(home), "TMPDIR": str(home), "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONNOUSERSITE": "1", "POPCORN_SEED": str(int(seed))})
    return env


def _unshare_prefix() -> list[str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        raise JailError("unshare (util-linux) is not installed")
    prefix = [unshare, "--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--propagation", "private"]
    if os.geteuid() != 0:
        prefix += ["--user", "--map-root-user"]
    return prefix


def command(argv: list[str], work: Path, isolation: str) -> list[str]:
    """The full command line that runs ``argv`` isolated, with ``work`` its only writable folder."""
    if isolation == "session":
        return list(argv)
    if shutil.which("setpriv") is None:
        raise JailError("setpriv (util-linux) is not installed")
    return [*_unshare_prefix(), "--", sys.executable, "-m", "eval.leaderboard.jail", str(work), "--", *argv]


def check(isolation: str) -> None:
    """Raise JailError unless ``isolation`` works on this machine (a real trial run)."""
    if isolation not in ISOLATIONS:
        raise JailError(f"unknown isolation {isolation!r}; expected one of {', '.join(ISOLATIONS)}")
    if isolation == "session":
        return
    probe = "import os; assert os.getpid() == 1 and not os.access('/', os.W_OK), 'not isolated'"
    with tempfile.TemporaryDirectory(prefix="lb-jail-probe-") as work:
        done = subprocess.run(command([sys.executable, "-c", probe], Path(work), isolation), cwd=PROJECT_ROOT,
                              capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise JailError("namespaces are not available here (unshare --pid --mount failed: "
                        f"{(done.stderr.strip().splitlines() or ['no message'])[-1]}); "
                        "run the worker with --isolation session, which is weaker")


def start(argv: list[str], *, env: dict, cwd: Path, work: Path, isolation: str, pass_fds=()) -> subprocess.Popen:
    """Start ``argv`` isolated; stdout and stderr are pipes."""
    return subprocess.Popen(command(argv, work, isolation), env=env, cwd=cwd, pass_fds=pass_fds,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=die_with_parent)


def running(process: subprocess.Popen) -> bool:
    """Whether the run's first process is still running; it is not reaped, so its PID (the
    session's process group) cannot be reused before ``stop``."""
    return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None


def stop(process: subprocess.Popen) -> None:
    """Kill what is left of a run: its session's process group (and so, through unshare's
    --kill-child, the namespace's PID 1, whose death ends every process in the namespace)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


# --------------------------------------------------------------------------------------------
# Inside the namespaces
# --------------------------------------------------------------------------------------------

def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    result = _libc().mount(source.encode(), target.encode(), fstype.encode() if fstype else None,
                           ctypes.c_ulong(flags), data.encode() if data else None)
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target}: {os.strerror(errno)}")


def _mounts() -> list[tuple[str, set[str]]]:
    """(mount point, per-mount options) of this mount namespace, in mount order."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point = fields[4].encode().decode("unicode_escape").encode("latin-1").decode()
        out.append((point, set(fields[5].split(","))))
    return out


def _read_only_except(work: str) -> None:
    _mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=1777")   # empty, this run's own
    _mount(work, work, None, _MS_BIND)                                       # its own mount: stays rw
    for point, options in _mounts():
        if point == work or point.startswith("/proc/") or point in _KEEP_WRITABLE or "ro" in options:
            continue
        flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY
        for option in options:
            flags |= _MOUNT_FLAGS.get(option, 0)
        try:
            _mount("none", point, None, flags)
        except OSError:
            if point == "/":
                raise                   # the root must be read-only; a locked submount may refuse


def main(args: list[str]) -> None:
    work, separator, *argv = args
    if separator != "--" or not argv:
        raise SystemExit("usage: python -m eval.leaderboard.jail WORK -- ARGV...")
    if os.getpid() != 1:
        raise SystemExit("eval.leaderboard.jail: not the first process of a new PID namespace")
    _read_only_except(os.path.realpath(work))
    setpriv = shutil.which("setpriv")
    os.execv(setpriv, [setpriv, "--no-new-privs", "--bounding-set=-all", "--inh-caps=-all", "--", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
