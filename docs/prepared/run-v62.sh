#!/bin/bash
# Device calls for docs/perf.md "v62" (the update loads V's parts; v62t also works on its tile transposed).
# Nothing to prepare and nothing to carry: the script patches the device's copy of the working tree itself
# (v62.diff, then v62t.diff on top) and keeps the entries under /tmp/v62.
#   bash docs/prepared/run-v62.sh        checks, then the 12 benchmark cases: committed entry against v62t
#   bash docs/prepared/run-v62.sh tune   v62 (without the transposed tile), v62t's register cap (3 programs
#                                        a multiprocessor at 168, 4 at 128), 64-row steps; n512 and n1024
#   bash docs/prepared/run-v62.sh split  v60 (the far update beside the split panels), alone and on v62t
#                                        (v60-62t.diff), on the split-panel cases
# Each step has its own time limit and writes its log under $OUT, so a step cut short loses only itself; the most
# important come first (at most 560 s of limits a mode).
set -u
V=/tmp/v62
mkdir -p "$V"
apply() { git apply "$1" 2>/dev/null || patch -p1 --quiet < "$1"; }
cp submission.py "$V/head.py"
apply docs/prepared/v62.diff && cp submission.py "$V/v62a.py"
apply docs/prepared/v62t.diff && cp submission.py "$V/v62t.py"
cmp -s "$V/head.py" "$V/v62t.py" && { echo "the patches did not apply"; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader
if [ "${1:-}" = split ]; then
    mkdir -p "$V/h" && cp "$V/head.py" "$V/h/submission.py"
    (cd "$V/h" && patch -p1 --quiet < "$OLDPWD/docs/prepared/v60.diff") && cp "$V/h/submission.py" "$V/v60.py"
    apply docs/prepared/v60-62t.diff && cp submission.py "$V/v60_62t.py"
    cmp -s "$V/v60_62t.py" "$V/v62t.py" && { echo "v60-62t.diff did not apply"; exit 1; }
    timeout 150 python tests/gpu/race_check.py 2048:8:dense,2048:8:rowscale,4096:2:mixed,1100:6:rankdef,3000:1:rankdef \
        "$V/v60.py" "$V/v60_62t.py" --repeats 3 --checks-only 2>&1 | tee "$OUT/race-split.txt"
    timeout 330 python tests/gpu/ab_bench.py 2048:8:dense,4096:2:dense,1100:6:dense "$V/head.py" "$V/v62t.py" \
        "$V/v60.py" "$V/v60_62t.py" 2>&1 | tee "$OUT/ab-split.txt"
    exit 0
fi
if [ "${1:-}" = tune ]; then
    # One constant each (offline, Triton 3.6, instructions of the update's row loop per 32 rows): the register
    # cap at 152 (no spill, still 3 programs a multiprocessor) or 128 (4 programs; 16 bytes of stack outside
    # the loop, which grows 371 -> 393); 64-row steps: v62 320 (its main product on HGMMA, 5 spill
    # instructions in the loop), v62t 353 (48 bytes of stack).
    vary() {  # vary ENTRY NAME 'CONSTANT = OLD' 'CONSTANT = NEW'
        sed "s/^$3/$4/" "$V/$1.py" > "$V/$2.py"
        grep -q "^$4" "$V/$2.py" || { echo "no '$3' in $1.py"; exit 1; }
    }
    vary v62t v62t_r152 'UPDATE_MAX_REGISTERS = 168' 'UPDATE_MAX_REGISTERS = 152'
    vary v62t v62t_r128 'UPDATE_MAX_REGISTERS = 168' 'UPDATE_MAX_REGISTERS = 128'
    vary v62a v62a_rows64 'TRAILING_TILE_ROWS = 32' 'TRAILING_TILE_ROWS = 64'
    vary v62t v62t_rows64 'TRAILING_TILE_ROWS = 32' 'TRAILING_TILE_ROWS = 64'
    timeout 120 python tests/gpu/race_check.py 100:8:rowscale,352:40:mixed,512:64:rowscale,1024:8:nearrank \
        "$V/v62a.py" "$V/v62t_r128.py" "$V/v62a_rows64.py" "$V/v62t_rows64.py" --repeats 1 --checks-only 2>&1 \
        | tee "$OUT/race-tune.txt"
    timeout 400 python tests/gpu/ab_bench.py 512:640:dense,1024:60:dense "$V/v62a.py" "$V/v62t.py" "$V/v62t_r152.py" \
        "$V/v62t_r128.py" "$V/v62a_rows64.py" "$V/v62t_rows64.py" 2>&1 | tee "$OUT/ab-tune.txt"
    exit 0
fi
# 1. The GPU tests, as patched (v62t): the panel's V parts bit for bit with and without the shuffle, every
#    panel path's margins below a tenth of the gates, the prepared launch paths.
timeout 120 python -m pytest -q -p no:cacheprovider tests/gpu/test_panel_shuffle.py tests/gpu/test_prepared_paths.py \
    2>&1 | tail -5 | tee "$OUT/tests.txt"
# 2. Every kind of path, outputs checked (margins printed): tf32 parts (n100), bf16 narrow and wide panels,
#    flags, chunked rows, split panels, n % 16 != 0.
timeout 100 python tests/gpu/race_check.py \
    100:8:rowscale,176:40:band,512:64:rowscale,600:10:rankdef,1100:3:dense,2048:2:mixed \
    "$V/v62t.py" --repeats 2 --checks-only 2>&1 | tee "$OUT/race.txt"
# 3. The 12 benchmark cases, the committed entry against v62t (medians of 35 calls each).
B=32:20:dense,176:40:dense,352:40:dense,512:640:dense,1024:60:dense,2048:8:dense,4096:2:dense,512:640:mixed
B=$B,1024:60:mixed,512:640:rankdef,512:640:clustered,1024:60:nearrank
timeout 280 python tests/gpu/ab_bench.py $B "$V/head.py" "$V/v62t.py" 2>&1 | tee "$OUT/ab.txt"
# 4. Where the time goes now (kernel times per call), if the limit leaves room.
timeout 60 python tests/gpu/kernel_profile.py "$V/head.py" "$V/v62t.py" --shapes 640:512 2>&1 | tee "$OUT/profile.txt"
