#!/bin/bash
# Device calls of the twenty-ninth session (docs/perf.md "W's slots: a correctness fix; v66's variants measured"):
# the entry (v66) against variants made from it under /tmp/s29.  Nothing to carry.  Each step has its own time
# limit and writes its log under $OUT.  Steps 1-5 ran on the entry before the slots fix (r16 and allp3 failed
# its check then), step 6 after it.
#   pt2: PARTS_SHARED = 2 (two chains of blocks where the matrices outnumber the multiprocessors)
#   st2: the update's 64-column launches at 2 pipeline stages instead of 3
#   r16: where blocks are not used because the matrices do not outnumber the multiprocessors (n1024 b60), panels
#        of 16 columns in blocks of two: the same update passes (one per 32 columns), half the work per reflector
#   all: blocks of two 32-column panels for any batch
#   allp3, allp4: all, its batch in 3 / 4 parts where every matrix has a multiprocessor (PARTS_OWN_SM)
#   tc32: the update's tiles 32 columns wide (TRAILING_TILE_COLS)
#   pf64: register panels of 64 floats a thread where they share multiprocessors (8 warps at n512, not 4)
#   ups2, ups8: about 2 / 8 update programs a multiprocessor (UPDATE_PROGRAMS_PER_SM; the rows' chunks)
#   v66old: the entry with the W buffer's slots as before (the chunks of the whole trailing block, fewer than a
#        shorter block's launch may have: docs/perf.md "W's slots")
#   bash docs/prepared/run-s29.sh 1     # ab_bench n512 b640 dense: v66, pt2, st2
#   bash docs/prepared/run-s29.sh 2     # ab_bench n1024 b60 dense: v66, r16, all
#   bash docs/prepared/run-s29.sh 3     # ab_bench, the entry alone on the shapes and kinds of the 12 benchmarks
#   bash docs/prepared/run-s29.sh 4     # ab_bench n1024 b60 dense: v66, all, allp3, allp4
#   bash docs/prepared/run-s29.sh 5     # ab_bench n512 b640 dense: v66, tc32, pf64
#   bash docs/prepared/run-s29.sh 6     # ab_bench n1024 b60 dense and n100 b140 dense: v66old, v66 (the entry),
#                                       # r16, allp3
#   bash docs/prepared/run-s29.sh 7     # ab_bench n2048 b8 dense and n1024 b60 dense: v66, ups2, ups8
#   bash docs/prepared/run-s29.sh 8     # prepared, not run: v67 (s29-v67.diff on the entry of commit 49f662e: panel
#                                       # b's update by panel a forms its own Vᵀ C where its rows are one chunk, no
#                                       # products launch) against v66: ab_bench n512 b640 dense and mixed; race check
#   bash docs/prepared/run-s29.sh 9     # prepared, not run: v66, v67 and v68 (s29-v68.diff, v67's changes and more:
#                                       # where the far update's rows are one chunk, its program that sums V_aᵀ V_b
#                                       # joins the block's T, no join launch): ab_bench n512 b640 dense, mixed,
#                                       # n512 b300 rowscale; race check of v68
set -u
STEPS=${1:-1}
V=/tmp/s29
mkdir -p $V
cp submission.py $V/v66.py
sed 's/^PARTS_SHARED = 1/PARTS_SHARED = 2/' submission.py > $V/pt2.py
UPDATE_LAUNCH='maxnreg=UPDATE_MAX_REGISTERS if chunks == 1 else None, \*\*options)'
STAGES2='maxnreg=UPDATE_MAX_REGISTERS if chunks == 1 else None, num_stages=2 if width == 64 else 3, **options)'
sed "s/$UPDATE_LAUNCH/$STAGES2/" submission.py > $V/st2.py
FEW='registers and A.shape\[0\] <= _multiprocessors(A.device)'
sed -e "s/panel_width=NARROW_PANEL_WIDTH if small else PANEL_WIDTH,/panel_width=NARROW_PANEL_WIDTH if small or $FEW else PANEL_WIDTH,/" \
    -e 's/ and A.shape\[0\] > _multiprocessors(A.device)$//' submission.py > $V/r16.py
sed 's/ and A.shape\[0\] > _multiprocessors(A.device)$//' submission.py > $V/all.py
sed 's/^PARTS_OWN_SM = 2/PARTS_OWN_SM = 3/' $V/all.py > $V/allp3.py
sed 's/^PARTS_OWN_SM = 2/PARTS_OWN_SM = 4/' $V/all.py > $V/allp4.py
sed 's/^TRAILING_TILE_COLS = 64/TRAILING_TILE_COLS = 32/' submission.py > $V/tc32.py
sed 's/^PANEL_FLOATS_PER_THREAD_SHARED = 128/PANEL_FLOATS_PER_THREAD_SHARED = 64/' submission.py > $V/pf64.py
sed 's/^    slots = _chunks_asked(n, batch, update_programs)$/    slots = _row_chunks(n, 0, batch, update_programs)[0]/' \
    submission.py > $V/v66old.py
