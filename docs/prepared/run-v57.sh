#!/bin/bash
# The first device call of the session after the twenty-first (docs/perf.md "v57").  Prepare on this machine
# first, then run with carry ["scratch"]:
#   mkdir -p scratch && cp submission.py scratch/head22.py && git apply docs/prepared/v57-tsqr.patch &&
#   cp submission.py scratch/v57.py && git checkout submission.py tests/test_submission.py &&
#   sed 's/^TSQR_LEAF_ROWS = 256/TSQR_LEAF_ROWS = 128/' scratch/v57.py > scratch/v57l128.py &&
#   sed 's/^TSQR_LEAF_ROWS = 256/TSQR_LEAF_ROWS = 512/' scratch/v57.py > scratch/v57l512.py &&
#   sed 's/^NARROW_PANEL_WIDTH = 16/NARROW_PANEL_WIDTH = 32/' scratch/head22.py > scratch/nb32.py
# Each step has its own time limit (570 s in all) and writes its log under $OUT, so a step cut short loses only
# itself; the most important come first.
set -u
timeout 120 python tests/gpu/race_check.py 2048:8:dense,2048:8:rowscale,4096:2:dense,1100:6:mixed,3000:1:rankdef \
    scratch/v57.py --repeats 3 --checks-only 2>&1 | tee "$OUT/race.txt"
timeout 180 python tests/gpu/ab_bench.py 2048:8:dense,4096:2:dense,2048:8:mixed scratch/head22.py scratch/v57.py \
    scratch/v57l128.py scratch/v57l512.py 2>&1 | tee "$OUT/ab.txt"
timeout 110 python -m pytest -q tests/gpu/test_prepared_paths.py 2>&1 | tail -5 | tee "$OUT/prepared.txt"
timeout 90 python tests/gpu/call_spread.py 1024:60:nearrank submission.py 2>&1 | tee "$OUT/spread.txt"
# The latency-bound inputs' panel width, last measured in the first sessions (NB 16 then won by 8-10 %).
timeout 70 python tests/gpu/ab_bench.py 176:40:dense,352:40:dense scratch/head22.py scratch/nb32.py 2>&1 | tee "$OUT/nb32.txt"
