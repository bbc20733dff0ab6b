"""The leaderboard's HTML pages: plain HTML, a little CSS, charts as inline SVG, no JavaScript.

Every value from the database or a report goes through ``html.escape``. The reports handed here
have already had their seeds removed (``verify.public_report``).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from html import escape

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.7em; text-align: left; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.note { color: #666; font-size: 0.9em; }
.pass { color: #176117; } .fail { color: #a11; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: 1em; overflow-x: auto; }
"""


def format_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def format_score(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:,.1f} µs"


def format_ns(ns: float | None) -> str:
    if ns is None:
        return "-"
    if ns >= 1e6:
        return f"{ns / 1e6:,.3f} ms"
    return f"{ns / 1e3:,.1f} µs"


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{STYLE}</style></head>\n<body>\n"
            f"<p><a href=\"/\">All leaderboards</a></p>\n{body}\n</body></html>\n")


def not_found_page(message: str) -> str:
    return _page("Not found", f"<h1>Not found</h1><p>{escape(message)}</p>")


def ranking_table(board, ranking: list[dict]) -> str:
    if not ranking:
        return ("<p class=\"note\" id=\"ranking-" + escape(board.name) + "\">No verified entries yet: "
                "a submission is ranked once a worker has re-run it with the secret seed.</p>")
    rows = []
    for entry in ranking:
        rows.append(
            f"<tr><td class=\"num\">{entry['rank']}</td><td>{escape(entry['user'])}</td>"
            f"<td class=\"num\">{format_score(entry['score_seconds'])}</td>"
            f"<td class=\"num\">{format_score(entry['self_reported_seconds'])} <span class=\"note\">"
            f"(self-reported)</span></td>"
            f"<td>{escape(entry['gpu'])}</td>"
            f"<td><a href=\"/submissions/{entry['submission_id']}\">#{entry['submission_id']} "
            f"{escape(entry['file_name'])}</a></td><td>{format_time(entry['submitted_at'])}</td></tr>")
    return (f"<table class=\"ranking\" id=\"ranking-{escape(board.name)}\"><thead><tr><th>Rank</th>"
            "<th>User</th><th>Verified score</th><th>Client's own score</th><th>Verified on</th>"
            "<th>Submission</th><th>Submitted</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def submissions_table(recent: list[dict]) -> str:
    if not recent:
        return "<p class=\"note\">No submissions yet.</p>"
    rows = "".join(
        f"<tr><td><a href=\"/submissions/{s['id']}\">#{s['id']}</a></td><td>{escape(s['user'])}</td>"
        f"<td>{escape(s['file_name'])}</td><td>{escape(s['status'])}</td>"
        f"<td>{format_time(s['created_at'])}</td></tr>" for s in recent)
    return ("<table class=\"submissions\"><thead><tr><th>Submission</th><th>User</th><th>File</th>"
            "<th>Verification</th><th>Submitted</th></tr></thead><tbody>" + rows + "</tbody></table>")


def _board_header(board) -> str:
    deadline = format_time(board.deadline) if board.deadline is not None else "none"
    return (f"<p class=\"note\">Spec {escape(board.spec_name)} (sha256 {escape(board.spec_sha256[:16])}…) · "
            f"deadline {deadline} · score: geometric mean of the benchmark means, lower is better</p>")


def index_page(boards: list[tuple]) -> str:
    parts = ["<h1>QR kernel leaderboards</h1>"]
    if not boards:
        parts.append("<p class=\"note\">No leaderboards yet.</p>")
    for board, ranking, recent in boards:
        parts.append(f"<h2><a href=\"/leaderboards/{escape(board.name)}\">{escape(board.name)}</a></h2>")
        parts.append(_board_header(board))
        parts.append(ranking_table(board, ranking))
        parts.append("<h3>Latest submissions</h3>" + submissions_table(recent))
    return _page("QR kernel leaderboards", "\n".join(parts))


def leaderboard_page(board, ranking: list[dict], recent: list[dict]) -> str:
    body = (f"<h1>Leaderboard {escape(board.name)}</h1>{_board_header(board)}<h2>Ranking</h2>"
            f"{ranking_table(board, ranking)}<h2>Submissions</h2>{submissions_table(recent)}")
    return _page(f"Leaderboard {board.name}", body)


# --------------------------------------------------------------------------------------------
# The per-case chart: horizontal bars on a log scale, one group per benchmark case.
# --------------------------------------------------------------------------------------------

SERIES_COLOURS = {"verified": "#2b6cb0", "self-reported": "#a0aec0", "reference (torch.geqrf)": "#dd6b20"}


def _case_label(spec: dict) -> str:
    return f"{spec.get('batch')}×{spec.get('n')}, cond {spec.get('cond')}, {spec.get('case', 'dense')}"


def chart_series(runs: list[dict]) -> tuple[list[str], dict[str, list[float | None]]]:
    """Case labels and per-series mean times (ns) from a submission's runs."""
    verified = next((r for r in reversed(runs) if r["secret"] and r["report"]), None)
    own = next((r for r in runs if not r["secret"] and r["report"]), None)
    base = verified or own
    if base is None:
        return [], {}
    cases = base["report"].get("benchmarks") or []
    labels = [_case_label(c.get("spec") or {}) for c in cases]
    series: dict[str, list[float | None]] = {}

    def means(run, key):
        entries = (run["report"].get("benchmarks") or []) if run else []
        values = []
        for i in range(len(labels)):
            entry = entries[i] if i < len(entries) else {}
            value = (entry.get("stats") or {}).get("mean") if key == "mean" else entry.get(key)
            values.append(value if isinstance(value, (int, float)) and value > 0 else None)
        return values
    if verified:
        series["verified"] = means(verified, "mean")
    if own:
        series["self-reported"] = means(own, "mean")
    for run in (verified, own):
        reference = means(run, "baseline_mean")
        if any(v is not None for v in reference):
            series["reference (torch.geqrf)"] = reference
            break
    return labels, series


def times_chart(labels: list[str], series: dict[str, list[float | None]]) -> str:
    values = [v for vs in series.values() for v in vs if v is not None]
    if not labels or not values:
        return "<p class=\"note\">No benchmark times to chart.</p>"
    low = 10 ** math.floor(math.log10(min(values)))
    high = 10 ** math.ceil(math.log10(max(values)))
    if high <= low:
        high = low * 10
    label_w, plot_w, bar_h, gap = 230, 560, 12, 10
    group_h = bar_h * len(series) + gap
    top = 30
    height = top + group_h * len(labels) + 40
    width = label_w + plot_w + 120

    def x_of(ns: float) -> float:
        return label_w + plot_w * (math.log10(ns) - math.log10(low)) / (math.log10(high) - math.log10(low))

    parts = [f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" "
             f"role=\"img\" aria-label=\"mean time per benchmark case\" class=\"times-chart\" "
             f"font-family=\"sans-serif\" font-size=\"11\">"]
    decade = low
    while decade <= high * 1.0001:
        x = x_of(decade)
        parts.append(f"<line x1=\"{x:.1f}\" y1=\"{top - 5}\" x2=\"{x:.1f}\" y2=\"{top + group_h * len(labels)}\" "
                     f"stroke=\"#ddd\"/><text x=\"{x:.1f}\" y=\"{top + group_h * len(labels) + 14}\" "
                     f"text-anchor=\"middle\">{escape(format_ns(decade))}</text>")
        decade *= 10
    for i, label in enumerate(labels):
        y0 = top + i * group_h
        parts.append(f"<text x=\"{label_w - 8}\" y=\"{y0 + bar_h * len(series) / 2 + 4:.1f}\" "
                     f"text-anchor=\"end\">{escape(label)}</text>")
        for j, (name, vs) in enumerate(series.items()):
            value = vs[i]
            if value is None:
                continue
            y = y0 + j * bar_h
            w = max(1.0, x_of(value) - label_w)
            parts.append(f"<rect class=\"bar\" x=\"{label_w}\" y=\"{y}\" width=\"{w:.1f}\" height=\"{bar_h - 2}\" "
                         f"fill=\"{SERIES_COLOURS[name]}\"><title>{escape(name)}: {escape(format_ns(value))}"
                         f"</title></rect><text x=\"{label_w + w + 4:.1f}\" y=\"{y + bar_h - 3}\">"
                         f"{escape(format_ns(value))}</text>")
    for j, name in enumerate(series):
        x = label_w + j * 190
        parts.append(f"<rect x=\"{x}\" y=\"6\" width=\"12\" height=\"12\" fill=\"{SERIES_COLOURS[name]}\"/>"
                     f"<text x=\"{x + 16}\" y=\"16\">{escape(name)}</text>")
    parts.append(f"<text x=\"{label_w + plot_w / 2}\" y=\"{height - 6}\" text-anchor=\"middle\">"
                 f"mean time per call (log scale)</text></svg>")
    return "".join(parts)


def _runs_table(runs: list[dict]) -> str:
    rows = []
    for run in runs:
        kind = "worker-verified (secret seed)" if run["secret"] else "self-reported by the uploader"
        verdict = "<span class=\"pass\">passed</span>" if run["passed"] else "<span class=\"fail\">failed</span>"
        rows.append(f"<tr><td>{run['id']}</td><td>{kind}</td><td>{escape(run['runner'])}</td>"
                    f"<td>{escape(run['gpu'])}</td><td>{verdict}</td>"
                    f"<td class=\"num\">{format_score(run['score_seconds'])}</td>"
                    f"<td>{escape(run['message'])}</td><td>{format_time(run['created_at'])}</td></tr>")
    return ("<table class=\"runs\"><thead><tr><th>Run</th><th>Kind</th><th>Runner</th><th>GPU</th>"
            "<th>Result</th><th>Score</th><th>Message</th><th>Time</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def _cases_table(run: dict) -> str:
    rows = []
    for entry in (run["report"] or {}).get("benchmarks") or []:
        stats = entry.get("stats") or {}
        rows.append(f"<tr><td>{escape(_case_label(entry.get('spec') or {}))}</td>"
                    f"<td>{escape(str(entry.get('status')))}</td>"
                    f"<td class=\"num\">{format_ns(stats.get('mean'))}</td>"
                    f"<td class=\"num\">{format_ns(stats.get('err'))}</td>"
                    f"<td class=\"num\">{format_ns(stats.get('best'))}</td>"
                    f"<td class=\"num\">{stats.get('runs', '-')}</td></tr>")
    if not rows:
        return ""
    return ("<table class=\"cases\"><thead><tr><th>Case</th><th>Status</th><th>Mean</th><th>± err</th>"
            "<th>Best</th><th>Runs</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def submission_page(sub: dict) -> str:
    runs = sub["runs"]
    verified = next((r for r in reversed(runs) if r["secret"]), None)
    if verified is None:
        state = "waiting for a worker to verify it with the secret seed"
    elif verified["passed"]:
        state = f"verified: {format_score(verified['score_seconds'])}"
    else:
        state = "verification failed: not ranked"
    labels, series = chart_series(runs)
    shown = verified if verified and verified["report"] else next((r for r in runs if r["report"]), None)
    body = [f"<h1>Submission #{sub['id']}: {escape(sub['file_name'])}</h1>",
            f"<p>by <b>{escape(sub['user'])}</b> on <a href=\"/leaderboards/{escape(sub['leaderboard'])}\">"
            f"{escape(sub['leaderboard'])}</a> at {format_time(sub['created_at'])} · sha256 "
            f"<code>{escape(sub['sha256'][:16])}…</code> · <b class=\"state\">{escape(state)}</b></p>",
            "<h2>Runs</h2>", _runs_table(runs),
            "<h2>Per-case times</h2>", times_chart(labels, series)]
    if shown is not None:
        kind = "worker-verified run" if shown["secret"] else "self-reported run"
        body.append(f"<p class=\"note\">Table: the {kind}.</p>" + _cases_table(shown))
    body.append(f"<h2>Source</h2><pre><code>{escape(sub['source'])}</code></pre>")
    return _page(f"Submission #{sub['id']}", "\n".join(body))
