#!/bin/bash
# Device calls of the thirty-ninth session (run-s38.sh folded in: never run).  Nothing to carry.  Logs under $OUT.
#   bash docs/prepared/run-s39.sh a   # v79 (s37-v77.diff + s38-v78.diff + s38-v79.diff: a register panel's step
#                                     # without lane masks, its columns unscaled until the store, column j from the
#                                     # update) and v80 (v79 + s39-v80.diff: a register panel held in tiles of an
#                                     # eighth of its power of 2, fewer padding rows) against the entry: ab_bench on
#                                     # n1024 b60 (with v79all: v79 with blocks of two panels for any batch) and
#                                     # n512 b640, then the shuffle's bit-identity tests on v79 and v80
#   bash docs/prepared/run-s39.sh ab  # and the rest of the shapes they move (n2048 b8, n4096 b2, n352 b40, n176 b40)
# Every entry's kernels are compiled first, in parallel processes (Triton's cache then serves ab_bench).
# VARIANTS="v77 v78 v79 v80" adds v77 and v78 (each diff alone on top of the one before).
set -u
STEPS=${1:-a}
LIMIT=${LIMIT:-560}  # seconds the whole call may take
V=/tmp/s39
mkdir -p $V
cp submission.py $V/entry.py
cp tests/gpu/test_panel_shuffle.py $V/test_panel_shuffle.py
previous=$V/entry.py
for d in s37-v77 s38-v78 s38-v79 s39-v80; do
    v=${d#*-}
    cp $previous $V/$v.py && patch -s $V/$v.py docs/prepared/$d.diff || { echo "run-s39.sh: $d.diff does not apply"; exit 1; }
    previous=$V/$v.py
done
sed "s/ and A.shape\[0\] > _multiprocessors(A.device)$//" $V/v79.py > $V/v79all.py
[ "$(diff $V/v79.py $V/v79all.py | grep -c '^>')" = 1 ] || { echo "run-s39.sh: v79all.py is not v79.py with 1 line changed"; exit 1; }
ENTRIES="$V/entry.py"
for v in ${VARIANTS:-v79 v80}; do ENTRIES="$ENTRIES $V/$v.py"; done
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
warm() {  # warm CASES ENTRY...: one call of each entry on each case, all in parallel, to fill Triton's cache
    local cases=$1; shift
    for e in "$@"; do for c in ${cases//,/ }; do
        IFS=: read -r n batch case <<< "$c"
        timeout $(( LIMIT / 3 )) python - "$e" "$n" "$batch" "$case" > /dev/null 2>> "$OUT/warm.txt" <<'PY' &
import sys
import torch
sys.path[:0] = ["tests/gpu", "."]
import reference
from kernel_bench import load_entry
entry, n, batch, case = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
load_entry(entry)(reference.generate_input(batch, n, 2, 7, case, device="cuda"))
torch.cuda.synchronize()
PY
    done; done
    wait
    echo "warm $cases: $SECONDS s" | tee -a "$OUT/warm.txt"
}
[[ $STEPS == *a* ]] && {
    warm 1024:60:dense,512:640:dense $ENTRIES $V/v79all.py
    timeout $(( LIMIT - SECONDS - 200 )) python tests/gpu/ab_bench.py 1024:60:dense $ENTRIES $V/v79all.py 2>&1 \
        | tee "$OUT/ab-a.txt"
    (( SECONDS < LIMIT - 100 )) && timeout $(( LIMIT - SECONDS - 60 )) python tests/gpu/ab_bench.py 512:640:dense \
        $ENTRIES 2>&1 | tee -a "$OUT/ab-a.txt"
    for v in v79 v80; do
        (( SECONDS < LIMIT - 45 )) || break
        cp $V/$v.py submission.py
        [ $v = v80 ] && patch -s tests/gpu/test_panel_shuffle.py docs/prepared/s39-v80-tests.diff
        timeout $((LIMIT - SECONDS - 5)) python -m pytest -q tests/gpu/test_panel_shuffle.py -k same_bits 2>&1 \
            | tail -3 | tee "$OUT/test-$v.txt"
        cp $V/test_panel_shuffle.py tests/gpu/test_panel_shuffle.py
        cp $V/entry.py submission.py
    done
}
[[ $STEPS == *b* ]] && (( SECONDS < LIMIT - 150 )) && {
    warm 2048:8:dense,4096:2:dense,352:40:dense,176:40:dense $ENTRIES
    timeout $((LIMIT - SECONDS - 10)) python tests/gpu/ab_bench.py 2048:8:dense,4096:2:dense,352:40:dense,176:40:dense \
        $ENTRIES 2>&1 | tee "$OUT/ab-b.txt"
}
exit 0
