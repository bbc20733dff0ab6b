#!/bin/bash
# The evaluator's score of the committed entry in one device call (about 270 s on an H200): both halves of
# specs/qr.yml's benchmarks (eval-a.yml, eval-b.yml; JSON reports and tails under $OUT), then the geometric mean
# of the 12 means, with each case's mean, median and slow repeats (score.txt).
set -u
for half in a b; do
    timeout 290 python -m eval benchmark --submission submission.py --specs "docs/prepared/eval-$half.yml" \
        --json "$OUT/eval-$half.json" 2>&1 | tail -22 | tee "$OUT/eval-$half.txt"
done
python3 - "$OUT/eval-a.json" "$OUT/eval-b.json" <<'PY' | tee "$OUT/score.txt"
import json, math, sys
cases = [c for f in sys.argv[1:] for c in json.load(open(f))["benchmarks"]]
for c in cases:
    s, sp = c["stats"], c["spec"]
    print(f"b{sp['batch']} n{sp['n']} {sp.get('case', 'dense'):10s} mean {s['mean'] / 1e3:9.1f} us  median"
          f" {s['median'] / 1e3:9.1f} us  slow {s['slow']} of {s['runs']}")
means = [c["stats"]["mean"] for c in cases]
print(len(means), "cases, score (geomean of means)", round(math.exp(sum(map(math.log, means)) / len(means)) / 1e3, 1), "us")
PY
