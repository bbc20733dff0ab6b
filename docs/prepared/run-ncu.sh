#!/bin/bash
# One device call for docs/perf.md "What bounds the update": Nsight Compute's view of the update's launches of
# n512 b640 and n1024 b60 in the committed entry: issue and stall reasons per warp, memory throughput,
# occupancy.  Nothing to carry:
#   bash docs/prepared/run-ncu.sh
# Each profile is of four update launches after the first 30 (ncu counts only the launches its name filter
# keeps; the kernels and their shapes are the same in every call); the profiler serialises the launches (no
# overlap, so flags wait for nothing) and replays each once per section group, restoring memory between passes.
set -u
nvidia-smi --query-gpu=name --format=csv,noheader
SECTIONS="--section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats"
SECTIONS="$SECTIONS --section WarpStateStats --section MemoryWorkloadAnalysis"
for shape in "640 512" "60 1024"; do
    log="$OUT/ncu-n${shape#* }.txt"
    timeout 200 ncu --clock-control none --kernel-name regex:_panel_update --launch-skip 30 --launch-count 4 \
        $SECTIONS python docs/prepared/ncu_update.py submission.py $shape > "$log" 2>&1
    echo "== b${shape% *} n${shape#* } (exit $?)"
    grep -E "Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Stall|Grid Size|checked|FAILED" "$log" | head -40
done
