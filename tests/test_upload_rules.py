"""The contest server's upload rules (eval.upload_rules): the rule itself, and the evaluator refusing
such a file at the door, through real ``python -m eval`` subprocesses, as the contest's server does."""

from __future__ import annotations

import os

import pytest

from conftest import FIXTURES, REPO_ROOT, clean_env, run_eval
from eval.popcorn import parse_popcorn
from eval.upload_rules import upload_refusal

EXIT_REFUSED = 115
RULE = "refuses any file containing the word 'stream'"

GEQRF = "import torch\n\n\ndef custom_kernel(A):\n    return torch.geqrf(A)\n"
# The only fault of this submission: the word in a comment.
COMMENTED = "import torch\n\n\ndef custom_kernel(A):\n    # no side stream here\n    return torch.geqrf(A)\n"
TINY_SPEC = ("test_timeout: 120\nbenchmark_timeout: 120\ntests:\n  - {batch: 2, n: 8, cond: 1, seed: 3}\n"
             "benchmarks:\n  - {batch: 2, n: 8, cond: 1, seed: 5}\n")


# ---- the rule ------------------------------------------------------------------------------

def test_a_clean_file_passes():
    assert upload_refusal(GEQRF) is None
    assert upload_refusal(GEQRF.encode()) is None
    assert upload_refusal("") is None


@pytest.mark.parametrize("source, line, shown", [
    ("import torch\n# a side stream\n", 2, "# a side stream"),
    ('"""Runs on a stream of its own."""\nimport torch\n', 1, '"""Runs on a stream of its own."""'),
    ("x = 1\n\n    upstream = 2   \n", 3, "upstream = 2"),
    ("import torch\ns = torch.cuda.STREAM\n", 2, "s = torch.cuda.STREAM"),
    ("def f(A):\n    return A  # downStream\n", 2, "return A  # downStream"),
], ids=["comment", "docstring", "upstream", "upper-case", "mixed-case"])
def test_the_word_anywhere_in_any_case_is_refused_naming_the_line(source, line, shown):
    for given in (source, source.encode()):
        refusal = upload_refusal(given)
        assert refusal is not None and RULE in refusal
        assert refusal.endswith(f"found on line {line}: {shown!r}"), refusal


def test_every_line_holding_the_word_is_listed_in_order():
    source = "# stream one\nx = 1\ny = 'Streams'\nz = 2\nw = 3  # UPSTREAM\n"
    refusal = upload_refusal(source)
    assert refusal.endswith("found on line 1: '# stream one'; line 3: \"y = 'Streams'\"; "
                            "line 5: 'w = 3  # UPSTREAM'"), refusal
    assert "\n" not in refusal  # one line, wherever it is shown


def test_a_long_line_is_shown_cut_around_the_word():
    refusal = upload_refusal("x = '" + "a" * 500 + " stream " + "b" * 500 + "'\n")
    shown = refusal.split("found on line 1: ")[1]
    assert "stream" in shown and "…" in shown and len(shown) < 140


@pytest.mark.parametrize("source, line, what", [
    (b"import torch\n# caf\xe9\n", 2, "byte 0xe9"),
    (b"\xff\xfeimport torch\n", 1, "byte 0xff"),
    ("x = 1\ny = '\ud800'\n", 2, "character U+D800"),
], ids=["latin-1", "utf-16-bom", "lone-surrogate"])
def test_text_that_is_not_utf8_is_refused_naming_the_place(source, line, what):
    refusal = upload_refusal(source)
    assert refusal is not None and "reads a file as UTF-8 and refuses one that is not" in refusal
    assert refusal.endswith(f"line {line}: {what} is not valid UTF-8"), refusal


def test_the_repositorys_own_files_pass_the_rule():
    """The entry and the contract are uploaded to the contest as they are: neither may hold the word."""
    for name in ("submission.py", "reference.py"):
        assert upload_refusal((REPO_ROOT / name).read_bytes()) is None, name


# ---- the evaluator refuses such a file before anything runs ----------------------------------

@pytest.fixture
def files(tmp_path):
    (tmp_path / "commented.py").write_text(COMMENTED)
    (tmp_path / "tiny.yml").write_text(TINY_SPEC)
    return tmp_path


@pytest.mark.parametrize("mode", ["test", "benchmark", "leaderboard", "profile"])
def test_every_mode_refuses_the_file_with_one_line_and_scores_nothing(files, mode):
    submission, report = files / "commented.py", files / "r.json"
    trace = ["--trace", files / "trace.json"] if mode == "profile" else []
    done = run_eval(mode, "--submission", submission, "--specs", files / "tiny.yml", "--json", report,
                    "--device", "cpu", *trace, timeout=120)
    assert done.returncode == EXIT_REFUSED, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"refused at upload: {submission}: the contest's upload server {RULE} in any letter case (comments, "
        f"strings and names count too), before running anything; found on line 5: '# no side stream here'"]
    assert done.stdout == ""  # no progress, no table, no score
    assert not report.exists() and not (files / "trace.json").exists()


def test_the_refusal_comes_before_the_spec_is_read(files):
    done = run_eval("test", "--submission", files / "commented.py", "--specs", files / "no_such_spec.yml",
                    timeout=60)
    assert done.returncode == EXIT_REFUSED, done.stderr
    assert "refused at upload" in done.stderr and "bad spec" not in done.stderr


def test_a_file_that_is_not_utf8_is_refused(files):
    submission = files / "latin1.py"
    submission.write_bytes(GEQRF.encode() + b"# caf\xe9\n")
    done = run_eval("test", "--submission", submission, "--specs", files / "tiny.yml", timeout=60)
    assert done.returncode == EXIT_REFUSED, done.stderr
    assert done.stderr.strip() == (f"refused at upload: {submission}: the contest's upload server reads a file "
                                   f"as UTF-8 and refuses one that is not, before running anything; line 6: "
                                   f"byte 0xe9 is not valid UTF-8")


def test_the_protocol_says_the_run_failed(files):
    """With POPCORN_FD, as for any other run that cannot go on: ``check: fail`` and nothing else."""
    read_end, write_end = os.pipe()
    try:
        done = run_eval("test", "--submission", files / "commented.py", "--specs", files / "tiny.yml",
                        env=clean_env(POPCORN_FD=str(write_end)), pass_fds=(write_end,), timeout=60)
    finally:
        os.close(write_end)
    with os.fdopen(read_end, encoding="utf-8") as pipe:
        text = pipe.read()
    assert done.returncode == EXIT_REFUSED, done.stderr
    assert parse_popcorn(text) == {"check": "fail"}


def test_compare_refuses_each_such_file_before_anything_runs(files):
    other = files / "upstream.py"
    other.write_text(GEQRF + "UPSTREAM = None\n")
    done = run_eval("compare", FIXTURES / "cli_geqrf.py", files / "commented.py", other,
                    "--specs", files / "tiny.yml", "--device", "cpu", timeout=60)
    assert done.returncode == EXIT_REFUSED, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"refused at upload: {files / 'commented.py'}: ") and \
        lines[0].endswith("found on line 5: '# no side stream here'")
    assert lines[1].startswith(f"refused at upload: {other}: ") and lines[1].endswith("line 6: 'UPSTREAM = None'")
    assert done.stdout == ""


def test_a_clean_file_still_runs(files):
    clean = files / "clean.py"
    clean.write_text(GEQRF)
    done = run_eval("test", "--submission", clean, "--specs", files / "tiny.yml", "--device", "cpu", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "refused" not in done.stderr
