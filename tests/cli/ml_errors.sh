#!/usr/bin/env bash
# Errors the ML commands (kmeans, knn, pca, linreg, logreg) share or that once passed
# silently: a communicator that cannot be made (bad HPML_ALGO_*) is one line and exit 1 on
# every rank, never an MPI_Abort; kmeans --predict with --out FILE.npy (which would write
# nothing) is a usage error; --init FILE reports one run in JSON as in text; a missing
# model file is named once; PCA of data whose squares overflow is an error, not zeros;
# a run whose outputs cannot all be written changes none of them; a library error does
# not repeat the command's name; --help states the -v default.
# Env (from tests/run.sh): HPML, MPIRUN, BUILD.
# hpml-test: timeout=240
set -u
: "${HPML:?}" "${MPIRUN:?}" "${BUILD:?}"
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
run() { # np args...: stdout/stderr in $tmp/out, $tmp/err, status in $rc
    local np=$1
    shift
    timeout -k 5 120 $MPIRUN -np "$np" "$HPML" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
}
one_line() { # what cmd pattern: exactly one "hpml cmd:" line on stderr, holding pattern
    [ "$(grep -c "^hpml $2:" "$tmp/err")" -eq 1 ] && grep -q -- "$3" "$tmp/err" ||
        bad "$1: expected one 'hpml $2: ...$3' line: $(head -4 "$tmp/err")"
    ! grep -qi "MPI_ABORT" "$tmp/err" || bad "$1: aborted the job"
}

$PY - "$tmp" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(0)
X = rng.normal(size=(40, 3))
np.save(d + "/X.npy", X)
np.save(d + "/y.npy", (X[:, 0] > 0).astype(np.int64))
np.save(d + "/t.npy", X @ [1.0, 2.0, 3.0])
np.save(d + "/big.npy", np.array([[1e300, 1.0], [-1e300, 2.0], [1e300, 3.0], [5.0, 4.0]]))
EOF

# A bad HPML_ALGO_ALLREDUCE: every ML command, 2 ranks.
for args in "kmeans -k 2" "knn -k 2" "pca -k 1" "linreg --target $tmp/t.npy" \
    "logreg --target $tmp/y.npy"; do
    cmd=${args%% *}
    # shellcheck disable=SC2086
    HPML_ALGO_ALLREDUCE=nosuch run 2 $args --data "$tmp/X.npy"
    [ $rc -eq 1 ] || bad "$cmd with a bad HPML_ALGO_ALLREDUCE: exit $rc, expected 1"
    one_line "$cmd with a bad HPML_ALGO_ALLREDUCE" "$cmd" "cannot create the communicator"
done

# kmeans: --predict writes no centroids, so --out FILE.npy is refused (it wrote nothing).
run 1 kmeans --data "$tmp/X.npy" -k 2 --out "$tmp/km"
[ $rc -eq 0 ] || bad "kmeans fit: exit $rc: $(head -3 "$tmp/err")"
run 2 kmeans --data "$tmp/X.npy" --predict "$tmp/km.centroids.npy" --out "$tmp/kp.npy"
[ $rc -eq 2 ] || bad "kmeans --predict --out FILE.npy: exit $rc, expected 2"
one_line "kmeans --predict --out FILE.npy" kmeans "writes no centroids"
run 2 kmeans --data "$tmp/X.npy" --predict "$tmp/km.centroids.npy" --out "$tmp/kp"
[ $rc -eq 0 ] && [ -f "$tmp/kp.labels.npy" ] || bad "kmeans --predict --out PREFIX: exit $rc"
# Given centroids make one run: JSON says so as the text does.
run 1 kmeans --data "$tmp/X.npy" --init "$tmp/km.centroids.npy" --n-init 5 --json
$PY -c "import json,sys; sys.exit(json.load(open('$tmp/out'))['n_init'] != 1)" ||
    bad "kmeans --init FILE --n-init 5: JSON n_init is not 1: $(cat "$tmp/out")"

# A missing model: the file named once, not "model file X: X: cannot open".
run 2 linreg --predict "$tmp/nomodel" --data "$tmp/X.npy"
[ $rc -eq 1 ] || bad "linreg --predict missing: exit $rc, expected 1"
one_line "linreg --predict missing" linreg "cannot open"
[ "$(grep -o "nomodel.coef.npy" "$tmp/err" | wc -l)" -eq 1 ] ||
    bad "linreg --predict missing: path repeated: $(cat "$tmp/err")"

# PCA whose covariance overflows: an error on every solver, not explained variances of 0.
for solver in full randomized; do
    run 2 pca --data "$tmp/big.npy" -k 1 --solver $solver
    [ $rc -eq 1 ] || bad "pca $solver overflow: exit $rc, expected 1: $(head -3 "$tmp/out")"
    one_line "pca $solver overflow" pca "overflows"
done

