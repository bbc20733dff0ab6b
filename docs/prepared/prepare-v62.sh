# Sourced by run-v62.sh and run-ncu.sh on the device: the committed entry, v62 (docs/prepared/v62.diff, applied to
# the device's copy of the working tree, tests included) and v60 on v62 (v60-on-v62.diff) as three files in $V.
V=/tmp/v62
mkdir -p "$V"
cp submission.py "$V/head.py"
{ git apply docs/prepared/v62.diff 2>/dev/null || patch -p1 --quiet < docs/prepared/v62.diff; } && cp submission.py "$V/v62.py"
cmp -s "$V/head.py" "$V/v62.py" && { echo "the patch did not apply"; exit 1; }
cp "$V/v62.py" "$V/v60.py" && patch --quiet "$V/v60.py" < docs/prepared/v60-on-v62.diff
