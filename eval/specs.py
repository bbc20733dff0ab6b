"""Spec files: which cases a run tests and benchmarks, and its timeouts.

Two formats are accepted:

* a YAML task file (``.yml`` / ``.yaml``) with ``tests:`` and ``benchmarks:`` lists of
  ``{batch, n, cond, seed, case?}`` mappings, plus ``ranking_by``, ``test_timeout``,
  ``benchmark_timeout`` and ``ranked_timeout`` (seconds);
* the contest's plain cases file: one case a line, ``key: value`` pairs separated by ``;``
  (``batch: 640; n: 512; cond: 2; seed: 1029; case: mixed``).  It has no test/benchmark split:
  the same list serves whichever mode runs.  As in the contest's eval.py, every line must be a
  case: a blank line or a comment is an error.

Each case keeps its line as the contest would print it in ``*.spec`` (``Case.line``): the file's
own line, or for a YAML entry the line the contest's runner writes for it (``key: value`` joined
by ``; ``, in the entry's order).

Anything malformed raises ``SpecError`` with a one-line message naming the file, the line or
entry, and the field.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

CASE_KINDS = ("dense", "upper", "diagonal", "rankdef", "nearrank", "clustered", "band",
              "nearcollinear", "rowscale", "mixed")
CASE_FIELDS = ("batch", "n", "cond", "seed", "case")
REQUIRED_CASE_FIELDS = ("batch", "n", "cond", "seed")
RANKINGS = ("geom",)
TIMEOUT_FIELDS = ("test_timeout", "benchmark_timeout", "ranked_timeout")
# Keys of the contest's task files that describe the task rather than the run; accepted, ignored.
IGNORED_TASK_KEYS = ("files", "lang", "description", "config", "templates", "gpus")
YAML_SUFFIXES = (".yml", ".yaml")


class SpecError(ValueError):
    """A spec file that cannot be used; the message is one line: ``file:line/entry: field: problem``."""


@dataclass(frozen=True)
class Case:
    batch: int
    n: int
    cond: int
    seed: int
    case: str = "dense"
    line: str | None = field(default=None, compare=False)  # as the contest prints it; see the module doc

    def spec_str(self) -> str:
        return (f"batch: {self.batch}; n: {self.n}; cond: {self.cond}; seed: {self.seed}; "
                f"case: {self.case}")

    def contest_line(self) -> str:
        """The ``*.spec`` value the contest's eval.py writes: the case's line as given (seeds unmixed)."""
        return self.line if self.line is not None else self.spec_str()

    def as_dict(self) -> dict:
        return {"batch": self.batch, "n": self.n, "cond": self.cond, "seed": self.seed,
                "case": self.case}

    def with_seed(self, seed: int) -> "Case":
        return dataclasses.replace(self, seed=seed)


@dataclass(frozen=True)
class Spec:
    path: str
    sha256: str
    tests: list[Case]
    benchmarks: list[Case]
    ranking_by: str = "geom"
    test_timeout: float = 240
    benchmark_timeout: float = 480
    ranked_timeout: float = 900
    cases_file: bool = False  # a plain cases file (the contest's eval.py input), not a task file

    def reseeded(self, seed: int) -> "Spec":
        """The same spec with every case seed ``s`` replaced by ``mix_seed(s, seed)``."""
        return dataclasses.replace(
            self,
            tests=[c.with_seed(mix_seed(c.seed, seed)) for c in self.tests],
            benchmarks=[c.with_seed(mix_seed(c.seed, seed)) for c in self.benchmarks])


def mix_seed(s: int, S: int) -> int:
    """The contest's seed mixing: ``s + (s+S)(s+S+1)//2``."""
    return s + (s + S) * (s + S + 1) // 2


# --------------------------------------------------------------------------------------------
# Field validation (shared by both formats)
# --------------------------------------------------------------------------------------------