# Output sets: a run writes all of its files or none. One output of each command cannot
# be written (a directory in its place, or a folder that does not exist): exit 1, one line
# naming it, every old output byte for byte as it was, no temporaries left; the bad path
# is found before the computation (-v shows no progress past reading). Then the same run
# with good paths replaces every file, and a replaced file keeps its mode.
olds() { # files...: fill each with a line naming it
    local f
    for f; do printf 'old %s\n' "$f" >"$f"; done
}
kept() { # what files...: each still holds its old line, byte for byte; no temporary left
    local what=$1 f
    shift
    for f; do
        printf 'old %s\n' "$f" | cmp -s - "$f" || bad "$what: $f was changed"
    done
    [ -z "$(find "$tmp" -name '*.tmp*')" ] || bad "$what: left $(find "$tmp" -name '*.tmp*')"
}
fails_on() { # what cmd path: exit 1 and one line naming path
    [ $rc -eq 1 ] || bad "$1: exit $rc, expected 1: $(head -3 "$tmp/err")"
    one_line "$1" "$2" "$3"
}
load="import numpy as np, sys; [np.load(f) for f in sys.argv[1:]]" # every file is .npy
mkdir "$tmp/o"
o=$tmp/o
sv=$o/pa.singular_values.npy
P="$o/pa.components.npy $o/pa.explained_variance.npy $o/pa.explained_variance_ratio.npy"
P="$P $o/pa.mean.npy $o/pa.t.npy" # and $sv
# shellcheck disable=SC2086
olds $P
mkdir "$sv"
run 2 pca --data "$tmp/X.npy" -k 2 --out "$o/pa" --transform-out "$o/pa.t.npy" -v
fails_on "pca, 4th output a directory" pca "pa.singular_values.npy: is a directory"
grep -q "fitted" "$tmp/err" && bad "pca, 4th output a directory: found only after the fit"
# shellcheck disable=SC2086
kept "pca, 4th output a directory" $P
rmdir "$sv"
# shellcheck disable=SC2086
olds $P "$sv"
run 2 pca --data "$tmp/X.npy" -k 2 --out "$o/pa" --transform-out "$o/nodir/t.npy"
fails_on "pca, --transform-out in a missing folder" pca "nodir/t.npy: cannot create a file there"
# shellcheck disable=SC2086
kept "pca, --transform-out in a missing folder" $P "$sv"
chmod 600 "$o/pa.mean.npy"
run 2 pca --data "$tmp/X.npy" -k 2 --out "$o/pa" --transform-out "$o/pa.t.npy"
# shellcheck disable=SC2086
[ $rc -eq 0 ] && $PY -c "$load" $P "$sv" ||
    bad "pca with good outputs: exit $rc: $(head -3 "$tmp/err")"
[ "$(stat -c %a "$o/pa.mean.npy")" = 600 ] || bad "pca: a replaced file lost its mode"

L="$o/lr.pred.npy $o/lr.proba.npy $o/lr.coef.npy $o/lr.intercept.npy $o/lr.multinomial.npy"
# shellcheck disable=SC2086
olds $L
mkdir "$o/lr.classes.npy"
run 2 logreg --data "$tmp/X.npy" --target "$tmp/y.npy" --out "$o/lr" \
    --pred-out "$o/lr.pred.npy" --proba-out "$o/lr.proba.npy"
fails_on "logreg, classes a directory" logreg "lr.classes.npy: is a directory"
# shellcheck disable=SC2086
kept "logreg, classes a directory" $L
rmdir "$o/lr.classes.npy"
run 2 logreg --data "$tmp/X.npy" --target "$tmp/y.npy" --out "$o/lr" \
    --pred-out "$o/lr.pred.npy" --proba-out "$o/lr.pred.npy"
fails_on "logreg, one file for two outputs" logreg "lr.pred.npy is named for two outputs"
# shellcheck disable=SC2086
kept "logreg, one file for two outputs" $L
run 2 logreg --data "$tmp/X.npy" --target "$tmp/y.npy" --out "$o/lr" \
    --pred-out "$o/lr.pred.npy" --proba-out "$o/lr.proba.npy"
# shellcheck disable=SC2086
[ $rc -eq 0 ] && $PY -c "$load" $L "$o/lr.classes.npy" || bad "logreg with good outputs: exit $rc"
olds "$o/lr.pred.npy"
run 2 logreg --predict "$o/lr" --data "$tmp/X.npy" --pred-out "$o/lr.pred.npy" \
    --proba-out "$o/nodir/p.npy"
fails_on "logreg --predict, --proba-out in a missing folder" logreg "nodir/p.npy"
kept "logreg --predict, --proba-out in a missing folder" "$o/lr.pred.npy"

olds "$o/li.coef.npy" "$o/li.pred.npy"
mkdir "$o/li.intercept.npy"
run 2 linreg --data "$tmp/X.npy" --target "$tmp/t.npy" --out "$o/li" --pred-out "$o/li.pred.npy"
fails_on "linreg, intercept a directory" linreg "li.intercept.npy: is a directory"
kept "linreg, intercept a directory" "$o/li.coef.npy" "$o/li.pred.npy"
rmdir "$o/li.intercept.npy"

