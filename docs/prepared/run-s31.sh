#!/bin/bash
# Device calls of the thirty-first session (docs/perf.md "v71 and v72"): the entry (v66) against v71
# (docs/prepared/s31-v71.diff: H and tau as views of one allocation, a graph's outputs cloned out as one) and v72
# (s31-v72.diff: v71, and a directly launched chain's small outputs views of pools of many calls' outputs).
# Nothing to carry.  Logs under $OUT.
#   bash docs/prepared/run-s31.sh 1     # the host's time of allocation variants (alloc_bench.py); host_bench n32,
#                                       # n176 of v66, v71, v72; the evaluator's compare of v66, v71, v72, v66 on
#                                       # n32 and n176 (eval-n32.yml); GPU tests of the prepared paths on v72
#   bash docs/prepared/run-s31.sh 2     # split panels' slice height: ab_bench n4096 b2, n2048 b8 of the entry
#                                       # (slices of 64 rows) against slices of 32, 128 and 256 rows (sl32 ...)
#   bash docs/prepared/run-s31.sh 3     # sl16 and sl32 against the entry (n4096 b2, n2048 b8, n1100 b6); race check
#                                       # and GPU tests of split panels on sl32
#   bash docs/prepared/run-s31.sh 4     # sl32 against slices of 64 rows on one warp (s64w1) and of 128 on two
#                                       # (s128w2): 64 floats a thread (n4096 b2, n2048 b8, n1100 b6)
#   bash docs/prepared/run-s31.sh 5     # sl32 against slices of 32 rows on two warps (s32w2: 16 floats a thread)
#   bash docs/prepared/run-s31.sh 6     # the evaluator's compare of the entry, sl32 and the entry again on the two
#                                       # benchmarks with split panels (eval-split.yml)
#   Steps 1 to 6 ran on the entry as it was (78d0312: v66, slices of 64 rows); from here on the entry is sl32, and
#   to run them again, check 78d0312's submission.py out first.
#   bash docs/prepared/run-s31.sh 7     # a register panel's floats a thread, on sl32: one matrix a multiprocessor
#                                       # at 32 and 128 (own32, own128; 64 now), matrices sharing one at 64
#                                       # (shared64; 128 now): n1024 b60, n2048 b8, n512 b640
#   bash docs/prepared/run-s31.sh 8     # the evaluator's benchmark of the entry on n1024 b60 after n512 b640, in one
#                                       # child (eval-order.yml): do n1024's slow repeats follow n512?
set -u
STEPS=${1:-1}
V=/tmp/s31
mkdir -p $V
cp submission.py $V/v66.py; cp submission.py $V/v66b.py
for v in v71 v72; do
    cp submission.py $V/$v.py && patch -s $V/$v.py docs/prepared/s31-$v.diff \
        || { echo "run-s31.sh: s31-$v.diff does not apply"; exit 1; }
done
for h in 16 32 128 256; do
    sed "s/^SPLIT_PANEL_SLICE = [0-9]*/SPLIT_PANEL_SLICE = $h/" submission.py > $V/sl$h.py
done
for h in 64 128; do
    sed "s/^SPLIT_PANEL_SLICE = [0-9]*/SPLIT_PANEL_SLICE = $h/; s/_panel_warps(slice_rows, nb)/_panel_warps(slice_rows, nb, 64)/" \
        submission.py > $V/s${h}w$((h / 64)).py
done
sed "s/^SPLIT_PANEL_SLICE = [0-9]*/SPLIT_PANEL_SLICE = 32/; s/_panel_warps(slice_rows, nb)/_panel_warps(slice_rows, nb, 16)/" \
    submission.py > $V/s32w2.py
for f in 32 128; do
    sed "s/^PANEL_FLOATS_PER_THREAD_OWN_SM = 64$/PANEL_FLOATS_PER_THREAD_OWN_SM = $f/" submission.py > $V/own$f.py
