#!/bin/bash
# Device calls prepared in the forty-first session for the next.  Nothing to carry.  Logs under $OUT.  The entry
# is submission.py; nt32 (s41-nt32.diff: the look-ahead's narrow update in tiles of its own width) is a patch on it.
#   bash docs/prepared/run-s42.sh 1   # on an H200: the evaluator's score of the entry (run-s32.sh 1, about 270 s)
#   bash docs/prepared/run-s42.sh n   # nt32 against the entry on the inputs with look-ahead and 32-column panels
#                                     # (n1024 b60, n2048 b8, n4096 b2) and one of blocks (n512 b640, unchanged)
#   bash docs/prepared/run-s42.sh t   # nt32's GPU tests (prepared paths, split panels)
# Before a call, check every variant file against the upload rule here (the evaluator's compare refuses the whole
# call if one would be refused; session 41 lost its compare step so):
#   python -c "import sys; from eval.upload_rules import upload_refusal as r; print(r(open(sys.argv[1], 'rb').read()))" FILE
set -u
STEPS=${1:-n}
LIMIT=${LIMIT:-560}  # seconds the whole call may take
V=/tmp/s42
mkdir -p $V
cp submission.py $V/entry.py
cp tests/gpu/test_prepared_paths.py tests/gpu/test_split_panels.py $V/
cp submission.py $V/nt32.py && patch -s $V/nt32.py docs/prepared/s41-nt32.diff \
    || { echo "run-s42.sh: s41-nt32.diff does not apply"; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
left() { echo $(( LIMIT - SECONDS )); }
[[ $STEPS == *1* ]] && {
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash docs/prepared/run-s32.sh 1
    else echo "run-s42.sh: step 1 wants an H200"; fi
}
[[ $STEPS == *n* ]] && (( $(left) > 150 )) && {
    timeout $(( $(left) - 10 )) python tests/gpu/ab_bench.py 1024:60:dense,2048:8:dense,4096:2:dense,512:640:dense \
        $V/entry.py $V/nt32.py 2>&1 | tee "$OUT/ab-nt32.txt"
}
[[ $STEPS == *t* ]] && (( $(left) > 90 )) && {
    cp $V/nt32.py submission.py
    timeout $(( $(left) - 10 )) python -m pytest -q --tb=short tests/gpu/test_prepared_paths.py \
        tests/gpu/test_split_panels.py 2>&1 | tail -15 | tee "$OUT/test-nt32.txt"
    cp $V/entry.py submission.py
}
exit 0
