"""Spec files: both formats parse to the right cases; every malformed spec is a clear SpecError, and
through the real CLI it exits 113 before anything runs."""

from __future__ import annotations

import hashlib

import pytest

from conftest import CONTEST, FIXTURES, REPO_ROOT, require_contest, run_eval
from eval.specs import CASE_KINDS, Case, SpecError, load_spec, mix_seed, parse_case_line


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------

def test_yaml_task_file_parses_cases_timeouts_and_hash(tmp_path):
    text = ("ranking_by: geom\ntest_timeout: 12\nbenchmark_timeout: 34.5\nranked_timeout: 56\n"
            "tests:\n  - {batch: 2, n: 8, cond: 1, seed: 7}\n  - {batch: 1, n: 5, cond: 0, seed: 9, case: RankDef}\n"
            "benchmarks:\n  - batch: 3\n    n: 4\n    cond: 2\n    seed: 11\n    case: mixed\n")
    path = write(tmp_path, "t.yml", text)
    spec = load_spec(path)
    assert spec.tests == [Case(2, 8, 1, 7, "dense"), Case(1, 5, 0, 9, "rankdef")]
    assert spec.benchmarks == [Case(3, 4, 2, 11, "mixed")]
    assert (spec.test_timeout, spec.benchmark_timeout, spec.ranked_timeout) == (12.0, 34.5, 56.0)
    assert spec.ranking_by == "geom"
    assert spec.path == str(path)
    assert spec.sha256 == hashlib.sha256(text.encode()).hexdigest()


def test_yaml_defaults_when_timeouts_absent(tmp_path):
    spec = load_spec(write(tmp_path, "t.yaml", "tests: []\nbenchmarks:\n  - {batch: 1, n: 2, cond: 0, seed: 0}\n"))
    assert spec.tests == []
    assert (spec.test_timeout, spec.benchmark_timeout, spec.ranked_timeout) == (240, 480, 900)


def test_plain_cases_file_serves_as_tests_and_benchmarks(tmp_path):
    text = ("batch: 640; n: 512; cond: 2; seed: 1029; case: mixed\n"
            "batch: 20;n:32 ; cond: 1; seed: 53124\n")
    spec = load_spec(write(tmp_path, "cases.txt", text))
    expected = [Case(640, 512, 2, 1029, "mixed"), Case(20, 32, 1, 53124, "dense")]
    assert spec.tests == expected
    assert spec.benchmarks == expected
    # *.spec values are the lines as written, as the contest's eval.py prints them
    assert [c.contest_line() for c in spec.tests] == ["batch: 640; n: 512; cond: 2; seed: 1029; case: mixed",
                                                       "batch: 20;n:32 ; cond: 1; seed: 53124"]


def test_yaml_entries_keep_the_line_the_contests_runner_writes(tmp_path):
    spec = load_spec(write(tmp_path, "t.yml", "tests:\n  - {n: 8, batch: 2, cond: 1, seed: 7, case: Band}\n"
                                              "benchmarks:\n  - {batch: 3, n: 4, cond: 2, seed: 11}\n"))
    assert spec.tests[0].contest_line() == "n: 8; batch: 2; cond: 1; seed: 7; case: Band"
    assert spec.benchmarks[0].contest_line() == "batch: 3; n: 4; cond: 2; seed: 11"
    assert spec.reseeded(5).benchmarks[0].contest_line() == "batch: 3; n: 4; cond: 2; seed: 11"  # seeds unmixed


def test_the_contests_task_file_loads():
    """The contest's own task.yml (with its 'gpus', 'files', 'description' keys) is a spec here."""
    require_contest()
    spec = load_spec(CONTEST / "task.yml")
    ours = load_spec(REPO_ROOT / "specs" / "qr.yml")
    assert spec.tests == ours.tests and spec.benchmarks == ours.benchmarks
    assert (spec.test_timeout, spec.benchmark_timeout, spec.ranked_timeout) == (240, 480, 900)


