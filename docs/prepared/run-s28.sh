#!/bin/bash
# Device calls of the twenty-eighth session (docs/perf.md "v64", "v65"): blocks of two register panels, one pass of
# the trailing update per 64 columns.  The entry (v65) and v64 (s28-v64.diff) against variants made from them under
# /tmp/s28: one (v64 with BLOCK_PANELS = 1: the entry before v64, the same kernels and launches), all (v64 with
# blocks for any batch, not only where the matrices outnumber the multiprocessors), v64a (s28-v64a.diff on v64:
# one program factors the whole block, updating panel b by panel a and joining the two T itself; s1 the same with
# its row loops unpipelined; nou / noj without the update of panel b / the joined T, wrong results: for kernel
# times only).  Nothing to carry.  Each step has its own time limit and writes its log under $OUT; the compiles
# of a cold machine take most of a step.  The patches are against the entry of commit 8476943 (v65).
#   bash docs/prepared/run-s28.sh 1     # ab_bench n512 b640 dense: one, v64a, s1, v64
#   bash docs/prepared/run-s28.sh 2     # ab_bench n1024 b60 dense: one, all
#   bash docs/prepared/run-s28.sh 3     # ab_bench n512 b640 rankdef, clustered, mixed: one, v64
#   bash docs/prepared/run-s28.sh 4     # kernel times of one n512 b640 call, serial: one, v64
#   bash docs/prepared/run-s28.sh 5     # kernel times of one n512 b640 call, serial: v64a, nou, noj
#   bash docs/prepared/run-s28.sh 6     # race check (n512 b640, n512 b200, n300 b150, n1000 b140), GPU tests
#   bash docs/prepared/run-s28.sh 7     # v65 (the entry: panels store V's parts in the block's) against v64
#                                       # (s28-v64.diff: the join stores them): ab_bench n512 b640 dense; race check
#   bash docs/prepared/run-s28.sh 8     # prepared, not run: ab_bench n512 b640 dense: v65, pt2 (PARTS_SHARED = 2:
#                                       # two chains of blocks), st2 (the 64-column updates at 2 pipeline stages)
#   bash docs/prepared/run-s28.sh 9     # prepared, not run: v66 (s28-v66.diff: V_aᵀ V_b formed beside the update,
#                                       # the join a short launch) against v65: ab_bench n512 b640 dense; n1024 b60
#                                       # dense with blocks for any batch (v65all, v66all); race check of v66
set -u
STEPS=${1:-1}
V=/tmp/s28
P=docs/prepared
mkdir -p $V
cp submission.py $V/v65.py
cp submission.py $V/v64.py && patch -s $V/v64.py $P/s28-v64.diff \
    || { echo "run-s28.sh: s28-v64.diff does not apply"; exit 1; }
sed 's/^BLOCK_PANELS = 2/BLOCK_PANELS = 1/' $V/v64.py > $V/one.py
sed 's/ and A.shape\[0\] > _multiprocessors(A.device)$//' $V/v64.py > $V/all.py
cp $V/v64.py $V/v64a.py && patch -s $V/v64a.py $P/s28-v64a.diff \
    || { echo "run-s28.sh: s28-v64a.diff does not apply"; exit 1; }
UNPIPELINED='s/for r0 in range(\(0, n - k[0 -NB]*\), ROWS):/for r0 in tl.range(\1, ROWS, num_stages=1):/'
sed "$UNPIPELINED" $V/v64a.py > $V/s1.py
sed 's/^                _update_next_panel(src, H, T_before, b, n, ks - NB, NB)/                pass/' $V/v64a.py \
    > $V/nou.py
