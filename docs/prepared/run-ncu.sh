#!/bin/bash
# One device call for docs/perf.md "What bounds the update": Nsight Compute's view of the update's launches of
# n512 b640 and n1024 b60, the committed entry against v62 (patched here from docs/prepared/v62.diff, as
# run-v62.sh does): issue and stall reasons per warp, memory throughput, occupancy.  Nothing to carry.
#   bash docs/prepared/run-ncu.sh
# Each profile is of four update launches after the first 30 (ncu counts only the launches its name filter
# keeps; the kernels and their shapes are the same in every call); the profiler serialises the launches (no
# overlap, so flags wait for nothing) and replays each once per section group, restoring memory between passes.
set -u
source docs/prepared/prepare-v62.sh
nvidia-smi --query-gpu=name --format=csv,noheader
SECTIONS="--section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats"
SECTIONS="$SECTIONS --section WarpStateStats --section MemoryWorkloadAnalysis"
for shape in "640 512" "60 1024"; do
    for e in head v62; do
        log="$OUT/ncu-$e-n${shape#* }.txt"
        timeout 140 ncu --clock-control none --kernel-name regex:_panel_update --launch-skip 30 --launch-count 4 \
            $SECTIONS python docs/prepared/ncu_update.py "$V/$e.py" $shape > "$log" 2>&1
        echo "== $e b${shape% *} n${shape#* } (exit $?)"
        grep -E "Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Stall|Grid Size|checked|FAILED" "$log" | head -40
    done
done