def test_case_strings_round_trip_through_the_plain_format():
    case = Case(20, 32, 1, 53124, "band")
    assert case.spec_str() == "batch: 20; n: 32; cond: 1; seed: 53124; case: band"
    assert parse_case_line(case.spec_str(), "x") == case
    assert case.as_dict() == {"batch": 20, "n": 32, "cond": 1, "seed": 53124, "case": "band"}
    assert case.with_seed(5) == Case(20, 32, 1, 5, "band")


def test_contest_spec_holds_the_contest_lists():
    spec = load_spec(REPO_ROOT / "specs" / "qr.yml")
    assert len(spec.tests) == 22 and len(spec.benchmarks) == 12
    assert spec.tests[0] == Case(20, 32, 1, 53124, "dense")
    assert spec.tests[-1] == Case(2, 2048, 2, 224468, "mixed")
    assert spec.benchmarks[3] == Case(640, 512, 2, 1029, "dense")
    assert spec.benchmarks[-1] == Case(60, 1024, 0, 770005, "nearrank")
    assert (spec.test_timeout, spec.benchmark_timeout, spec.ranked_timeout) == (240, 480, 900)


def test_cpu_spec_is_small_and_covers_every_case_kind():
    spec = load_spec(REPO_ROOT / "specs" / "cpu.yml")
    cases = spec.tests + spec.benchmarks
    assert max(c.n for c in cases) <= 96
    assert {c.case for c in spec.tests} == set(CASE_KINDS)
    assert any(c.n % 2 == 1 for c in spec.tests)
    assert any(c.n & (c.n - 1) for c in spec.tests)  # not a power of two
    assert any(c.batch == 1 for c in spec.tests)
    assert spec.benchmarks


def test_mix_seed_matches_the_contest_formula():
    assert mix_seed(0, 0) == 0
    assert mix_seed(1029, 0) == 1029 + 1029 * 1030 // 2
    assert mix_seed(5, 3) == 5 + 8 * 9 // 2
    assert mix_seed(53124, 42) == 53124 + (53124 + 42) * (53124 + 43) // 2


def test_reseeded_spec_mixes_every_seed(tmp_path):
    spec = load_spec(write(tmp_path, "c.txt", "batch: 1; n: 2; cond: 0; seed: 10\nbatch: 1; n: 3; cond: 0; seed: 20\n"))
    mixed = spec.reseeded(7)
    assert [c.seed for c in mixed.tests] == [mix_seed(10, 7), mix_seed(20, 7)]
    assert [c.seed for c in mixed.benchmarks] == [mix_seed(10, 7), mix_seed(20, 7)]
    assert [c.n for c in mixed.tests] == [2, 3]


# --------------------------------------------------------------------------------------------
# Errors: (file name, text, fragments the one-line message must contain)
# --------------------------------------------------------------------------------------------

