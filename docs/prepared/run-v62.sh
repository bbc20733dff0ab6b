#!/bin/bash
# One device call for docs/perf.md "v62 measured" and "v60 on v62": the update loads V's parts, split once by
# the panel (v62.diff, with its tests), and the far update runs beside the next split panel (v60-on-v62.diff,
# applied after it; V's parts in three buffers where panels are split).  Nothing to prepare and nothing to carry:
# `bash docs/prepared/run-v62.sh` patches the device's copy of the working tree itself and keeps the three
# entries under /tmp/v62.  Each step has its own time limit and writes its log under $OUT, so a step cut short
# loses only itself; the most important come first (at most 470 s of limits).  A machine taken back mid-call
# returns nothing, so the steps can also run one call each: `bash docs/prepared/run-v62.sh 1` (then 23, then 4).
set -u
STEPS=${1:-1234}
source docs/prepared/prepare-v62.sh
nvidia-smi --query-gpu=name --format=csv,noheader
# 1. The 12 benchmark cases, the committed entry against v62 (medians of 35 calls each;
#    every output checked first).
#    The cases where v62 should move most come first, so that a call cut short still decides.
[[ $STEPS == *1* ]] && {
B=1024:60:dense,512:640:dense,4096:2:dense,2048:8:dense,352:40:dense,176:40:dense,32:20:dense,512:640:mixed
B=$B,1024:60:mixed,512:640:rankdef,512:640:clustered,1024:60:nearrank
timeout 200 python tests/gpu/ab_bench.py $B "$V/head.py" "$V/v62.py" 2>&1 | tee "$OUT/ab.txt"
}
# 2. Every kind of path, outputs checked (margins printed): tf32 parts (n100), bf16 narrow and wide panels,
#    flags, chunked rows, split panels, n % 16 != 0.
[[ $STEPS == *2* ]] && timeout 60 python tests/gpu/race_check.py \
    100:8:rowscale,176:40:band,512:64:rowscale,600:10:rankdef,1100:3:dense,2048:2:mixed,4096:1:rowscale \
    "$V/v62.py" --repeats 2 --checks-only 2>&1 | tee "$OUT/race.txt"
# 3. The GPU tests, as patched by v62: the panel's bits and V's parts the same with and without the shuffle,
#    every panel path's margins below a tenth of the gates, the prepared launch paths.
[[ $STEPS == *3* ]] && timeout 90 python -m pytest -q -p no:cacheprovider tests/gpu/test_panel_shuffle.py tests/gpu/test_prepared_paths.py \
    2>&1 | tail -8 | tee "$OUT/tests.txt"
# 4. v60 on v62 where panels are split: outputs checked (a race of its far update beside the split panel
#    would show as a failed check), then timed.
[[ $STEPS == *4* ]] && {
timeout 40 python tests/gpu/race_check.py 2048:8:dense,2048:8:rowscale,4096:2:mixed,1100:6:rankdef,3000:1:rankdef \
    "$V/v60.py" --repeats 3 --checks-only 2>&1 | tee "$OUT/race-v60.txt"
timeout 100 python tests/gpu/ab_bench.py 2048:8:dense,4096:2:dense,1100:6:dense "$V/v62.py" "$V/v60.py" \
    2>&1 | tee "$OUT/ab-v60.txt"
}
