#!/bin/bash
# The evaluator's score of the committed entry on the GPU, in two device calls (the whole of specs/qr.yml takes
# longer than one call's 600 s):  bash docs/prepared/run-eval.sh a   then   bash docs/prepared/run-eval.sh b
# Each writes its JSON report under $OUT; the score is the geometric mean of the 12 means of both reports (ns in
# the reports), on this machine from the two files fetched:
#   python3 -c "import json, math, sys; m = [c['stats']['mean'] for f in sys.argv[1:]
#       for c in json.load(open(f))['benchmarks']]; print(len(m), math.exp(sum(map(math.log, m)) / len(m)) / 1e3, 'us')"
#       eval-a.json eval-b.json
set -u
half=${1:?which half: a or b}
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 560 python -m eval benchmark --submission submission.py --specs "docs/prepared/eval-$half.yml" \
    --json "$OUT/eval-$half.json" 2>&1 | tail -30