done
sed "s/^PANEL_FLOATS_PER_THREAD_SHARED = 128$/PANEL_FLOATS_PER_THREAD_SHARED = 64/" submission.py > $V/shared64.py
nvidia-smi --query-gpu=name --format=csv,noheader
[[ $STEPS == *1* ]] && {
    timeout 60 python docs/prepared/alloc_bench.py 20:32 40:176 2>&1 | tee "$OUT/alloc.txt"
    timeout 120 python tests/gpu/host_bench.py $V/v66.py $V/v71.py $V/v72.py --cases 20:32 40:176 2>&1 | tee "$OUT/host.txt"
    timeout 120 python tests/gpu/host_bench.py $V/v72.py $V/v71.py $V/v66.py --cases 20:32 2>&1 | tee -a "$OUT/host.txt"
    timeout 240 python -m eval compare $V/v66.py $V/v71.py $V/v72.py $V/v66b.py --specs docs/prepared/eval-n32.yml 2>&1 \
        | tail -16 | tee "$OUT/compare.txt"
    cp $V/v72.py submission.py
    timeout 200 python -m pytest -q tests/gpu/test_prepared_paths.py 2>&1 | tail -4 | tee "$OUT/test-gpu.txt"
}
[[ $STEPS == *2* ]] && timeout 500 python tests/gpu/ab_bench.py 4096:2:dense,2048:8:dense,2048:8:rowscale $V/v66.py \
    $V/sl32.py $V/sl128.py $V/sl256.py 2>&1 | tee "$OUT/ab-slices.txt"
[[ $STEPS == *3* ]] && {
    timeout 300 python tests/gpu/ab_bench.py 4096:2:dense,2048:8:dense,1100:6:dense $V/v66.py $V/sl16.py \
        $V/sl32.py 2>&1 | tee "$OUT/ab-sl16.txt"
    timeout 100 python tests/gpu/race_check.py 2048:8:mixed,1100:2:rowscale,4096:1:rowscale $V/sl32.py \
        --repeats 4 2>&1 | tail -6 | tee "$OUT/race-sl32.txt"
    cp $V/sl32.py submission.py
    timeout 200 python -m pytest -q tests/gpu/test_split_panels.py 2>&1 | tail -4 | tee "$OUT/test-sl32.txt"
}
[[ $STEPS == *4* ]] && timeout 300 python tests/gpu/ab_bench.py 4096:2:dense,2048:8:dense,1100:6:dense $V/sl32.py \
    $V/s64w1.py $V/s128w2.py $V/v66.py 2>&1 | tee "$OUT/ab-w.txt"
[[ $STEPS == *5* ]] && timeout 300 python tests/gpu/ab_bench.py 4096:2:dense,2048:8:dense,1100:6:dense $V/sl32.py \
    $V/s32w2.py $V/v66.py 2>&1 | tee "$OUT/ab-w2.txt"
[[ $STEPS == *6* ]] && timeout 400 python -m eval compare $V/v66.py $V/sl32.py $V/v66b.py \
    --specs docs/prepared/eval-split.yml 2>&1 | tail -12 | tee "$OUT/compare-split.txt"
[[ $STEPS == *7* ]] && {
    for f in own32 own128 shared64; do
        cmp -s $V/$f.py submission.py && { echo "run-s31.sh: $f.py is unchanged"; exit 1; }
    done
    timeout 500 python tests/gpu/ab_bench.py 1024:60:dense,2048:8:dense,512:640:dense submission.py $V/own32.py \
        $V/own128.py $V/shared64.py 2>&1 | tee "$OUT/ab-floats.txt"
}
[[ $STEPS == *8* ]] && timeout 300 python -m eval benchmark --submission submission.py \
    --specs docs/prepared/eval-order.yml 2>&1 | grep -E "^pass|^FAIL|above the median|^score" | tee "$OUT/eval-order.txt"
exit 0
