"""The HTML pages served by a real server: escaping, the chart, nothing secret, pages for errors."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import urllib.error
import urllib.request

from eval.leaderboard.pages import chart_series, times_chart
from eval.leaderboard.publish import public_cases
from eval.specs import load_spec, mix_seed

from .helpers import SECRET_SEED


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_source_and_names_are_escaped_and_secrets_never_shown(board, own_report, seeded_report):
    source = "import torch\n# </pre><script>alert('x')</script>\ndef custom_kernel(A):\n    return torch.geqrf(A)\n"
    report = copy.deepcopy(own_report)
    report["submission"]["sha256"] = hashlib.sha256(source.encode()).hexdigest()
    alice = board["server"].client(board["tokens"]["alice"])
    sub = alice.post("/api/leaderboards/qr/submissions",
                     {"file_name": "submission.py", "source": source, "report": json.dumps(report)})["submission"]
    admin = board["server"].client(board["tokens"]["admin"])
    job = admin.post("/api/jobs/claim", {"host": "h"})["job"]
    verified = copy.deepcopy(seeded_report(job["seed"]))
    verified["submission"]["sha256"] = sub["sha256"]
    run = admin.post(f"/api/jobs/{job['id']}/result",
                     {"lease": job["lease"], "report": json.dumps(verified), "gpu": "<b>gpu</b>"})["run"]
    assert run["passed"], run

    spec = load_spec(board["files"]["spec"])
    mixed = {str(mix_seed(c.seed, job["seed"])) for c in spec.tests + spec.benchmarks} | {str(job["seed"])}
    status, page = fetch(f"{board['server'].url}/submissions/{sub['id']}")
    assert status == 200
    assert "<script>" not in page and "&lt;/pre&gt;&lt;script&gt;" in page
    assert "&lt;b&gt;gpu&lt;/b&gt;" in page
    assert page.count("<svg") == 1 and page.count("<rect") >= 4
    status, index = fetch(board["server"].url + "/")
    assert status == 200 and "alice" in index and "&lt;b&gt;gpu&lt;/b&gt;" in index
    for text in (page, index):
        assert str(SECRET_SEED) not in text
        assert not any(token in text for token in board["tokens"].values())
        assert not [s for s in mixed if s in text]


def test_unknown_pages_say_what_is_missing(board):
    status, page = fetch(board["server"].url + "/leaderboards/nope")
    assert status == 404 and "unknown leaderboard &#39;nope&#39;" in page
    status, page = fetch(board["server"].url + "/submissions/77")
    assert status == 404 and "unknown submission 77" in page


def test_chart_has_a_bar_per_case_and_series_including_the_reference():
    def run(secret, means, baseline=None):
        return {"secret": secret, "cases": public_cases({"benchmarks": [
            {"spec": {"batch": 2, "n": 8 * (i + 1), "cond": 1, "case": "dense"}, "stats": {"mean": m},
             "baseline_mean": None if baseline is None else baseline[i]} for i, m in enumerate(means)]})}
    labels, series = chart_series([run(False, [2e4, 3e5], baseline=[4e4, 9e5]), run(True, [2.5e4, 2.8e5])])
    assert labels == ["2×8, cond 1, dense", "2×16, cond 1, dense"]
    assert series == {"verified": [2.5e4, 2.8e5], "self-reported": [2e4, 3e5],
                      "reference (torch.geqrf)": [4e4, 9e5]}
    svg = times_chart(labels, series)
    bars = re.findall(r'<rect class="bar" x="230" y="\d+" width="([\d.]+)"', svg)
    assert len(bars) == 6
    widths = [float(w) for w in bars]
    assert widths[0] < widths[3]              # 25 µs draws shorter than 280 µs (log scale)
