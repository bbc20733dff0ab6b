#!/bin/bash
# One device call for docs/perf.md "v62 measured": the update loads V's parts, split once by the panel, and only
# the split panel's last launch carries the code that stores them (STORE_V).  Nothing to prepare and nothing to
# carry: `bash docs/prepared/run-v62.sh` patches the device's copy of the working tree itself (v62.diff, which
# also carries its tests) and keeps the two entries under /tmp/v62.
# Each step has its own time limit and writes its log under $OUT, so a step cut short loses only itself; the most
# important come first (at most 560 s of limits).
set -u
V=/tmp/v62
mkdir -p "$V"
cp submission.py "$V/head.py"
{ git apply docs/prepared/v62.diff 2>/dev/null || patch -p1 --quiet < docs/prepared/v62.diff; } && cp submission.py "$V/v62.py"
cmp -s "$V/head.py" "$V/v62.py" && { echo "the patch did not apply"; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader
# 1. The GPU tests, as patched: the panel's bits and V's parts the same with and without the shuffle (the first
#    version of the patch failed this: its parts' store took the marks only with SHUFFLE), every panel path's
#    margins below a tenth of the gates, the prepared launch paths.
timeout 120 python -m pytest -q -p no:cacheprovider tests/gpu/test_panel_shuffle.py tests/gpu/test_prepared_paths.py \
    2>&1 | tail -8 | tee "$OUT/tests.txt"
# 2. Every kind of path, outputs checked (margins printed): tf32 parts (n100), bf16 narrow and wide panels,
#    flags, chunked rows, split panels, n % 16 != 0.
timeout 100 python tests/gpu/race_check.py \
    100:8:rowscale,176:40:band,512:64:rowscale,600:10:rankdef,1100:3:dense,2048:2:mixed,4096:1:rowscale \
    "$V/v62.py" --repeats 2 --checks-only 2>&1 | tee "$OUT/race.txt"
# 3. The 12 benchmark cases, the committed entry against v62 (medians of 35 calls each).
B=32:20:dense,176:40:dense,352:40:dense,512:640:dense,1024:60:dense,2048:8:dense,4096:2:dense,512:640:mixed
B=$B,1024:60:mixed,512:640:rankdef,512:640:clustered,1024:60:nearrank
timeout 280 python tests/gpu/ab_bench.py $B "$V/head.py" "$V/v62.py" 2>&1 | tee "$OUT/ab.txt"
# 4. Where the time goes now (kernel times per call), if the limit leaves room.
timeout 60 python tests/gpu/kernel_profile.py "$V/head.py" "$V/v62.py" --shapes 2:4096,60:1024 2>&1 | tee "$OUT/profile.txt"
