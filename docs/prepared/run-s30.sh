#!/bin/bash
# Device calls of the thirtieth session (docs/perf.md "v69 and v70"): the entry (v66) against v69
# (docs/prepared/s30-v69.diff: a split panel in one launch whose programs meet at every reflector through atomic
# sums and a count), v70 (s30-v70.diff: the same launch, the programs exchanging tagged sums instead) and v70 at
# slices of 128 rows (s128).  Nothing to carry.  Logs under $OUT.  (As run, v70 was the working tree's entry and
# v66 rebuilt by reversing the diff: the same files.)
#   bash docs/prepared/run-s30.sh 1     # GPU tests of split panels (on v69 as run); ab_bench n4096 b2, n2048 b8
#                                       # of v66, v69
#   bash docs/prepared/run-s30.sh 2     # the same of v66, v70, s128 (tests on v70 as run); repeated calls of v70
#                                       # bit for bit
#   bash docs/prepared/run-s30.sh 3     # GPU tests of split panels and of the prepared paths on the entry
#   bash docs/prepared/run-s30.sh 4     # prepared, not run: the evaluator's means on the three n1024 benchmarks
#                                       # (docs/prepared/eval-n1024.yml) of the entry, then of g1024 (the entry with
#                                       # every input whose matrices do not outnumber the multiprocessors graphed:
#                                       # n1024 b60's chain replayed as a CUDA graph, copies in and out added, no
#                                       # launches from Python), then the entry again
set -u
STEPS=${1:-1}
V=/tmp/s30
mkdir -p $V
cp submission.py $V/v66.py
for v in v69 v70; do
    cp submission.py $V/$v.py && patch -s $V/$v.py docs/prepared/s30-$v.diff \
        || { echo "run-s30.sh: s30-$v.diff does not apply"; exit 1; }
done
sed 's/^SPLIT_PANEL_SLICE = 256 /SPLIT_PANEL_SLICE = 128 /' $V/v70.py > $V/s128.py
cmp -s $V/s128.py $V/v70.py && { echo "run-s30.sh: s128.py is unchanged"; exit 1; }
GRAPHED='_latency_bound(A) or A.shape\[-1\] > MAX_REGISTER_PANEL_ROWS)$'
sed "s/$GRAPHED/_latency_bound(A) or A.shape[-1] > MAX_REGISTER_PANEL_ROWS\n                                        or A.shape[0] <= _multiprocessors(A.device))/" \
    submission.py > $V/g1024.py
cmp -s $V/g1024.py $V/v66.py && { echo "run-s30.sh: g1024.py is unchanged"; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader
[[ $STEPS == *3* ]] && timeout 300 python -m pytest -q tests/gpu/test_split_panels.py tests/gpu/test_prepared_paths.py \
    2>&1 | tail -15 | tee "$OUT/test-gpu.txt"
[[ $STEPS == *1* ]] && {
    timeout 300 python tests/gpu/ab_bench.py 4096:2:dense,2048:8:dense $V/v66.py $V/v69.py 2>&1 \
        | tee "$OUT/ab-v69.txt"
}
[[ $STEPS == *2* ]] && {
    timeout 330 python tests/gpu/ab_bench.py 4096:2:dense,2048:8:dense $V/v66.py $V/v70.py $V/s128.py 2>&1 \
        | tee "$OUT/ab-v70.txt"
    timeout 60 python tests/gpu/race_check.py 2048:8:mixed,1100:2:rowscale $V/v70.py --repeats 4 2>&1 \
        | tee "$OUT/race-v70.txt"
}
[[ $STEPS == *4* ]] && for entry in $V/v66.py $V/g1024.py $V/v66.py; do
    timeout 180 python -m eval benchmark --submission $entry --specs docs/prepared/eval-n1024.yml 2>&1 \
        | grep -E "^pass|^FAIL|above the median|^score" | tee -a "$OUT/eval-n1024.txt"
done
exit 0
