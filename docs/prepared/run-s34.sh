#!/bin/bash
# Device calls of the thirty-fourth session.  Nothing to carry.  Logs under $OUT.
#   bash docs/prepared/run-s34.sh 1   # on an H200: the evaluator's score of the committed entry (run-s32.sh 1, about
#                                     # 270 s)
#   bash docs/prepared/run-s34.sh 2   # the GPU tests of split panels, prepared paths and the panel's shuffle
#                                     # (run-s33.sh 4)
#   bash docs/prepared/run-s34.sh 3   # v74 and v74g on large misaligned inputs: nopad, the entry and v74g side by
#                                     # side (run-s33.sh 3 and 6 in one ab_bench; each new n compiles for a minute)
#   bash docs/prepared/run-s34.sh 4   # constants tuned on the H100, on this card (run-s32.sh 2)
#   bash docs/prepared/run-s34.sh 5   # split inputs (n > 1024) up to 32 MiB on the large path (sl, s33-splitlarge.diff)
#                                     # against the entry, now that a misaligned one is padded there
#   bash docs/prepared/run-s34.sh 6   # v75 (split inputs latency-bound only up to 16 MiB): the tests that it moves to
#                                     # the large path (eval-v75.yml: specs/qr.yml's n2048 b2), with gate margins
set -u
STEPS=${1:-1}
V=/tmp/s34
mkdir -p $V
sed "s/^ROW_MULTIPLE = 16 /ROW_MULTIPLE = 1 /" submission.py > $V/nopad.py
cp submission.py $V/v74g.py && patch -s $V/v74g.py docs/prepared/s33-v74g.diff \
    || { echo "run-s34.sh: s33-v74g.diff does not apply"; exit 1; }
# (Step 5 measured sl before v75 put its rule, with a 16 MiB bound, into the entry: the diff no longer applies.)
[[ $STEPS == *5* ]] && { cp submission.py $V/sl.py && patch -s $V/sl.py docs/prepared/s33-splitlarge.diff \
    || { echo "run-s34.sh: s33-splitlarge.diff does not apply (v75 is in the entry: step 5 is done)"; exit 1; }; }
for f in nopad v74g; do cmp -s $V/$f.py submission.py && { echo "run-s34.sh: $f.py is unchanged"; exit 1; }; done
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
[[ $STEPS == *1* ]] && {
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash docs/prepared/run-s32.sh 1
    else echo "run-s34.sh: step 1 wants an H200"; fi
}
[[ $STEPS == *6* ]] && {
    timeout 200 python -m eval test --specs docs/prepared/eval-v75.yml --json "$OUT/test.json" > "$OUT/test.txt" 2>&1
    echo "eval test: rc $?"
    python3 - "$OUT/test.json" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1]))["tests"]:
    s = c["spec"]
    print(f"b{s['batch']} n{s['n']} {s.get('case', 'dense'):10s} {c['status']:6s} factor {c['factor_margin']:.4f}"
          f" orth {c['orth_margin']:.4f}")
PY
}
[[ $STEPS == *2* ]] && timeout 280 python -m pytest -q tests/gpu/test_split_panels.py \
    tests/gpu/test_prepared_paths.py tests/gpu/test_panel_shuffle.py 2>&1 | tail -4 | tee "$OUT/test-v74.txt"
[[ $STEPS == *3* ]] && timeout 500 python tests/gpu/ab_bench.py \
    1000:60:dense,500:640:dense,2040:8:dense,1001:60:dense,1100:9:dense,1448:8:rowscale \
    $V/nopad.py submission.py $V/v74g.py 2>&1 | tee "$OUT/ab-v74g.txt"
[[ $STEPS == *4* ]] && bash docs/prepared/run-s32.sh 2
[[ $STEPS == *5* ]] && timeout 450 python tests/gpu/ab_bench.py \
    1100:4:dense,1448:4:dense,1100:1:dense,1536:3:dense,2048:2:dense,1280:2:dense submission.py $V/sl.py \
    2>&1 | tee "$OUT/ab-sl.txt"
exit 0
