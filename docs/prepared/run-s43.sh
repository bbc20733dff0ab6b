#!/bin/bash
# Device calls of the forty-third session.  Nothing to carry.  Logs under $OUT.  Steps a and v were measured
# in that session on an H100 (docs/perf.md, "vt, w128r and parts2 measured"): none of the variants is kept.
#   bash docs/prepared/run-s43.sh 1   # on an H200 only: the evaluator's score of the committed entry (both halves of
#                                     # specs/qr.yml's benchmarks, eval-a.yml and eval-b.yml, and their geomean)
#   bash docs/prepared/run-s43.sh v   # tma_bench.py vn: the far update's loads of V's parts and of the next panel's
#                                     # apart (diagnostics), and the next panel's parts read from a transposed copy
#   bash docs/prepared/run-s43.sh a   # ab_bench: the entry against w128r (s42-w128r.diff), parts2 (PARTS_SHARED =
#                                     # 2) and vt (s43-vt.diff: V's parts also stored transposed, so that every
#                                     # product Vᵀ C reads Vᵀ along memory) on n512 b640, n1024 b60, n2048 b8, n4096 b2
#   bash docs/prepared/run-s43.sh t   # vt's GPU tests (s43-vt-tests.diff: test_panel_shuffle.py checks the
#                                     # transposed copy; test_split_panels.py, test_prepared_paths.py) in a copy of
#                                     # the tree
set -u
STEPS=${1:-1}
V=/tmp/s43
mkdir -p $V
cp submission.py $V/entry.py
cp submission.py $V/w128r.py && patch -s $V/w128r.py docs/prepared/s42-w128r.diff \
    || { echo "run-s43.sh: s42-w128r.diff does not apply"; exit 1; }
cp submission.py $V/vt.py && patch -s $V/vt.py docs/prepared/s43-vt.diff \
    || { echo "run-s43.sh: s43-vt.diff does not apply"; exit 1; }
sed "s/^PARTS_SHARED = 1$/PARTS_SHARED = 2/" submission.py > $V/parts2.py
cmp -s $V/parts2.py submission.py && { echo "run-s43.sh: parts2.py is unchanged"; exit 1; }
GPU=$(nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader)
echo "$GPU"
[[ $STEPS == *1* ]] && { if [[ $GPU == *H200* ]]; then
    bash docs/prepared/run-score.sh
else echo "run-s43.sh: step 1 skipped: not an H200"; fi; }
[[ $STEPS == *v* ]] && timeout 200 python docs/prepared/tma_bench.py vn 2>&1 | tee "$OUT/tma-vn.txt"
[[ $STEPS == *a* ]] && timeout 320 python tests/gpu/ab_bench.py 512:640:dense,1024:60:dense,2048:8:dense,4096:2:dense \
    $V/entry.py $V/vt.py $V/w128r.py $V/parts2.py 2>&1 | tee "$OUT/ab-s43.txt"
[[ $STEPS == *t* ]] && {
    rm -rf $V/tree && mkdir -p $V/tree && tar --exclude=./.git -cf - . | tar -xf - -C $V/tree
    (cd $V/tree && patch -s -p1 < "$OLDPWD/docs/prepared/s43-vt.diff" \
        && patch -s -p1 < "$OLDPWD/docs/prepared/s43-vt-tests.diff" \
        && timeout 240 python -m pytest -q -p no:cacheprovider tests/gpu/test_panel_shuffle.py \
            tests/gpu/test_split_panels.py tests/gpu/test_prepared_paths.py 2>&1 | tail -15) | tee "$OUT/vt-tests.txt"
}
exit 0
