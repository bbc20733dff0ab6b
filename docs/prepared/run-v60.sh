#!/bin/bash
# The first device call of the session after the twenty-third (docs/perf.md "v60").  Prepare on this machine
# first, then run `bash docs/prepared/run-v60.sh` with carry ["scratch"]:
#   mkdir -p scratch && cp submission.py scratch/head24.py && git apply docs/prepared/v60.diff &&
#   cp submission.py scratch/v60.py && git checkout submission.py &&
#   python3 docs/prepared/make-variants.py
# Each step has its own time limit and writes its log under $OUT, so a step cut short loses only itself; the
# most important come first.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 python tests/gpu/race_check.py 2048:8:dense,2048:8:rowscale,4096:2:mixed,1100:6:rankdef,3000:1:rankdef \
    scratch/v60.py scratch/v60w1.py --repeats 3 --checks-only 2>&1 | tee "$OUT/race.txt"
timeout 210 python tests/gpu/ab_bench.py 2048:8:dense,4096:2:dense,1100:6:dense scratch/head24.py scratch/v60.py \
    scratch/v60w1.py 2>&1 | tee "$OUT/ab.txt"
timeout 90 python tests/gpu/kernel_profile.py scratch/head24.py scratch/v60.py --shapes 2:4096 2>&1 | tee "$OUT/profile.txt"
# The split step's own variants (make-variants.py): its slices' height, last tuned before v58 shortened each
# split step (64 rows kept in v13, 1-3 % ahead), and v61 (alpha and sigma by scalar loads).
timeout 150 python tests/gpu/ab_bench.py 2048:8:dense,4096:2:dense scratch/head24.py scratch/slice32.py \
    scratch/slice128.py scratch/v61.py 2>&1 | tee "$OUT/split.txt"
