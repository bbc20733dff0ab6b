#!/bin/bash
# Device calls of the thirty-second session.  Nothing to carry.  Logs under $OUT.
#   bash docs/prepared/run-s32.sh 1     # the evaluator's score of the committed entry: both halves of specs/qr.yml's
#                                       # benchmarks (eval-a.yml, eval-b.yml) in one call, and the score of the two
#   bash docs/prepared/run-s32.sh 2     # constants tuned on the H100, again on this GPU: ab_bench n1024 b60, n2048 b8,
#                                       # n4096 b2 of the entry against UPDATE_PROGRAMS_PER_SM 3 and 6 (upps3, upps6)
#                                       # and PARTS_OWN_SM 1 and 3 (parts1, parts3)
#   bash docs/prepared/run-s32.sh 3     # UPDATE_PROGRAMS_PER_SM 2, 3, 5, 6, 8 against the entry's 4 on inputs with
#                                       # split panels (n > 1024), benchmark shapes and others
#   bash docs/prepared/run-s32.sh 4     # the evaluator's compare of the entry and upps3 on the benchmarks whose
#                                       # update is chunked (eval-upps.yml)
#   Steps 1 to 4 ran on the entry as it was (adad175: 4 update programs a multiprocessor); step 5 runs on v73 (3
#   where panels are split), against head.py (v73 with 4 there too: adad175's launches).
#   bash docs/prepared/run-s32.sh 5     # ab_bench of head.py against v73 and wave (v73 with s32-wave.diff: where
#                                       # panels are split, each launch's row chunks the fewest that fill whole waves
#                                       # of 3 programs a multiprocessor) on inputs with split panels
#   bash docs/prepared/run-s32.sh 6     # GPU tests of split panels and of the prepared paths on wave
#   bash docs/prepared/run-s32.sh 7     # a latency-bound input's update programs a multiprocessor: v73 (4) against
#                                       # lat6 and lat8 (v73 with s32-lat.diff: 6, and 8) on n176 b40, n352 b40, n256
#                                       # b64, n96 b200
set -u
STEPS=${1:-1}
V=/tmp/s32
mkdir -p $V
for u in 2 3 5 6 8; do sed "s/^UPDATE_PROGRAMS_PER_SM = 4 /UPDATE_PROGRAMS_PER_SM = $u /" submission.py > $V/upps$u.py; done
for p in 1 3; do sed "s/^PARTS_OWN_SM = 2$/PARTS_OWN_SM = $p/" submission.py > $V/parts$p.py; done
# adad175's launches: 4 update programs a multiprocessor for every input
sed "s/^UPDATE_PROGRAMS_PER_SM_SPLIT = 3$/UPDATE_PROGRAMS_PER_SM_SPLIT = 4/" submission.py > $V/head.py
cp submission.py $V/wave.py && patch -s $V/wave.py docs/prepared/s32-wave.diff \
    || { echo "run-s32.sh: s32-wave.diff does not apply"; exit 1; }
cp submission.py $V/lat6.py && patch -s $V/lat6.py docs/prepared/s32-lat.diff \
    || { echo "run-s32.sh: s32-lat.diff does not apply"; exit 1; }
sed "s/^UPDATE_PROGRAMS_PER_SM_LATENCY = 6$/UPDATE_PROGRAMS_PER_SM_LATENCY = 8/" $V/lat6.py > $V/lat8.py
[[ $STEPS == *[234]* ]] && for f in upps3 upps6 parts1 parts3; do
    cmp -s $V/$f.py submission.py && { echo "run-s32.sh: $f.py is unchanged (steps 2-4 need adad175's entry)"; exit 1; }
done
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
[[ $STEPS == *1* ]] && {
    bash docs/prepared/run-score.sh
}
[[ $STEPS == *2* ]] && timeout 560 python tests/gpu/ab_bench.py 1024:60:dense,2048:8:dense,4096:2:dense submission.py \
    $V/upps3.py $V/upps6.py $V/parts1.py $V/parts3.py 2>&1 | tee "$OUT/ab-constants.txt"
[[ $STEPS == *3* ]] && timeout 560 python tests/gpu/ab_bench.py \
    2048:8:dense,4096:2:dense,3000:1:dense,1100:6:dense,2048:3:rowscale,1536:16:dense submission.py $V/upps2.py \
    $V/upps3.py $V/upps5.py $V/upps6.py $V/upps8.py 2>&1 | tee "$OUT/ab-upps.txt"
[[ $STEPS == *4* ]] && timeout 570 python -m eval compare submission.py $V/upps3.py \
    --specs docs/prepared/eval-upps.yml 2>&1 | tail -14 | tee "$OUT/compare-upps.txt"
[[ $STEPS == *5* ]] && {
    for f in head wave; do cmp -s $V/$f.py submission.py && { echo "run-s32.sh: $f.py is unchanged"; exit 1; }; done
    timeout 240 python tests/gpu/ab_bench.py 4096:2:dense,2048:8:dense,2048:3:rowscale,1100:6:dense \
        $V/head.py submission.py $V/wave.py 2>&1 | tee "$OUT/ab-v73.txt"
}
[[ $STEPS == *7* ]] && {
    cmp -s $V/lat6.py $V/lat8.py && { echo "run-s32.sh: lat8.py is lat6.py"; exit 1; }
    timeout 240 python tests/gpu/ab_bench.py 176:40:dense,352:40:dense,256:64:dense,96:200:dense submission.py \
        $V/lat6.py $V/lat8.py 2>&1 | tee "$OUT/ab-lat.txt"
}
[[ $STEPS == *6* ]] && {
    cp $V/wave.py submission.py
    timeout 300 python -m pytest -q tests/gpu/test_split_panels.py tests/gpu/test_prepared_paths.py 2>&1 | tail -4 \
        | tee "$OUT/test-wave.txt"
}
exit 0
