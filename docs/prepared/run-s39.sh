#!/bin/bash
# Device calls of the thirty-ninth session (run-s38.sh folded in).  Nothing to carry.  Logs under $OUT.
# The entry is v79 since this session's first call (a and b ran then with v79 and v80 as patches on 7d1700c).
#   bash docs/prepared/run-s39.sh a   # v80 (s39-v80.diff: a register panel held in tiles of an eighth of its power of
#                                     # 2, fewer padding rows) against the entry: ab_bench on n1024 b60 and n512 b640,
#                                     # then the shuffle's bit-identity tests on the entry and v80
#   bash docs/prepared/run-s39.sh ab  # and the rest of the shapes (n2048 b8, n4096 b2, n352 b40, n176 b40)
#   bash docs/prepared/run-s39.sh d   # v80's GPU tests: the bit-identity of the two ways to take column j with its
#                                     # failures' tracebacks (session 39's first call: 2 of its multi-tile cases
#                                     # failed), then every panel path, the prepared chains and the split panels
#   bash docs/prepared/run-s39.sh v   # v81 (v80 + s39-v81.diff: a latency-bound input's next panel applies the panel
#                                     # before it to its own columns, and the rest of that update runs beside it)
#                                     # against the entry and v80 on the latency-bound shapes, then its race check
#   bash docs/prepared/run-s39.sh 1   # on an H200: the evaluator's score of v80 (run-s32.sh 1 with v80 as the
#                                     # submission, about 270 s)
#   bash docs/prepared/run-s39.sh p   # where the latency-bound inputs' time goes: the entry's kernels, each alone
#                                     # (PDL off) and in the chain, n176 b40 and n352 b40 (about 40 s)
# Every entry's kernels are compiled first, in parallel processes (Triton's cache then serves ab_bench).
# VARIANTS="v80 v81" adds v81 to a and b.
set -u
STEPS=${1:-a}
LIMIT=${LIMIT:-560}  # seconds the whole call may take
V=/tmp/s39
mkdir -p $V
cp submission.py $V/entry.py
cp tests/gpu/test_panel_shuffle.py tests/test_kernel_sass.py $V/
previous=$V/entry.py
for d in s39-v80 s39-v81; do
    v=${d#*-}
    cp $previous $V/$v.py && patch -s $V/$v.py docs/prepared/$d.diff || { echo "run-s39.sh: $d.diff does not apply"; exit 1; }
    previous=$V/$v.py
done
ENTRIES="$V/entry.py"
for v in ${VARIANTS:-v80}; do ENTRIES="$ENTRIES $V/$v.py"; done
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
    warm 1024:60:dense,512:640:dense $ENTRIES
    timeout $(( LIMIT - SECONDS - 200 )) python tests/gpu/ab_bench.py 1024:60:dense $ENTRIES 2>&1 | tee "$OUT/ab-a.txt"
    (( SECONDS < LIMIT - 100 )) && timeout $(( LIMIT - SECONDS - 60 )) python tests/gpu/ab_bench.py 512:640:dense \
        $ENTRIES 2>&1 | tee -a "$OUT/ab-a.txt"
    for v in entry v80; do
        (( SECONDS < LIMIT - 45 )) || break
        cp $V/$v.py submission.py
        [ $v = v80 ] && patch -s -p1 < docs/prepared/s39-v80-tests.diff
        timeout $((LIMIT - SECONDS - 5)) python -m pytest -q tests/gpu/test_panel_shuffle.py -k same_bits 2>&1 \
            | tail -3 | tee "$OUT/test-$v.txt"
        cp $V/test_panel_shuffle.py tests/gpu/test_panel_shuffle.py && cp $V/test_kernel_sass.py tests/test_kernel_sass.py
        cp $V/entry.py submission.py
    done
}
[[ $STEPS == *d* ]] && {
    cp $V/v80.py submission.py && patch -s -p1 < docs/prepared/s39-v80-tests.diff
    timeout 120 python -m pytest -q -x --tb=short tests/gpu/test_panel_shuffle.py -k same_bits 2>&1 | tail -30 \
        | tee "$OUT/test-v80-bits.txt"
    timeout 170 python -m pytest -q --tb=line tests/gpu/test_panel_shuffle.py \
        tests/gpu/test_prepared_paths.py tests/gpu/test_split_panels.py -k "not same_bits" 2>&1 | tail -15 \
        | tee "$OUT/test-v80-gpu.txt"
    cp $V/test_panel_shuffle.py tests/gpu/test_panel_shuffle.py && cp $V/test_kernel_sass.py tests/test_kernel_sass.py
    cp $V/entry.py submission.py
}
[[ $STEPS == *v* ]] && (( SECONDS < LIMIT - 120 )) && {
    LB=176:40:dense,352:40:dense,512:16:dense,1024:4:dense
    warm $LB $V/entry.py $V/v80.py $V/v81.py
    timeout $(( LIMIT - SECONDS - 40 )) python tests/gpu/ab_bench.py $LB $V/entry.py $V/v80.py $V/v81.py 2>&1 \
        | tee "$OUT/ab-v81.txt"
    (( SECONDS < LIMIT - 30 )) && timeout $(( LIMIT - SECONDS - 5 )) python tests/gpu/race_check.py \
        176:40:rowscale,352:40:mixed,1024:4:rankdef $V/v81.py --repeats 8 2>&1 | tail -6 | tee "$OUT/race-v81.txt"
}
[[ $STEPS == *1* ]] && {
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
        cp $V/v80.py submission.py
        bash docs/prepared/run-s32.sh 1
        cp $V/entry.py submission.py
    else echo "run-s39.sh: step 1 wants an H200"; fi
}
[[ $STEPS == *p* ]] && (( SECONDS < LIMIT - 45 )) && {
    for mode in --serial ""; do
        timeout $(( LIMIT - SECONDS - 5 )) python tests/gpu/kernel_profile.py $V/entry.py $mode --shapes 40:176,40:352 \
            2>&1 | tee -a "$OUT/profile-latency.txt"
    done
}
[[ $STEPS == *b* ]] && (( SECONDS < LIMIT - 150 )) && {
    warm 2048:8:dense,4096:2:dense,352:40:dense,176:40:dense $ENTRIES
    timeout $((LIMIT - SECONDS - 10)) python tests/gpu/ab_bench.py 2048:8:dense,4096:2:dense,352:40:dense,176:40:dense \
        $ENTRIES 2>&1 | tee "$OUT/ab-b.txt"
}
exit 0
