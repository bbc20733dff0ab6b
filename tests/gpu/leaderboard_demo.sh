#!/usr/bin/env bash
# The leaderboard, end to end on one machine (the H200, or a CPU with specs/cpu.yml):
#   a server on loopback with a fresh SQLite file, an admin and a contestant, a leaderboard for
#   SPEC with a random secret seed, the contestant's own leaderboard-mode run of submission.py
#   (or REPORT, when given), the upload, one worker that re-runs it with the secret seed, and the
#   ranking: printed, saved as JSON and as the HTML pages the server renders.
#
# usage: bash tests/gpu/leaderboard_demo.sh [SPEC [REPORT]]     (default SPEC: specs/qr.yml)
#   env: OUT (where files go; default results/leaderboard-demo), BASELINE=1 (the worker also times
#        torch.geqrf, for the chart's reference bars), SUBMISSION (default submission.py)
set -euo pipefail

# Server packages travel as wheels where they are missing (the H200 has no network).
if ! python3 -c "import fastapi, uvicorn, sqlalchemy" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi

SPEC=${1:-specs/qr.yml}
REPORT=${2:-}
SUBMISSION=${SUBMISSION:-submission.py}
OUT=${OUT:-results/leaderboard-demo}
mkdir -p "$OUT"
WORK=$(mktemp -d)
DB="$WORK/leaderboard.db"
unset POPCORN_SEED POPCORN_FD
export PYTHONUNBUFFERED=1

echo "== users and leaderboard (database $DB)"
ADMIN_TOKEN=$(python3 -m eval admin add-user organiser --admin --db "$DB")
USER_TOKEN=$(python3 -m eval admin add-user contestant --db "$DB")
python3 -m eval admin create-leaderboard qr --spec "$SPEC" --db "$DB"

PORT=$(python3 -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
URL="http://127.0.0.1:$PORT"
python3 -m eval serve --db "$DB" --port "$PORT" --log-level warning > "$OUT/server.log" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
python3 - "$URL" <<'EOF'
import sys, time, urllib.request
for _ in range(300):
    try:
        urllib.request.urlopen(sys.argv[1] + "/api/leaderboards", timeout=2)
        sys.exit(0)
    except OSError:
        time.sleep(0.2)
sys.exit("the server did not start; see server.log")
EOF
echo "== server up at $URL"

if [ -z "$REPORT" ]; then
    echo "== the contestant's own run: python -m eval leaderboard --specs $SPEC"
    REPORT="$OUT/own-report.json"
    python3 -m eval leaderboard --submission "$SUBMISSION" --specs "$SPEC" --json "$REPORT"
fi

echo "== upload"
LEADERBOARD_TOKEN=$USER_TOKEN python3 -m eval upload --submission "$SUBMISSION" --report "$REPORT" \
    --leaderboard qr --server "$URL"

echo "== worker (secret seed, one job)"
WORKER_ARGS=(--server "$URL" --once)
if [ "${BASELINE:-0}" = 1 ]; then WORKER_ARGS+=(--baseline); fi
LEADERBOARD_TOKEN=$ADMIN_TOKEN python3 -m eval worker "${WORKER_ARGS[@]}"

echo "== ranking"
python3 - "$URL" "$OUT" <<'EOF'
import json, sys, urllib.request
url, out = sys.argv[1], sys.argv[2]
def get(path):
    with urllib.request.urlopen(url + path, timeout=30) as response:
        return response.read()
ranking = json.loads(get("/api/leaderboards/qr/ranking"))["ranking"]
open(f"{out}/ranking.json", "w").write(json.dumps(ranking, indent=2))
open(f"{out}/index.html", "wb").write(get("/"))
open(f"{out}/submission-1.html", "wb").write(get("/submissions/1"))
open(f"{out}/submission-1.json", "wb").write(get("/api/submissions/1"))
if not ranking:
    runs = json.loads(get("/api/submissions/1"))["submission"]["runs"]
    sys.exit("not ranked: " + "; ".join(r["message"] for r in runs if r["secret"]))
for e in ranking:
    own = e["self_reported_seconds"]
    print(f"#{e['rank']} {e['user']}: verified {e['score_seconds'] * 1e6:.1f} us on {e['gpu']} "
          f"(self-reported {own * 1e6:.1f} us), submission #{e['submission_id']} {e['file_name']}")
print(f"pages saved: {out}/index.html, {out}/submission-1.html")
EOF

if command -v chromium >/dev/null; then
    PROFILE=$(mktemp -d)
    chromium --headless --no-sandbox --disable-gpu --disable-background-networking --no-first-run \
        --disable-component-update --disable-sync --user-data-dir="$PROFILE" --window-size=1200,900 \
        --screenshot="$OUT/ranking.png" "$URL/" 2>/dev/null && echo "screenshot: $OUT/ranking.png"
fi
