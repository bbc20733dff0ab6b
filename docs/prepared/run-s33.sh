#!/bin/bash
# Device calls of the thirty-third session.  Nothing to carry.  Logs under $OUT.
#   bash docs/prepared/run-s33.sh 1   # the evaluator's score of the committed entry (run-s32.sh 1), on an H200 only
#   bash docs/prepared/run-s33.sh 2   # rows whose stride is not a multiple of 16 floats (n % 16 != 0) against
#                                     # their aligned neighbours, on the latency-bound and the large paths
#   bash docs/prepared/run-s33.sh 3   # padded rows: ab_bench of the entry against padded (s33-padded.diff) on
#                                     # inputs with n % 16 != 0 and aligned controls (ran in the thirty-third
#                                     # session with the diff applied to the working tree, against a copy of
#                                     # d9b1a4d's entry; its 240 s ran out after four shapes)
#   bash docs/prepared/run-s33.sh 4   # the GPU tests of the prepared paths, split panels and the panel's shuffle
#                                     # on padded (copied over submission.py: run it last)
set -u
STEPS=${1:-1}
cp submission.py /tmp/padded.py && patch -s /tmp/padded.py docs/prepared/s33-padded.diff \
    || { echo "run-s33.sh: s33-padded.diff does not apply"; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader
[[ $STEPS == *1* ]] && {
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash docs/prepared/run-s32.sh 1
    else echo "run-s33.sh: step 1 wants an H200"; fi
}
[[ $STEPS == *2* ]] && timeout 200 python tests/gpu/ab_bench.py \
    1000:60:dense,1008:60:dense,1024:60:dense,500:640:dense,512:640:dense,2040:8:dense,2048:8:dense,1000:8:dense,1008:8:dense,340:40:dense,352:40:dense \
    submission.py 2>&1 | tee "$OUT/ab-aligned.txt"
[[ $STEPS == *3* ]] && timeout 400 python tests/gpu/ab_bench.py \
    1448:4:dense,1100:4:dense,1100:1:dense,1000:60:dense,2040:8:dense,500:640:dense,340:40:dense,100:40:dense,1024:60:dense,352:40:dense \
    submission.py /tmp/padded.py 2>&1 | tee "$OUT/ab-padded.txt"
[[ $STEPS == *4* ]] && cp /tmp/padded.py submission.py && timeout 200 python -m pytest -q tests/gpu/test_split_panels.py tests/gpu/test_prepared_paths.py tests/gpu/test_panel_shuffle.py \
    2>&1 | tail -4 | tee "$OUT/test-padded.txt"
exit 0
