#!/bin/bash
# Device calls of the thirty-third session.  Nothing to carry.  Logs under $OUT.
#   bash docs/prepared/run-s33.sh 1   # the evaluator's score of the committed entry (run-s32.sh 1), on an H200 only
#   bash docs/prepared/run-s33.sh 2   # rows whose stride is not a multiple of 16 floats (n % 16 != 0) against
#                                     # their aligned neighbours (nopad: the entry without v74's padding)
#   bash docs/prepared/run-s33.sh 3   # v74 on large inputs with n % 16 != 0: nopad against the entry (each new n
#                                     # compiles for about a minute: about 400 s)
#   bash docs/prepared/run-s33.sh 4   # the GPU tests of the prepared paths (v74's padded inputs among them), split
#                                     # panels and the panel's shuffle, on the entry
#   bash docs/prepared/run-s33.sh 5   # padding latency-bound inputs too: the entry against padall
#   bash docs/prepared/run-s33.sh 6   # v74g (s33-v74g.diff: _pad / _unpad move A's and H's rows 4 floats at a time
#                                     # where n % 4 == 0) against the entry, on large misaligned inputs
#   (Ran in the thirty-third session: the old step 3, padded = s33-padded.diff against d9b1a4d's entry, four
#   shapes; and v74 against d9b1a4d's entry on n1000 b60.)
set -u
STEPS=${1:-1}
V=/tmp/s33
mkdir -p $V
sed "s/^ROW_MULTIPLE = 16 /ROW_MULTIPLE = 1 /" submission.py > $V/nopad.py
sed "s/^    elif n % ROW_MULTIPLE and not _latency_bound(A):$/    elif n % ROW_MULTIPLE:/" submission.py > $V/padall.py
cp submission.py $V/v74g.py && patch -s $V/v74g.py docs/prepared/s33-v74g.diff \
    || { echo "run-s33.sh: s33-v74g.diff does not apply"; exit 1; }
for f in nopad padall v74g; do cmp -s $V/$f.py submission.py && { echo "run-s33.sh: $f.py is unchanged"; exit 1; }; done
nvidia-smi --query-gpu=name --format=csv,noheader
[[ $STEPS == *1* ]] && {
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash docs/prepared/run-s32.sh 1
    else echo "run-s33.sh: step 1 wants an H200"; fi
}
[[ $STEPS == *2* ]] && timeout 300 python tests/gpu/ab_bench.py \
    1000:60:dense,1008:60:dense,1024:60:dense,2040:8:dense,2048:8:dense,340:40:dense,352:40:dense $V/nopad.py \
    2>&1 | tee "$OUT/ab-aligned.txt"
[[ $STEPS == *3* ]] && timeout 450 python tests/gpu/ab_bench.py \
    1000:60:dense,2040:8:dense,500:640:dense,1100:9:dense,600:30:dense,1448:8:rowscale $V/nopad.py submission.py \
    2>&1 | tee "$OUT/ab-v74.txt"
[[ $STEPS == *5* ]] && timeout 300 python tests/gpu/ab_bench.py \
    100:40:dense,340:40:dense,1448:4:dense,1100:4:dense submission.py $V/padall.py 2>&1 | tee "$OUT/ab-padall.txt"
[[ $STEPS == *6* ]] && timeout 300 python tests/gpu/ab_bench.py \
    1000:60:dense,500:640:dense,2040:8:dense,1001:60:dense submission.py $V/v74g.py 2>&1 | tee "$OUT/ab-v74g.txt"
[[ $STEPS == *4* ]] && timeout 300 python -m pytest -q tests/gpu/test_split_panels.py tests/gpu/test_prepared_paths.py \
    tests/gpu/test_panel_shuffle.py 2>&1 | tail -4 | tee "$OUT/test-v74.txt"
exit 0
