#!/bin/bash
# Device calls of the thirty-eighth session.  Nothing to carry.  Logs under $OUT.
#   bash docs/prepared/run-s38.sh a   # v77 (s37-v77.diff) and v79 (v77 + s38-v78.diff: a register panel's columns
#                                     # kept unscaled until its store, + s38-v79.diff: column j taken from the
#                                     # update's own result) against the entry: ab_bench on n1024 b60 and n512 b640,
#                                     # then the shuffle's bit-identity test on v79, as far as LIMIT allows
#   bash docs/prepared/run-s38.sh ab  # and the rest of the shapes they move (n2048 b8, n4096 b2, n352 b40, n176 b40)
# (VARIANTS="v77 v78 v79" adds v78, v77 + s38-v78.diff alone.)
set -u
STEPS=${1:-a}
LIMIT=${LIMIT:-560}  # seconds the whole call may take
V=/tmp/s38
mkdir -p $V
cp submission.py $V/entry.py
cp submission.py $V/v77.py && patch -s $V/v77.py docs/prepared/s37-v77.diff \
    || { echo "run-s38.sh: s37-v77.diff does not apply"; exit 1; }
cp $V/v77.py $V/v78.py && patch -s $V/v78.py docs/prepared/s38-v78.diff \
    || { echo "run-s38.sh: s38-v78.diff does not apply"; exit 1; }
cp $V/v78.py $V/v79.py && patch -s $V/v79.py docs/prepared/s38-v79.diff \
    || { echo "run-s38.sh: s38-v79.diff does not apply"; exit 1; }
ENTRIES="$V/entry.py"
for v in ${VARIANTS:-v77 v79}; do ENTRIES="$ENTRIES $V/$v.py"; done
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
[[ $STEPS == *a* ]] && {
    timeout $(( LIMIT - 40 )) python tests/gpu/ab_bench.py 1024:60:dense,512:640:dense $ENTRIES 2>&1 | tee "$OUT/ab-a.txt"
    (( SECONDS < LIMIT - 60 )) && {
        cp $V/v79.py submission.py
        timeout $((LIMIT - SECONDS - 5)) python -m pytest -q tests/gpu/test_panel_shuffle.py 2>&1 | tail -3 \
            | tee "$OUT/test-v79.txt"
        cp $V/entry.py submission.py
    }
}
[[ $STEPS == *b* ]] && (( SECONDS < LIMIT - 120 )) && timeout $((LIMIT - SECONDS - 10)) python tests/gpu/ab_bench.py \
    2048:8:dense,4096:2:dense,352:40:dense,176:40:dense $ENTRIES 2>&1 | tee "$OUT/ab-b.txt"
exit 0
