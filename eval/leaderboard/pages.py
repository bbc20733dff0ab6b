"""The leaderboard's HTML pages: Jinja2 templates with autoescaping, a stylesheet, SVG charts.

Every value reaches a page through a template, which escapes it; numbers are formatted here from
floats that ``publish`` validated (anything else shows as "-"). The pages have no script, and the
server sends them with a Content-Security-Policy that would block one (``limits.CSP``).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path

import jinja2

from eval.leaderboard.publish import case_label

STYLESHEET = (Path(__file__).parent / "templates" / "leaderboard.css").read_text(encoding="utf-8")

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                          autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                          lstrip_blocks=True)


def _finite(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def format_time(seconds) -> str:
    seconds = _finite(seconds)
    if seconds is None or not 0 <= seconds < 1e11:
        return "-"
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def format_score(seconds) -> str:
    seconds = _finite(seconds)
    return "-" if seconds is None else f"{seconds * 1e6:,.1f} µs"


def format_ns(ns) -> str:
    ns = _finite(ns)
    if ns is None:
        return "-"
    if ns >= 1e6:
        return f"{ns / 1e6:,.3f} ms"
    return f"{ns / 1e3:,.1f} µs"


def format_margin(value) -> str:
    value = _finite(value)
    return "-" if value is None else f"{value:.3g}"


def format_count(value) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else "-"


_env.filters.update(time=format_time, score=format_score, ns=format_ns, margin=format_margin,
                    count=format_count, case_label=case_label)


def _render(template: str, **values) -> str:
    return _env.get_template(template).render(**values)


def not_found_page(message: str) -> str:
    return _render("not_found.html", message=message)


def index_page(boards: list[tuple]) -> str:
    return _render("index.html", boards=boards)


def leaderboard_page(board, ranking: list[dict], recent: list[dict]) -> str:
    return _render("leaderboard.html", board=board, ranking=ranking, recent=recent)


# --------------------------------------------------------------------------------------------
# The per-case chart: horizontal bars on a log scale, one group per benchmark case.
# --------------------------------------------------------------------------------------------

SERIES_COLOURS = {"verified": "#2b6cb0", "self-reported": "#a0aec0", "reference (torch.geqrf)": "#dd6b20"}
MIN_NS, MAX_NS = 1e-3, 1e13      # the range verify accepts; anything outside is not drawn


def _benchmarks(run) -> list[dict]:
    return [c for c in (run["cases"] if run else []) if c["kind"] == "benchmark"]


def chart_series(runs: list[dict]) -> tuple[list[str], dict[str, list[float | None]]]:
    """Case labels and per-series mean times (ns) from a submission's runs (their public cases)."""
    verified = next((r for r in reversed(runs) if r["secret"] and _benchmarks(r)), None)
    own = next((r for r in runs if not r["secret"] and _benchmarks(r)), None)
    base = verified or own
    if base is None:
        return [], {}
    labels = [case_label(c) for c in _benchmarks(base)]

    def values(run, key):
        entries = _benchmarks(run)
        out = []
        for i in range(len(labels)):
            value = _finite(entries[i][key]) if i < len(entries) else None
            out.append(value if value is not None and MIN_NS <= value <= MAX_NS else None)
        return out
    series: dict[str, list[float | None]] = {}
    if verified:
        series["verified"] = values(verified, "mean_ns")
    if own:
        series["self-reported"] = values(own, "mean_ns")
    for run in (verified, own):
        if run is not None:
            reference = values(run, "baseline_ns")
            if any(v is not None for v in reference):
                series["reference (torch.geqrf)"] = reference
                break
    return labels, series


def chart_layout(labels: list[str], series: dict[str, list[float | None]]) -> dict | None:
    """Every position and text of the chart, as numbers and strings for the template."""
    values = [v for vs in series.values() for v in vs if v is not None]
    if not labels or not values:
        return None
    low = 10.0 ** math.floor(math.log10(min(values)))
    high = 10.0 ** math.ceil(math.log10(max(values)))
    if high <= low:
        high = low * 10
    label_w, plot_w, bar_h, gap, top = 230, 560, 12, 10, 30
    group_h = bar_h * len(series) + gap
    bottom = top + group_h * len(labels)
    height = bottom + 40

    def x_of(ns: float) -> float:
        return label_w + plot_w * (math.log10(ns) - math.log10(low)) / (math.log10(high) - math.log10(low))

    ticks = []
    decade = low
    while decade <= high * 1.0001:
        ticks.append({"x": round(x_of(decade), 1), "text": format_ns(decade)})
        decade *= 10
    groups = []
    for i, label in enumerate(labels):
        y0 = top + i * group_h
        bars = []
        for j, (name, vs) in enumerate(series.items()):
            if vs[i] is None:
                continue
            width = max(1.0, x_of(vs[i]) - label_w)
            bars.append({"name": name, "colour": SERIES_COLOURS[name], "y": y0 + j * bar_h,
                         "width": round(width, 1), "text": format_ns(vs[i]),
                         "text_x": round(label_w + width + 4, 1)})
        groups.append({"label": label, "label_y": round(y0 + bar_h * len(series) / 2 + 4, 1), "bars": bars})
    legend = [{"name": name, "colour": SERIES_COLOURS[name], "x": label_w + j * 190} for j, name in enumerate(series)]
    return {"width": label_w + plot_w + 120, "height": height, "top": top, "bottom": bottom,
            "label_w": label_w, "plot_w": plot_w, "bar_h": bar_h, "ticks": ticks, "groups": groups,
            "legend": legend}


def times_chart(labels: list[str], series: dict[str, list[float | None]]) -> str:
    return _render("chart.html", chart=chart_layout(labels, series))


def submission_page(sub: dict) -> str:
    runs = sub["runs"]
    verified = next((r for r in reversed(runs) if r["secret"]), None)
    if verified is None:
        state = "waiting for a worker to verify it with a secret seed"
    elif verified["passed"]:
        state = f"verified: {format_score(verified['score_seconds'])}"
    else:
        state = "verification failed: not ranked"
    labels, series = chart_series(runs)
    shown = verified if verified and verified["cases"] else next((r for r in runs if r["cases"]), None)
    return _render("submission.html", sub=sub, state=state, chart=chart_layout(labels, series), shown=shown)
