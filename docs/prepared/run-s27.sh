#!/bin/bash
# Device calls of the twenty-seventh session (docs/perf.md "v63 (not kept)" and "What the update and the panel
# cost apart"): the committed entry ("head") against variants made here from it under /tmp/s27, by the patches
# beside this script or by one constant.  Nothing to carry.  Each step has its own time limit (at most 190 s) and
# writes its log under $OUT; a machine taken back mid-call returns nothing, so run one or two steps a call.
# The patches are against the entry of that session (commit 4e637fc): since v64 run it on a tree whose
# submission.py is that one (git checkout 4e637fc -- submission.py).
#   bash docs/prepared/run-s27.sh 1     # ab_bench n512 b640, n1024 b60: head, tw, zl, r128, s4
#   bash docs/prepared/run-s27.sh 2     # Nsight Compute: two update launches of n512 b640 (tw), with the
#                                       # stall samples instruction by instruction ($OUT/n512-sass.csv)
#   bash docs/prepared/run-s27.sh 3     # kernel times of one n512 b640 call (head, tw), plain and serial
#   bash docs/prepared/run-s27.sh 4     # ab_bench n352 b40, n176 b40: head, tw, zl
#   bash docs/prepared/run-s27.sh 56    # ab_bench n512 b640: head, p64r, pt2, p64rpt2; n1024 b60, n352 b40: head, tw
#   bash docs/prepared/run-s27.sh 7     # kernel times of the other large shapes (head), serial then plain
# Variants: tw (s27-tw.diff: the update loads W's first part and T before using either), zl (s27-zl.diff: W, T
# and Z formed in the update's first row step, after the pipeline's first copies), r128 (UPDATE_MAX_REGISTERS
# 128: four update programs a multiprocessor), s4 (four pipeline stages in the update), p64r (s27-p64r.diff: a
# shared register panel of 8 warps, 64 floats a thread, capped at 128 registers), pt2 (PARTS_SHARED = 2).
set -u
STEPS=${1:-1}
V=/tmp/s27
P=docs/prepared
mkdir -p $V
cp submission.py $V/head.py
for d in tw zl p64r; do
    cp submission.py $V/$d.py && patch -s $V/$d.py $P/s27-$d.diff || { echo "run-s27.sh: s27-$d.diff does not apply"; exit 1; }
done
UPDATE_LAUNCH='maxnreg=UPDATE_MAX_REGISTERS if chunks == 1 else None, \*\*options)'
STAGES4='maxnreg=UPDATE_MAX_REGISTERS if chunks == 1 else None, num_stages=4 if chunks == 1 else 3, **options)'
sed 's/^UPDATE_MAX_REGISTERS = 168/UPDATE_MAX_REGISTERS = 128/' $V/tw.py > $V/r128.py
sed "s/$UPDATE_LAUNCH/$STAGES4/" $V/tw.py > $V/s4.py
sed 's/^PARTS_SHARED = 1/PARTS_SHARED = 2/' submission.py > $V/pt2.py
sed 's/^PARTS_SHARED = 1/PARTS_SHARED = 2/' $V/p64r.py > $V/p64rpt2.py
for f in r128:tw s4:tw pt2:head p64rpt2:p64r; do
    cmp -s $V/${f#*:}.py $V/${f%:*}.py && { echo "run-s27.sh: ${f%:*}.py is unchanged"; exit 1; }
done
nvidia-smi --query-gpu=name --format=csv,noheader
[[ $STEPS == *1* ]] && timeout 190 python tests/gpu/ab_bench.py 512:640:dense,1024:60:dense \
    $V/head.py $V/tw.py $V/zl.py $V/r128.py $V/s4.py 2>&1 | tee "$OUT/ab.txt"
[[ $STEPS == *2* ]] && bash $P/run-ncu.sh $V/tw.py "640 512"
[[ $STEPS == *3* ]] && {
    timeout 90 python tests/gpu/kernel_profile.py $V/head.py $V/tw.py --shapes 640:512 2>&1 | tee "$OUT/profile.txt"
    timeout 90 python tests/gpu/kernel_profile.py $V/head.py $V/tw.py --shapes 640:512 --serial 2>&1 \
        | tee "$OUT/profile-serial.txt"
}
[[ $STEPS == *4* ]] && timeout 150 python tests/gpu/ab_bench.py 352:40:dense,176:40:dense \
    $V/head.py $V/tw.py $V/zl.py 2>&1 | tee "$OUT/ab-latency.txt"
[[ $STEPS == *5* ]] && timeout 120 python tests/gpu/ab_bench.py 512:640:dense \
    $V/head.py $V/p64r.py $V/pt2.py $V/p64rpt2.py 2>&1 | tee "$OUT/ab-p64r.txt"
[[ $STEPS == *6* ]] && timeout 80 python tests/gpu/ab_bench.py 1024:60:dense,352:40:dense $V/head.py $V/tw.py 2>&1 \
    | tee "$OUT/ab-tw.txt"
[[ $STEPS == *7* ]] && {
    S=60:1024,8:2048,2:4096,40:352,40:176
    timeout 150 python tests/gpu/kernel_profile.py $V/head.py --shapes $S --serial 2>&1 | grep -v -i warn \
        | tee "$OUT/profile7-serial.txt"
    timeout 80 python tests/gpu/kernel_profile.py $V/head.py --shapes $S 2>&1 | grep -v -i warn | tee "$OUT/profile7.txt"
}
exit 0
