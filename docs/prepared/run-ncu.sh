#!/bin/bash
# Nsight Compute on an entry's update launches (docs/perf.md "What bounds the update", v63): per shape, two
# `_panel_update` launches after the first 30 of docs/prepared/ncu_update.py's three calls (with look-ahead, the
# second call's first far update and the narrow update after it).  The profiler runs each launch alone (flags wait
# for nothing) and replays it once per section group, restoring memory between passes.  SourceCounters samples
# each warp's stall at its SASS instruction; the source page lists them instruction by instruction.
#   bash docs/prepared/run-ncu.sh [ENTRY.py] ["BATCH N" ...]     (default: submission.py, "640 512" "60 1024")
# Per shape, under $OUT: the report (n<N>.ncu-rep), its details (ncu-n<N>.txt) and source page (n<N>-sass.csv).
set -u
ENTRY=${1:-submission.py}
shift $(( $# > 0 ? 1 : 0 ))
[[ $# -gt 0 ]] && SHAPES=("$@") || SHAPES=("640 512" "60 1024")
nvidia-smi --query-gpu=name --format=csv,noheader
SECTIONS="--section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats"
SECTIONS="$SECTIONS --section WarpStateStats --section MemoryWorkloadAnalysis --section SourceCounters"
for shape in "${SHAPES[@]}"; do
    n=${shape#* }
    timeout 150 ncu --clock-control none --kernel-name regex:_panel_update --launch-skip 30 --launch-count 2 \
        $SECTIONS -o "$OUT/n$n" python docs/prepared/ncu_update.py "$ENTRY" $shape > "$OUT/ncu-run-n$n.txt" 2>&1
    echo "== $ENTRY b${shape% *} n$n (exit $?)"; tail -3 "$OUT/ncu-run-n$n.txt"
    timeout 20 ncu --import "$OUT/n$n.ncu-rep" > "$OUT/ncu-n$n.txt" 2>&1
    grep -E "Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occ|No Eligible|Grid Size|Block Limit" \
        "$OUT/ncu-n$n.txt" | head -40
    timeout 20 ncu --import "$OUT/n$n.ncu-rep" --page source --print-source sass --csv > "$OUT/n$n-sass.csv" 2>&1
    echo "source page: $(wc -l < "$OUT/n$n-sass.csv") lines"
done
