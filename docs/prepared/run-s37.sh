#!/bin/bash
# Device calls of the thirty-seventh session.  Nothing to carry.  Logs under $OUT.
#   bash docs/prepared/run-s37.sh a   # v77 (s37-v77.diff): a register panel's step without the lane masks of
#                                     # _pick and with tau folded into w: 12 to 15 % fewer instructions in its
#                                     # loop; ab_bench on n1024 b60 and n512 b640, then the shuffle's
#                                     # bit-identity test on v77, as far as LIMIT allows
#   bash docs/prepared/run-s37.sh ab  # and the rest of the shapes it moves (n2048 b8, n4096 b2, n352 b40, n176 b40)
set -u
STEPS=${1:-a}
LIMIT=${LIMIT:-560}  # seconds the whole call may take
V=/tmp/s37
mkdir -p $V
cp submission.py $V/entry.py
cp submission.py $V/v77.py && patch -s $V/v77.py docs/prepared/s37-v77.diff \
    || { echo "run-s37.sh: s37-v77.diff does not apply"; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
[[ $STEPS == *a* ]] && {
    timeout $(( LIMIT - 40 )) python tests/gpu/ab_bench.py 1024:60:dense,512:640:dense $V/entry.py $V/v77.py \
        2>&1 | tee "$OUT/ab-v77.txt"
    (( SECONDS < LIMIT - 60 )) && {
        cp $V/v77.py submission.py
        timeout $((LIMIT - SECONDS - 5)) python -m pytest -q tests/gpu/test_panel_shuffle.py 2>&1 | tail -3 \
            | tee "$OUT/test-v77.txt"
        cp $V/entry.py submission.py
    }
}
[[ $STEPS == *b* ]] && (( SECONDS < LIMIT - 120 )) && timeout $((LIMIT - SECONDS - 10)) python tests/gpu/ab_bench.py \
    2048:8:dense,4096:2:dense,352:40:dense,176:40:dense $V/entry.py $V/v77.py 2>&1 | tee "$OUT/ab-v77b.txt"
exit 0
