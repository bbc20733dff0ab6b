#!/bin/bash
# Device calls of the fortieth session.  Nothing to carry.  Logs under $OUT.  The entry is submission.py
# (be1d3c1's); v81 with its fix (s40-v81.diff: the update's steps in the panel never as tall as the panel's
# tiles, _prev_tile_rows) is a patch on it.
#   bash docs/prepared/run-s40.sh v   # v81 against the entry on the latency-bound shapes, then its race check
#   bash docs/prepared/run-s40.sh t   # v81's GPU tests (s40-v81-tests.diff): the shuffle's, PREV's included,
#                                     # and the prepared paths'
#   bash docs/prepared/run-s40.sh s   # the entry's split panels on the GPU (test_split_panels.py, not run there
#                                     # since v80 and be1d3c1's _panel_offsets)
#   bash docs/prepared/run-s40.sh 1   # on an H200: the evaluator's score of the entry (run-s32.sh 1, about 270 s)
#   bash docs/prepared/run-s40.sh q   # v81's kernels each alone (PDL off) and in the chain, n176 b40 and n352 b40:
#                                     # which of its two row passes (the panel's own, the update beside) is long
#   bash docs/prepared/run-s40.sh p   # the same for the entry (run-s39.sh's p)
#   bash docs/prepared/run-s40.sh w   # lat32: the latency-bound inputs with 32-column panels (NARROW_PANEL_WIDTH,
#                                     # chosen at 16 in v4 and not re-measured since) against the entry
# run-s39.sh is folded in (its calls are recorded in docs/perf.md at their commits; git show be1d3c1:docs/prepared/
# run-s39.sh).
# (The session's call `vt` ran the same code as this v and t with v81 as submission.py and the entry beside it.)
set -u
STEPS=${1:-v}
LIMIT=${LIMIT:-560}  # seconds the whole call may take
V=/tmp/s40
mkdir -p $V
cp submission.py $V/entry.py
cp tests/gpu/test_panel_shuffle.py tests/gpu/test_prepared_paths.py tests/test_kernel_sass.py \
    tests/test_submission.py tests/gpu/kernel_sass.py $V/
sed 's/^NARROW_PANEL_WIDTH = 16 /NARROW_PANEL_WIDTH = 32 /' submission.py > $V/lat32.py
cmp -s submission.py $V/lat32.py && { echo "run-s40.sh: NARROW_PANEL_WIDTH = 16 not found"; exit 1; }
cp submission.py $V/v81.py && patch -s $V/v81.py docs/prepared/s40-v81.diff \
    || { echo "run-s40.sh: s40-v81.diff does not apply"; exit 1; }
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
[[ $STEPS == *1* ]] && {
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash docs/prepared/run-s32.sh 1
    else echo "run-s40.sh: step 1 wants an H200"; fi
}
[[ $STEPS == *s* ]] && (( SECONDS < LIMIT - 60 )) && {
    timeout $(( LIMIT - SECONDS - 10 )) python -m pytest -q --tb=short tests/gpu/test_split_panels.py 2>&1 \
        | tail -15 | tee "$OUT/test-split.txt"
}
[[ $STEPS == *v* ]] && (( SECONDS < LIMIT - 120 )) && {
    LB=176:40:dense,352:40:dense,512:16:dense,1024:4:dense
    warm $LB $V/entry.py $V/v81.py
    timeout $(( LIMIT - SECONDS - 40 )) python tests/gpu/ab_bench.py $LB $V/entry.py $V/v81.py 2>&1 \
        | tee "$OUT/ab-v81.txt"
    (( SECONDS < LIMIT - 30 )) && timeout $(( LIMIT - SECONDS - 5 )) python tests/gpu/race_check.py \
        176:40:rowscale,352:40:mixed,96:40:dense $V/v81.py --repeats 8 2>&1 | tail -6 | tee "$OUT/race-v81.txt"
}
[[ $STEPS == *t* ]] && (( SECONDS < LIMIT - 60 )) && {
    cp $V/v81.py submission.py && patch -s -p1 < docs/prepared/s40-v81-tests.diff
    timeout $(( LIMIT - SECONDS - 10 )) python -m pytest -q --tb=short tests/gpu/test_panel_shuffle.py \
        tests/gpu/test_prepared_paths.py 2>&1 | tail -15 | tee "$OUT/test-v81.txt"
    cp $V/test_panel_shuffle.py $V/test_prepared_paths.py $V/kernel_sass.py tests/gpu/
    cp $V/test_kernel_sass.py $V/test_submission.py tests/
    cp $V/entry.py submission.py
}
profile() {  # profile ENTRY LOG: its kernels each alone (PDL off), then in the chain, n176 b40 and n352 b40
    for mode in --serial ""; do
        timeout $(( LIMIT - SECONDS - 5 )) python tests/gpu/kernel_profile.py "$1" $mode --shapes 40:176,40:352 \
            2>&1 | tee -a "$OUT/$2"
    done
}
[[ $STEPS == *w* ]] && (( SECONDS < LIMIT - 120 )) && {
    LB=96:40:dense,176:40:dense,352:40:dense,512:16:dense,1024:4:dense
    warm $LB $V/entry.py $V/lat32.py
    timeout $(( LIMIT - SECONDS - 10 )) python tests/gpu/ab_bench.py $LB $V/entry.py $V/lat32.py 2>&1 \
        | tee "$OUT/ab-lat32.txt"
}
[[ $STEPS == *q* ]] && (( SECONDS < LIMIT - 45 )) && profile $V/v81.py profile-v81.txt
[[ $STEPS == *p* ]] && (( SECONDS < LIMIT - 45 )) && profile $V/entry.py profile-latency.txt
exit 0