def _as_int(value, where: str, field: str) -> int:
    """``value`` as an int; YAML ints or decimal strings (the plain format) are accepted."""
    if isinstance(value, bool):
        raise SpecError(f"{where}: {field}: expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text, 10)
        except ValueError:
            pass
    raise SpecError(f"{where}: {field}: expected an integer, got {value!r}")


def make_case(fields: dict, where: str, line: str | None = None) -> Case:
    """Validate one case's fields (already split into key → value) and build the ``Case``."""
    for key in fields:
        if key not in CASE_FIELDS:
            raise SpecError(f"{where}: {key}: unknown key (expected {', '.join(CASE_FIELDS)})")
    for key in REQUIRED_CASE_FIELDS:
        if key not in fields:
            raise SpecError(f"{where}: {key}: missing field")
    batch = _as_int(fields["batch"], where, "batch")
    n = _as_int(fields["n"], where, "n")
    cond = _as_int(fields["cond"], where, "cond")
    seed = _as_int(fields["seed"], where, "seed")
    if batch <= 0:
        raise SpecError(f"{where}: batch: must be positive, got {batch}")
    if n <= 0:
        raise SpecError(f"{where}: n: must be positive, got {n}")
    if cond < 0:
        raise SpecError(f"{where}: cond: must be non-negative, got {cond}")
    if seed < 0:
        raise SpecError(f"{where}: seed: must be non-negative, got {seed}")
    kind = fields.get("case", "dense")
    if not isinstance(kind, str) or kind.strip().lower() not in CASE_KINDS:
        raise SpecError(f"{where}: case: unknown case {kind!r} (expected one of {', '.join(CASE_KINDS)})")
    return Case(batch=batch, n=n, cond=cond, seed=seed, case=kind.strip().lower(), line=line)


# --------------------------------------------------------------------------------------------
# The plain cases file
# --------------------------------------------------------------------------------------------

# One ``key: value`` part of a line, as the contest's eval.py accepts it: a key of letters, a value
# of letters or a signed integer, spaces around either.
_PART = re.compile(r"\s*([a-zA-Z]+):\s*([a-zA-Z]+|[+-]?[0-9]+)\s*")


def parse_case_line(line: str, where: str) -> Case:
    """One line of a plain cases file: ``batch: 20; n: 32; cond: 1; seed: 53124[; case: dense]``."""
    fields: dict[str, str] = {}
    for part in line.split(";"):
        matched = _PART.fullmatch(part)
        if matched is None:
            what = "empty part (a ';' too many?)" if not part.strip() else "expected 'key: value'"
            raise SpecError(f"{where}: {part.strip()!r}: {what}")
        key, value = matched.group(1), matched.group(2)
        if key in fields:
            raise SpecError(f"{where}: {key}: given twice")
        fields[key] = value
    return make_case(fields, where, line=line)


def parse_cases_text(text: str, path: str) -> list[Case]:
    cases = []
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{path}:{number}"
        if not line.strip():
            raise SpecError(f"{where}: blank line (the contest's eval.py exits 113 on it: every line must be a case)")
        if line.lstrip().startswith("#"):
            raise SpecError(f"{where}: comment line (the contest's eval.py exits 113 on it: every line must be a case)")
        cases.append(parse_case_line(line, where))
    if not cases:
        raise SpecError(f"{path}: no cases (expected lines like 'batch: 20; n: 32; cond: 1; seed: 53124')")
    return cases


# --------------------------------------------------------------------------------------------
# The YAML task file
# --------------------------------------------------------------------------------------------

def _entry_lines(root: yaml.Node | None, key: str) -> list[int]:
    """1-based line numbers of the items of the top-level list ``key`` (for error messages)."""
    if not isinstance(root, yaml.MappingNode):
        return []
    for key_node, value_node in root.value:
        if getattr(key_node, "value", None) == key and isinstance(value_node, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value_node.value]
    return []


def _parse_yaml(text: str, path: str) -> dict:
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{path}{line}: not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping with 'tests:' and 'benchmarks:', "
                        f"got {type(data).__name__}")
    known = {"tests", "benchmarks", "ranking_by", *TIMEOUT_FIELDS, *IGNORED_TASK_KEYS}
    for key in data:
        if key not in known:
            raise SpecError(f"{path}: {key}: unknown key (expected tests, benchmarks, ranking_by, "
                            f"{', '.join(TIMEOUT_FIELDS)})")
    settings: dict = {}
    for name in ("tests", "benchmarks"):
        if name not in data:
            raise SpecError(f"{path}: {name}: missing field")
        entries = data[name]
        if not isinstance(entries, list):
            raise SpecError(f"{path}: {name}: expected a list of cases, got {type(entries).__name__}")
        lines = _entry_lines(root, name)
        cases = []
        for index, entry in enumerate(entries):
            line = f":{lines[index]}" if index < len(lines) else ""
            where = f"{path}{line}: {name}[{index}]"
            if not isinstance(entry, dict):
                raise SpecError(f"{where}: expected a mapping of batch, n, cond, seed, case, "
                                f"got {type(entry).__name__}")
            line = "; ".join(f"{k}: {v}" for k, v in entry.items())  # what the contest's runner writes
            cases.append(make_case({str(k): v for k, v in entry.items()}, where, line=line))
        settings[name] = cases
    ranking = data.get("ranking_by", "geom")
    if ranking not in RANKINGS:
        raise SpecError(f"{path}: ranking_by: unknown ranking {ranking!r} (expected {', '.join(RANKINGS)})")
    settings["ranking_by"] = ranking
    for name in TIMEOUT_FIELDS:
        if name in data:
            value = data[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise SpecError(f"{path}: {name}: expected a positive number of seconds, got {value!r}")
            settings[name] = float(value)
    return settings


def _looks_like_yaml(path: Path, text: str) -> bool:
    if path.suffix.lower() in YAML_SUFFIXES:
        return True
    return any(line.startswith(("tests:", "benchmarks:")) for line in text.splitlines())


def load_spec(path) -> Spec:
    """Load and validate a spec file of either format."""
    path = Path(path)
    shown = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SpecError(f"{shown}: cannot read spec file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{shown}: not UTF-8 text") from None
    sha = hashlib.sha256(raw).hexdigest()
    if _looks_like_yaml(path, text):
        settings = _parse_yaml(text, shown)
        return Spec(path=shown, sha256=sha, **settings)
    cases = parse_cases_text(text, shown)
    return Spec(path=shown, sha256=sha, tests=list(cases), benchmarks=list(cases), cases_file=True)