olds "$o/km.centroids.npy"
run 2 kmeans --data "$tmp/X.npy" -k 2 --out "$o/km" --labels "$o/nodir/l.csv"
fails_on "kmeans, --labels in a missing folder" kmeans "nodir/l.csv: cannot create a file there"
kept "kmeans, --labels in a missing folder" "$o/km.centroids.npy"
run 2 kmeans --data "$tmp/X.npy" -k 2 --out "$o/km" --labels "$o/km.l.csv"
[ $rc -eq 0 ] && $PY -c "$load" "$o/km.centroids.npy" && [ "$(head -1 "$o/km.l.csv")" = label ] &&
    [ "$(wc -l <"$o/km.l.csv")" -eq 41 ] || bad "kmeans with good outputs: exit $rc"

olds "$o/kn.indices.npy" "$o/kn.distances.npy"
mkdir "$o/kn.predictions.npy"
run 2 knn --data "$tmp/X.npy" -k 2 --labels "$tmp/y.npy" --out "$o/kn"
fails_on "knn, predictions a directory" knn "kn.predictions.npy: is a directory"
kept "knn, predictions a directory" "$o/kn.indices.npy" "$o/kn.distances.npy"

# The same file spelled two ways is still one file named for two outputs.
olds "$o/li.coef.npy" "$o/li.pred.npy"
run 2 linreg --data "$tmp/X.npy" --target "$tmp/t.npy" --out "$o/li" --pred-out "$o/./li.coef.npy"
fails_on "linreg, coef named twice" linreg "are the same file, named for two outputs"
kept "linreg, coef named twice" "$o/li.coef.npy" "$o/li.pred.npy"
# A pipe (or a device: /dev/null) is not replaced by a plain file.
mkfifo "$o/pipe.npy"
run 2 linreg --data "$tmp/X.npy" --target "$tmp/t.npy" --out "$o/li" --pred-out "$o/pipe.npy"
fails_on "linreg, --pred-out a pipe" linreg "pipe.npy: is not a regular file"
[ -p "$o/pipe.npy" ] || bad "linreg, --pred-out a pipe: the pipe was replaced"
rm -f "$o/pipe.npy"

# Failures after the checks, made by a rename() that fails for one name (LD_PRELOAD of
# tests/cli/fail_rename.c, built by `make tests`; one rank without a launcher): while a
# file is written (its temporary is renamed inside its folder), nothing is replaced;
# during the final renames, the files already replaced are named. Neither leaves a
# temporary behind.
shim=$BUILD/tests/cli/fail_rename.so
if [ -f "$shim" ]; then
    li="--data $tmp/X.npy --target $tmp/t.npy --out $o/li --pred-out $o/li.pred.npy"
    # A sanitizer build wants its runtime first; the shim only wraps rename().
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
    olds "$o/li.coef.npy" "$o/li.intercept.npy" "$o/li.pred.npy"
    # shellcheck disable=SC2086
    FAIL_RENAME=li.coef.npy.tmp LD_PRELOAD=$shim timeout 60 "$HPML" linreg $li \
        >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    fails_on "linreg, a write that fails" linreg "li.coef.npy: cannot write it: Input/output error"
    grep -q "npy\.tmp\." "$tmp/err" && bad "linreg, a write that fails: names a temporary: $(cat "$tmp/err")"
    kept "linreg, a write that fails" "$o/li.coef.npy" "$o/li.intercept.npy" "$o/li.pred.npy"
    # shellcheck disable=SC2086
    FAIL_RENAME_EXACT=$o/li.intercept.npy LD_PRELOAD=$shim timeout 60 "$HPML" linreg \
        $li >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    fails_on "linreg, a final rename that fails" linreg "li.intercept.npy: cannot rename"
    grep -q "already replaced: .*li.pred.npy" "$tmp/err" ||
        bad "linreg, a final rename that fails: the replaced files are not named: $(cat "$tmp/err")"
    [ -z "$(find "$o" -name "*.tmp*")" ] || bad "temporaries left: $(find "$o" -name "*.tmp*")"
else
    bad "$shim: not built (make tests)"
fi

# A library error after "hpml pca: " does not say the command twice ("pca: pca: ...").
$PY -c "import numpy as np; np.save('$tmp/one.npy', np.ones((1, 3)))"
run 2 pca --data "$tmp/one.npy" -k 1
[ $rc -eq 1 ] || bad "pca of one row: exit $rc"
one_line "pca of one row" pca "^hpml pca: needs at least 2 rows$"

# --help tells the -v default (progress is on whenever stderr is a terminal).
for cmd in kmeans knn pca linreg logreg; do
    "$HPML" $cmd --help | grep -q -- "-v, --verbose .*only when stderr is a terminal" ||
        bad "$cmd --help does not give the -v default"
done

if [ $fails -gt 0 ]; then
    echo "$fails failure(s)"
    exit 1
fi
echo ok
