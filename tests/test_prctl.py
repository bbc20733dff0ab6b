"""eval.prctl on real processes: a process made undumpable reports so, and a child set to die with its parent
is killed when the parent exits."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux only")


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_undumpable_clears_the_dumpable_flag():
    out = _python("from eval.prctl import PR_GET_DUMPABLE, make_undumpable, prctl\n"
                  "print(prctl(PR_GET_DUMPABLE)); make_undumpable(); print(prctl(PR_GET_DUMPABLE))")
    assert out.split() == ["1", "0"]


def _state(pid: int) -> str | None:
    """The process's state letter, or None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


@pytest.mark.parametrize("die", [True, False])
def test_die_with_parent_kills_the_child_when_its_parent_exits(die):
    # The middle process starts a sleeper (set to die with it, or not), prints its pid and exits at once.
    preexec = "preexec_fn=die_with_parent" if die else "preexec_fn=None"
    out = _python("import subprocess, sys\nfrom eval.prctl import die_with_parent\n"
                  "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], start_new_session=True, "
                  f"stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, {preexec})\nprint(p.pid)")
    pid = int(out)
    try:
        deadline = time.monotonic() + 3  # the kill comes at once; 3 s shows it did not
        while _state(pid) not in (None, "Z") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (_state(pid) in (None, "Z")) == die
    finally:
        if _state(pid) not in (None, "Z"):
            subprocess.run(["kill", "-9", str(pid)], check=False)
