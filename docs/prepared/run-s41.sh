#!/bin/bash
# Device calls of the forty-first session.  Nothing to carry.  Logs under $OUT.  The entry is submission.py
# (f42e0d7's); v82 (s41-v82.diff: a prepared direct chain launched through the compiled kernel's run, the stream
# looked up once a call, no launch hooks; custom_kernel's key from A.shape) and v83 (v82 + s41-v83.diff: the
# small matrix's sums over rows in four chains, alpha and sigma from each thread's copy of column j) are patches
# on it.
#   bash docs/prepared/run-s41.sh h   # the host's time of an n32 b20 call, whole and in parts (host_pieces.py)
#   bash docs/prepared/run-s41.sh b   # n32 b20 and n176 b40 back to back as the contest times them (host_bench.py),
#                                     # and n32's GPU time alone (host_share.py: held)
#   bash docs/prepared/run-s41.sh e   # the evaluator's compare of entry, v82, v83, entry on eval-n32.yml
#   bash docs/prepared/run-s41.sh t   # v83's GPU tests of the prepared paths (s41-v82-tests.diff: the new key)
#   bash docs/prepared/run-s41.sh a   # ab_bench of entry and v83 on n512 b640 and n1024 b60 (direct chains of
#                                     # many launches: the new launch path must not be slower)
#   bash docs/prepared/run-s41.sh w   # lat32 against the entry (run-s40.sh w)
#   bash docs/prepared/run-s41.sh p   # where n512 b640's and n1024 b60's time goes, kernel by kernel, each kernel alone
#                                     # (PDL off) and in the chain (kernel_profile.py)
#   bash docs/prepared/run-s41.sh 1   # on an H200: the evaluator's score of submission.py (run-s32.sh 1); on
#                                     # another card: n2048 b8's and n4096 b2's kernels, each alone (PDL off)
set -u
STEPS=${1:-hbe}
LIMIT=${LIMIT:-560}  # seconds the whole call may take
V=/tmp/s41
mkdir -p $V
cp submission.py $V/entry.py
cp submission.py $V/entry2.py  # the entry again, last in the compare: the drift of the evaluator's run
cp tests/gpu/test_prepared_paths.py $V/
cp submission.py $V/v82.py && patch -s $V/v82.py docs/prepared/s41-v82.diff \
    || { echo "run-s41.sh: s41-v82.diff does not apply"; exit 1; }
cp $V/v82.py $V/v83.py && patch -s $V/v83.py docs/prepared/s41-v83.diff \
    || { echo "run-s41.sh: s41-v83.diff does not apply"; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
left() { echo $(( LIMIT - SECONDS )); }
[[ $STEPS == *1* ]] && {
    if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash docs/prepared/run-s32.sh 1
    else
        echo "run-s41.sh: step 1 wants an H200; the split inputs' kernels instead"
        timeout $(( $(left) - 5 )) python tests/gpu/kernel_profile.py submission.py --serial --shapes 8:2048,2:4096 \
            2>&1 | tee -a "$OUT/profile-split.txt"
    fi
}
[[ $STEPS == *h* ]] && (( $(left) > 60 )) && {
    timeout $(( $(left) - 10 )) python docs/prepared/host_pieces.py 20:32 $V/entry.py $V/v82.py $V/v83.py \
        $V/entry2.py 2>&1 | tee "$OUT/host-pieces.txt"
}
[[ $STEPS == *b* ]] && (( $(left) > 90 )) && {
    timeout $(( $(left) - 10 )) python tests/gpu/host_bench.py $V/entry.py $V/v82.py $V/v83.py $V/entry2.py \
        --cases 20:32 40:176 2>&1 | tee "$OUT/host-bench.txt"
    timeout $(( $(left) - 10 )) python tests/gpu/host_share.py 32:20:dense $V/entry.py $V/v83.py 2>&1 \
        | tee "$OUT/host-share.txt"
}
[[ $STEPS == *e* ]] && (( $(left) > 120 )) && {
    timeout $(( $(left) - 10 )) python -m eval compare $V/entry.py $V/v82.py $V/v83.py $V/entry2.py \
        --specs docs/prepared/eval-n32.yml 2>&1 | tail -16 | tee "$OUT/compare-n32.txt"
}
[[ $STEPS == *t* ]] && (( $(left) > 90 )) && {
    cp $V/v83.py submission.py && patch -s -p1 < docs/prepared/s41-v82-tests.diff
    timeout $(( $(left) - 10 )) python -m pytest -q --tb=short tests/gpu/test_prepared_paths.py 2>&1 \
        | tail -15 | tee "$OUT/test-v83.txt"
    cp $V/test_prepared_paths.py tests/gpu/
    cp $V/entry.py submission.py
}
[[ $STEPS == *a* ]] && (( $(left) > 150 )) && {
    timeout $(( $(left) - 10 )) python tests/gpu/ab_bench.py 512:640:dense,1024:60:dense $V/entry.py $V/v83.py \
        2>&1 | tee "$OUT/ab-v83.txt"
}
[[ $STEPS == *w* ]] && (( $(left) > 150 )) && LIMIT=$(left) bash docs/prepared/run-s40.sh w
[[ $STEPS == *p* ]] && (( $(left) > 60 )) && for mode in --serial ""; do
    timeout $(( $(left) - 5 )) python tests/gpu/kernel_profile.py submission.py $mode --shapes 640:512,60:1024 2>&1 \
        | tee -a "$OUT/profile-large.txt"
done
exit 0