sed 's/^            _join_T(H, T_out, V_out, b, n, k0, NB)/            pass/' $V/v64a.py > $V/noj.py
sed 's/^PARTS_SHARED = 1/PARTS_SHARED = 2/' submission.py > $V/pt2.py
UPDATE_LAUNCH='maxnreg=UPDATE_MAX_REGISTERS if chunks == 1 else None, \*\*options)'
STAGES2='maxnreg=UPDATE_MAX_REGISTERS if chunks == 1 else None, num_stages=2 if width == 64 else 3, **options)'
sed "s/$UPDATE_LAUNCH/$STAGES2/" submission.py > $V/st2.py
cp submission.py $V/v66.py && patch -s $V/v66.py $P/s28-v66.diff \
    || { echo "run-s28.sh: s28-v66.diff does not apply"; exit 1; }
sed 's/ and A.shape\[0\] > _multiprocessors(A.device)$//' submission.py > $V/v65all.py
sed 's/ and A.shape\[0\] > _multiprocessors(A.device)$//' $V/v66.py > $V/v66all.py
for f in one:v64 all:v64 s1:v64a nou:v64a noj:v64a v64:v65 pt2:v65 st2:v65 v66:v65 v65all:v65 v66all:v66; do
    cmp -s $V/${f#*:}.py $V/${f%:*}.py && { echo "run-s28.sh: ${f%:*}.py is unchanged"; exit 1; }
done
nvidia-smi --query-gpu=name --format=csv,noheader
[[ $STEPS == *1* ]] && timeout 190 python tests/gpu/ab_bench.py 512:640:dense $V/one.py $V/v64a.py $V/s1.py $V/v64.py \
    2>&1 | tee "$OUT/ab512.txt"
[[ $STEPS == *2* ]] && timeout 190 python tests/gpu/ab_bench.py 1024:60:dense $V/one.py $V/all.py 2>&1 \
    | tee "$OUT/ab1024.txt"
[[ $STEPS == *3* ]] && timeout 190 python tests/gpu/ab_bench.py 512:640:rankdef,512:640:clustered,512:640:mixed \
    $V/one.py $V/v64.py 2>&1 | tee "$OUT/ab512-kinds.txt"
[[ $STEPS == *4* ]] && timeout 190 python tests/gpu/kernel_profile.py $V/one.py $V/v64.py --shapes 640:512 --serial \
    2>&1 | grep -v -i warn | tee "$OUT/profile-serial.txt"
[[ $STEPS == *5* ]] && timeout 190 python tests/gpu/kernel_profile.py $V/v64a.py $V/nou.py $V/noj.py --shapes 640:512 \
    --serial 2>&1 | grep -v -i warn | tee "$OUT/profile-v64a.txt"
[[ $STEPS == *6* ]] && {
    timeout 120 python tests/gpu/race_check.py 512:640:mixed,512:200:dense,300:150:rowscale,1000:140:band \
        $V/v64.py --repeats 12 2>&1 | tee "$OUT/race.txt"
    timeout 150 python -m pytest -q tests/gpu/test_prepared_paths.py 2>&1 | tail -4 | tee "$OUT/gpu-tests.txt"
}
[[ $STEPS == *7* ]] && {
    timeout 120 python tests/gpu/ab_bench.py 512:640:dense $V/v64.py $V/v65.py 2>&1 | tee "$OUT/ab-v65.txt"
    timeout 60 python tests/gpu/race_check.py 512:640:mixed submission.py --repeats 6 2>&1 | tee "$OUT/race-v65.txt"
}
[[ $STEPS == *8* ]] && timeout 190 python tests/gpu/ab_bench.py 512:640:dense $V/v65.py $V/pt2.py $V/st2.py 2>&1 \
    | tee "$OUT/ab-s29.txt"
[[ $STEPS == *9* ]] && {
    timeout 150 python tests/gpu/ab_bench.py 512:640:dense $V/v65.py $V/v66.py 2>&1 | tee "$OUT/ab-v66.txt"
    timeout 150 python tests/gpu/ab_bench.py 1024:60:dense $V/v65.py $V/v65all.py $V/v66all.py 2>&1 \
        | tee "$OUT/ab-v66-1024.txt"
    timeout 90 python tests/gpu/race_check.py 512:640:mixed,1000:140:band $V/v66.py --repeats 6 2>&1 \
        | tee "$OUT/race-v66.txt"
}
exit 0