sed 's/^UPDATE_PROGRAMS_PER_SM = 4 /UPDATE_PROGRAMS_PER_SM = 2 /' submission.py > $V/ups2.py
sed 's/^UPDATE_PROGRAMS_PER_SM = 4 /UPDATE_PROGRAMS_PER_SM = 8 /' submission.py > $V/ups8.py
for f in pt2 st2 r16 all allp3 allp4 tc32 pf64 v66old ups2 ups8; do
    cmp -s $V/v66.py $V/$f.py && { echo "run-s29.sh: $f.py is unchanged"; exit 1; }
done
nvidia-smi --query-gpu=name --format=csv,noheader
[[ $STEPS == *1* ]] && timeout 200 python tests/gpu/ab_bench.py 512:640:dense $V/v66.py $V/pt2.py $V/st2.py 2>&1 \
    | tee "$OUT/ab512.txt"
[[ $STEPS == *2* ]] && timeout 200 python tests/gpu/ab_bench.py 1024:60:dense $V/v66.py $V/r16.py $V/all.py 2>&1 \
    | tee "$OUT/ab1024.txt"
BENCH=32:20:dense,176:40:dense,352:40:dense,512:640:dense,1024:60:dense,2048:8:dense,4096:2:dense,512:640:mixed
BENCH=$BENCH,1024:60:mixed,512:640:rankdef,512:640:clustered,1024:60:nearrank
[[ $STEPS == *3* ]] && timeout 400 python tests/gpu/ab_bench.py $BENCH submission.py 2>&1 | tee "$OUT/ab-all.txt"
[[ $STEPS == *4* ]] && timeout 280 python tests/gpu/ab_bench.py 1024:60:dense $V/v66.py $V/all.py $V/allp3.py \
    $V/allp4.py 2>&1 | tee "$OUT/ab1024-parts.txt"
[[ $STEPS == *5* ]] && timeout 200 python tests/gpu/ab_bench.py 512:640:dense $V/v66.py $V/tc32.py $V/pf64.py 2>&1 \
    | tee "$OUT/ab512-tiles.txt"
[[ $STEPS == *6* ]] && timeout 420 python tests/gpu/ab_bench.py 1024:60:dense,100:140:dense $V/v66old.py $V/v66.py \
    $V/r16.py $V/allp3.py 2>&1 | tee "$OUT/ab-slots.txt"
[[ $STEPS == *7* ]] && timeout 270 python tests/gpu/ab_bench.py 2048:8:dense,1024:60:dense $V/v66.py $V/ups2.py \
    $V/ups8.py 2>&1 | tee "$OUT/ab-ups.txt"
[[ $STEPS == *8* ]] && {
    cp submission.py $V/v67.py && patch -s $V/v67.py docs/prepared/s29-v67.diff \
        || { echo "run-s29.sh: s29-v67.diff does not apply"; exit 1; }
    timeout 200 python tests/gpu/ab_bench.py 512:640:dense,512:640:mixed $V/v66.py $V/v67.py 2>&1 \
        | tee "$OUT/ab-v67.txt"
    timeout 120 python tests/gpu/race_check.py 512:640:mixed,512:300:rowscale $V/v67.py --repeats 6 2>&1 \
        | tee "$OUT/race-v67.txt"
}
[[ $STEPS == *9* ]] && {
    cp submission.py $V/v67.py && patch -s $V/v67.py docs/prepared/s29-v67.diff \
        || { echo "run-s29.sh: s29-v67.diff does not apply"; exit 1; }
    cp submission.py $V/v68.py && patch -s $V/v68.py docs/prepared/s29-v68.diff \
        || { echo "run-s29.sh: s29-v68.diff does not apply"; exit 1; }
    timeout 260 python tests/gpu/ab_bench.py 512:640:dense,512:640:mixed,512:300:rowscale $V/v66.py $V/v67.py \
        $V/v68.py 2>&1 | tee "$OUT/ab-v68.txt"
    timeout 150 python tests/gpu/race_check.py 512:640:mixed,512:300:rowscale,1000:140:band $V/v68.py --repeats 6 \
        2>&1 | tee "$OUT/race-v68.txt"
}
exit 0