GOOD = "{batch: 2, n: 8, cond: 1, seed: 7}"
BAD_SPECS = [
    ("unknown_key.yml", f"tests:\n  - {GOOD}\n  - {{batch: 2, n: 8, cond: 1, seed: 7, size: 3}}\nbenchmarks: []\n",
     [":3", "tests[1]", "size", "unknown key"]),
    ("unknown_case.yml", f"tests: []\nbenchmarks:\n  - {GOOD}\n  - {{batch: 2, n: 8, cond: 1, seed: 7, case: sparse}}\n",
     [":4", "benchmarks[1]", "case", "sparse"]),
    ("missing.yml", "tests:\n  - {batch: 2, n: 8, seed: 7}\nbenchmarks: []\n", [":2", "tests[0]", "cond", "missing"]),
    ("float.yml", "tests:\n  - {batch: 2, n: 8.5, cond: 1, seed: 7}\nbenchmarks: []\n", ["tests[0]", "n:", "integer"]),
    ("text.yml", "tests:\n  - {batch: two, n: 8, cond: 1, seed: 7}\nbenchmarks: []\n", ["tests[0]", "batch", "integer"]),
    ("zero_n.yml", "tests:\n  - {batch: 2, n: 0, cond: 1, seed: 7}\nbenchmarks: []\n", ["tests[0]", "n:", "positive"]),
    ("neg_batch.yml", "tests:\n  - {batch: -1, n: 8, cond: 1, seed: 7}\nbenchmarks: []\n", ["tests[0]", "batch", "positive"]),
    ("neg_cond.yml", "tests:\n  - {batch: 1, n: 8, cond: -2, seed: 7}\nbenchmarks: []\n", ["tests[0]", "cond", "non-negative"]),
    ("top_key.yml", "tests: []\nbenchmarks: []\nwarmup: 3\n", ["warmup", "unknown key"]),
    ("no_benchmarks.yml", "tests: []\n", ["benchmarks", "missing"]),
    ("timeout.yml", "tests: []\nbenchmarks: []\ntest_timeout: soon\n", ["test_timeout", "seconds"]),
    ("syntax.yml", "tests: [\n", ["not valid YAML"]),
    ("plain_unknown.txt", "batch: 1; n: 4; cond: 0; seed: 1\nbatch: 1; n: 4; cond: 0; seed: 1; colour: red\n",
     [":2", "colour", "unknown key"]),
    ("plain_missing.txt", "batch: 1; n: 4; cond: 0\n", [":1", "seed", "missing"]),
    ("plain_value.txt", "batch: 1; n: four; cond: 0; seed: 2\n", [":1", "n:", "integer"]),
    ("plain_case.txt", "batch: 1; n: 4; cond: 0; seed: 2; case: wiggly\n", [":1", "case", "wiggly"]),
    ("plain_form.txt", "batch 1; n: 4; cond: 0; seed: 2\n", [":1", "key: value"]),
    # The contest's eval.py exits 113 on each of these too (tests/test_parity.py runs it on them).
    ("plain_blank.txt", "batch: 1; n: 4; cond: 0; seed: 2\n\nbatch: 1; n: 4; cond: 0; seed: 3\n", [":2", "blank line"]),
    ("plain_comment.txt", "# cases\nbatch: 1; n: 4; cond: 0; seed: 2\n", [":1", "comment line"]),
    ("plain_trailing.txt", "batch: 1; n: 4; cond: 0; seed: 2;\n", [":1", "empty part"]),
    ("empty.txt", "", ["no cases"]),
]


@pytest.mark.parametrize("name,text,fragments", BAD_SPECS, ids=[b[0] for b in BAD_SPECS])
def test_bad_spec_raises_spec_error_naming_file_entry_and_field(tmp_path, name, text, fragments):
    path = write(tmp_path, name, text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_missing_spec_file_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError, match="cannot read spec file"):
        load_spec(tmp_path / "nope.yml")


@pytest.mark.parametrize("name,text,fragments", BAD_SPECS[:6] + BAD_SPECS[12:14],
                         ids=[b[0] for b in BAD_SPECS[:6] + BAD_SPECS[12:14]])
def test_bad_spec_exits_113_through_the_cli_and_runs_nothing(tmp_path, name, text, fragments):
    path = write(tmp_path, name, text)
    report = tmp_path / "report.json"
    done = run_eval("test", "--submission", FIXTURES / "cli_geqrf.py", "--specs", path, "--json", report,
                    timeout=60)
    assert done.returncode == 113, done.stderr
    assert "Traceback" not in done.stderr
    line = done.stderr.strip()
    assert line.startswith("bad spec:") and str(path) in line, line
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    assert not report.exists()


def test_bad_cases_file_exits_113_in_positional_form(tmp_path):
    path = write(tmp_path, "cases.txt", "batch: 0; n: 4; cond: 0; seed: 1\n")
    done = run_eval("benchmark", path, "--submission", FIXTURES / "cli_geqrf.py", timeout=60)
    assert done.returncode == 113
    assert f"{path}:1: batch: must be positive, got 0" in done.stderr


def test_a_mode_with_nothing_to_run_exits_113(tmp_path):
    path = write(tmp_path, "no_tests.yml", "tests: []\nbenchmarks:\n  - {batch: 1, n: 4, cond: 0, seed: 1}\n")
    done = run_eval("test", "--submission", FIXTURES / "cli_geqrf.py", "--specs", path, timeout=60)
    assert done.returncode == 113
    assert done.stderr.strip() == f"bad spec: {path}: tests: test mode needs at least one case"
