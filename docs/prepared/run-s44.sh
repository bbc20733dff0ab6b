#!/bin/bash
# Device calls of the forty-fourth session.  Nothing to carry.  Logs under $OUT.  submission.py is v84 (1c535db's
# entry + s44-v84.diff: a directly launched small call's outputs from a pool, _OutputPool); entry.py is the diff
# taken out again, entry2.py the same file, last (the run's drift).
#   bash docs/prepared/run-s44.sh t   # the GPU tests of the prepared paths on v84 (with its pool check; > 270 s cold)
#   bash docs/prepared/run-s44.sh b   # n32 b20 back to back as the contest times them (host_bench.py), entry / v84 /
#                                     # entry2 / v84 again; the host's time of one call (host_pieces.py: whole call only)
#   bash docs/prepared/run-s44.sh e   # the evaluator's compare of entry, v84, entry2 on eval-n32.yml
#   bash docs/prepared/run-s44.sh 1   # on an H200 only: the evaluator's score of submission.py (run-score.sh)
#   bash docs/prepared/run-s44.sh s   # ab_bench of n2048 b8 and n4096 b2: the entry against sp64 (s44-sp64.diff on
#                                     # the entry: split inputs in panels of 64 columns, register panels from 512
#                                     # rows on) and sp64w2 (sp64 + s44-sp64w2.diff: two update programs a
#                                     # multiprocessor where panels are split, as NB 64's shared memory allows)
# Steps run in the order t, b, s, 1, e, each while the call has time left for it.
set -u
STEPS=${1:-tbe}
LIMIT=${LIMIT:-560}  # seconds the whole call may take
V=/tmp/s44
mkdir -p $V
cp submission.py $V/v84.py
cp submission.py $V/v84b.py
cp submission.py $V/entry.py && patch -R -s $V/entry.py docs/prepared/s44-v84.diff \
    || { echo "run-s44.sh: s44-v84.diff does not come out of submission.py"; exit 1; }
cp $V/entry.py $V/entry2.py
cp $V/entry.py $V/sp64.py && patch -s $V/sp64.py docs/prepared/s44-sp64.diff \
    || { echo "run-s44.sh: s44-sp64.diff does not apply"; exit 1; }
cp $V/sp64.py $V/sp64w2.py && patch -s $V/sp64w2.py docs/prepared/s44-sp64w2.diff \
    || { echo "run-s44.sh: s44-sp64w2.diff does not apply"; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
left() { echo $(( LIMIT - SECONDS )); }
[[ $STEPS == *t* ]] && (( $(left) > 90 )) && {
    timeout $(( $(left) - 10 )) python -m pytest -q --tb=short tests/gpu/test_prepared_paths.py 2>&1 \
        | tail -15 | tee "$OUT/test-v84.txt"
}
[[ $STEPS == *b* ]] && (( $(left) > 90 )) && {
    timeout $(( $(left) - 10 )) python tests/gpu/host_bench.py $V/entry.py $V/v84.py $V/entry2.py $V/v84b.py \
        --cases 20:32 2>&1 | tee "$OUT/host-bench.txt"
    timeout $(( $(left) - 10 )) python docs/prepared/host_pieces.py 20:32 $V/entry.py $V/v84.py $V/entry2.py \
        2>&1 | tee "$OUT/host-pieces.txt"
}
[[ $STEPS == *s* ]] && (( $(left) > 150 )) && {
    timeout $(( $(left) - 10 )) python tests/gpu/ab_bench.py 2048:8:dense,4096:2:dense $V/entry.py $V/sp64.py \
        $V/sp64w2.py 2>&1 | tee "$OUT/ab-split.txt"
}
[[ $STEPS == *1* ]] && {
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
        (( $(left) > 280 )) && bash docs/prepared/run-score.sh || echo "run-s44.sh: too little time left for the score"
    else echo "run-s44.sh: step 1 wants an H200"
    fi
}
[[ $STEPS == *e* ]] && (( $(left) > 120 )) && {
    timeout $(( $(left) - 10 )) python -m eval compare $V/entry.py $V/v84.py $V/entry2.py \
        --specs docs/prepared/eval-n32.yml 2>&1 | tail -16 | tee "$OUT/compare-n32.txt"
}
exit 0
