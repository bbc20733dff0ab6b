"""The contest server's upload rules: what it refuses before any evaluation runs.

The contest's upload server (gpu-mode kernelbot) decodes a submitted file as UTF-8 and refuses it
when ``"stream" in text.lower()``: a plain substring test over the whole file, so a comment, a
docstring, a name or a word like "upstream" is refused as surely as ``torch.cuda.Stream``. Such a
file is never evaluated there. ``upload_refusal`` applies the same two rules, so the evaluator (every
``python -m eval`` mode and ``compare``) and the leaderboard server refuse what the contest would.
"""

from __future__ import annotations

FORBIDDEN_WORD = "stream"
SHOWN_CHARS = 120  # a longer line is shown cut to this many characters around the word


def upload_refusal(source: str | bytes) -> str | None:
    """None when the contest's server would accept ``source`` (a file's bytes, or its text), else one
    line saying which rule refuses it and where: every line holding the word (1-based number and its
    trimmed text), or the first place that is not UTF-8."""
    if isinstance(source, bytes):
        try:
            text = source.decode("utf-8")
        except UnicodeDecodeError as exc:
            return _not_utf8(source.count(b"\n", 0, exc.start) + 1, f"byte 0x{source[exc.start]:02x}")
    else:
        text = source
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate, as JSON's "\ud800" gives
            return _not_utf8(text.count("\n", 0, exc.start) + 1, f"character U+{ord(text[exc.start]):04X}")
    if FORBIDDEN_WORD not in text.lower():  # the contest's own test
        return None
    found = [f"line {number}: {_shown(line)!r}" for number, line in enumerate(text.split("\n"), start=1)
             if FORBIDDEN_WORD in line.lower()]
    return (f"the contest's upload server refuses any file containing the word {FORBIDDEN_WORD!r} in any "
            f"letter case (comments, strings and names count too), before running anything; "
            f"found on {'; '.join(found)}")


def _not_utf8(line: int, what: str) -> str:
    return (f"the contest's upload server reads a file as UTF-8 and refuses one that is not, before running "
            f"anything; line {line}: {what} is not valid UTF-8")


def _shown(line: str) -> str:
    """The line without surrounding white space; a long one cut around the word's first occurrence."""
    line = line.strip()
    if len(line) <= SHOWN_CHARS:
        return line
    start = line.lower().find(FORBIDDEN_WORD) - SHOWN_CHARS // 2
    start = max(0, min(start, len(line) - SHOWN_CHARS))
    end = start + SHOWN_CHARS
    return ("…" if start > 0 else "") + line[start:end] + ("…" if end < len(line) else "")
