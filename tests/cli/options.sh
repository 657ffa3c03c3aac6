#!/usr/bin/env bash
# Option parsing as a demanding user pokes it (every command, and the command word):
# a value given to an option that takes none, a missing value, an
# ambiguous prefix, an empty value, a forgotten value followed by the next option, a
# short-option cluster, numbers out of range or with blanks. Each is one clear line naming
# what is wrong, a usage line, exit status 2, nothing written, no MPI_Abort and no hang;
# singleton runs, and a few at 2 ranks (one message, every rank exits).
# Env (from tests/run.sh): HPML, MPIRUN.
# hpml-test: timeout=240
set -u
: "${HPML:?}" "${MPIRUN:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# usage NP CMD PATTERN ARGS...: `hpml ARGS` on NP ranks (1: no launcher) exits 2 with
# exactly one "hpml CMD:" line holding PATTERN (fixed string) and one usage line, and
# leaves no file behind. CMD "-" for the command word's own errors ("hpml: ...").
usage() {
    local np=$1 cmd=$2 pat=$3 head rc
    shift 3
    [ "$cmd" = - ] && head="hpml:" || head="hpml $cmd:"
    rm -rf "$tmp/w" && mkdir "$tmp/w" && cd "$tmp/w" || return
    if [ "$np" = 1 ]; then
        timeout -k 5 60 "$HPML" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    else
        timeout -k 5 60 $MPIRUN -np "$np" "$HPML" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    fi
    rc=$?
    cd "$tmp" || return
    local what="np=$np hpml $*"
    [ $rc -eq 2 ] || bad "$what: exit $rc, expected 2: $(head -3 "$tmp/err")"
    [ "$(grep -c "^$head" "$tmp/err")" -eq 1 ] ||
        bad "$what: expected one '$head' line: $(head -4 "$tmp/err")"
    grep -q "^$head.*$(sed 's/[][\.*^$]/\\&/g' <<<"$pat")" "$tmp/err" ||
        bad "$what: no \"$pat\" in: $(head -3 "$tmp/err")"
    [ "$(grep -c "^Usage: hpml" "$tmp/err")" -eq 1 ] || bad "$what: no usage line"
    ! grep -qi "MPI_ABORT" "$tmp/err" || bad "$what: aborted the job"
    [ -z "$(ls -A "$tmp/w")" ] || bad "$what: wrote $(ls -A "$tmp/w")"
}

# A value given to an option that takes none: said as such, not "unknown option".
usage 1 info "option '--json' takes no value (got '--json=1')" info --json=1
usage 1 info "option '--json' takes no value (got '--js=')" info --js=
usage 1 info "option '--help' takes no value" info --help=yes
usage 1 tune "option '--quiet' takes no value" tune --max 64 -s 1 --quiet=1
usage 1 eval "option '--json' takes no value" eval -f m.hpml --json=true

# A missing value names the option in full, also when given as a prefix.
usage 1 tune "option '--output' needs a value" tune --ou
usage 1 tune "option '-s' needs a value" tune -qs
usage 1 predict "option '--output' needs a value" predict -f m -i x --outp

# An ambiguous prefix names the options it could be.
usage 1 tune "option '--m' is ambiguous: it could be --min, --max" tune --m 4K
usage 1 eval "option '--l' is ambiguous: it could be --labels, --limit" eval -f m --l 5
usage 1 info "unknown option '--jsonx'" info --jsonx=1
usage 1 info "unknown option '--=1'" info --=1

# Short options: the letter that is wrong, in its cluster; "-json" for "--json".
usage 1 info "unknown option '-v' in '-vq'" info -vq
usage 1 info "unknown option '-j' in '-json' (did you mean '--json'?)" info -json
usage 1 tune "unknown option '-Z' in '-qZ'" tune -qZ
usage 1 tune "unknown option '-x'" tune -q -x

# Empty values, and a value forgotten before the next option.
usage 1 tune "option '-o' has an empty value" tune --max 64 -s 1 -o ''
usage 1 tune "option '--output' has an empty value" tune --max 64 -s 1 --output=
usage 1 tune "option '--output' needs a value (got the option '--quiet')" tune --max 64 -s 1 --output --quiet
usage 1 tune "option '-o' needs a value (got the option '--')" tune -o -- x
usage 1 tune "option '-o' takes no '=': write '-o t.txt'" tune --max 64 -s 1 -q -o=t.txt
usage 1 eval "option '--model-file' has an empty value" eval --model-file ''
usage 1 eval "option '--data' has an empty value" eval -f m --data ''
usage 1 predict "option '-o' has an empty value" predict -f m -i x -o ''
usage 1 predict "option '--images' needs a value (got the option '--limit')" \
    predict -f m --images --limit 5
usage 1 knn "option '--out' has an empty value" knn --data x.npy --out ''
usage 1 knn "option '--data' has an empty value" knn --data ''
usage 1 knn "option '--pred-out' has an empty value" knn --data x.npy --labels l --pred-out ''

# Numbers: the range in the message, blanks and overflow refused.
usage 1 knn "-k must be an integer from 1 to 1048576 (got '2000000')" knn --data x.npy -k 2000000
usage 1 knn "-k must be an integer from 1 to 1048576" knn --data x.npy -k 99999999999999999999
usage 1 tune "--samples must be an integer from 1 to 1000 (got ' 5')" tune --max 64 -q -o t.txt --samples ' 5'
usage 1 tune "--samples must be an integer from 1 to 1000 (got '-1')" tune -s -1
usage 1 eval "--batch must be an integer from 1 to 1099511627776" eval -f m --batch 2000000000000
usage 1 predict "--limit must be an integer from 1 to 1099511627776 (got '5x')" \
    predict -f m -i x --limit 5x

# The command word: an option before it, and what --version / help take.
usage 1 - "unknown option '--json' (options go after the command)" --json info
usage 1 - "unexpected argument 'extra'" --version extra
usage 1 - "unknown command 'nope'" help nope
"$HPML" help info >"$tmp/out" 2>&1 && grep -q "hpml info \[--json\]" "$tmp/out" ||
    bad "'hpml help info' does not print info's usage: $(head -2 "$tmp/out")"

# The ML commands (mlcli_parse: knn, pca, linreg, logreg), kmeans, bench and train: the
# same diagnostics. x.csv is real data: with "--out ''" the old parser went on to fit and
# wrote hidden ".centroids.npy" files; with "--out --json", "--json.centroids.npy".
printf '0,0\n0,1\n5,5\n5,6\n9,0\n9,1\n' >"$tmp/x.csv"
x=$tmp/x.csv
usage 1 pca "option '--no-center' takes no value (got '--no-center=1')" pca --data "$x" --no-center=1
usage 1 kmeans "option '--json' takes no value (got '--json=1')" kmeans --data "$x" -k 2 --json=1
usage 1 linreg "option '--no-intercept' takes no value" linreg --data "$x" --target-col 0 \
    --no-intercept=1
usage 1 logreg "option '--multinomial' takes no value" logreg --data "$x" --target-col 0 \
    --multinomial=1
usage 1 bench "option '--full' takes no value (got '--full=1')" bench allreduce --full=1
usage 1 train "option '--resume' takes no value (got '--resume=yes')" train --resume=yes
usage 1 linreg "option '--t' is ambiguous: it could be --target, --target-col, --test," \
    linreg --data "$x" --t 1
usage 1 train "option '--t' is ambiguous: it could be --train-images, --train-labels," train --t
usage 1 bench "option '--i' is ambiguous: it could be --iterations, --in-place, --impl" \
    bench --i 5 allreduce
usage 1 kmeans "option '--t' is ambiguous: it could be --tol, --threads, --tile" \
    kmeans --data "$x" --t 1
usage 1 pca "option '--n' is ambiguous: it could be --n-components, --no-center, --n-iter" \
    pca --data "$x" --n 1
usage 1 train "unknown option '-v' in '-vZ'" train -vZ
usage 1 bench "unknown option '-o' in '-o=x'" bench allreduce -o=x
usage 1 bench "option '-m' needs a value" bench allreduce -m
usage 1 kmeans "option '--out' has an empty value" kmeans --data "$x" -k 2 --out ''
usage 1 kmeans "option '--out' needs a value (got the option '--json')" kmeans --data "$x" -k 2 \
    --out --json
usage 1 kmeans "option '--labels' has an empty value" kmeans --data "$x" -k 2 --labels=
usage 1 pca "option '--transform-out' has an empty value" pca --data "$x" --transform-out ''
usage 1 logreg "option '--pred-out' needs a value (got the option '--json')" \
    logreg --data "$x" --target-col 0 --pred-out --json
usage 1 train "option '--save' has an empty value" train --model "dense 10" --epochs 1 \
    --train-limit 64 --test-limit 64 --no-progress --save ''
usage 1 train "option '--checkpoint' needs a value (got the option '--resume')" \
    train --checkpoint --resume
usage 1 bench "option '--plot' has an empty value" bench allreduce --plot ''

# Integer options say their whole range.
usage 1 kmeans "--threads must be an integer from 1 to 1024 (got '5000')" \
    kmeans --data "$x" -k 2 --threads 5000
usage 1 linreg "--threads must be an integer from 1 to 1024 (got '0')" \
    linreg --data "$x" --target-col 0 --threads 0
usage 1 linreg "--target-col must be an integer from -1000000000 to 1000000000" \
    linreg --data "$x" --target-col 1e3
usage 1 kmeans "-k must be an integer from 1 to 2147483647 (got '3000000000')" \
    kmeans --data "$x" -k 3000000000
usage 1 kmeans "--tile must be an integer from 1 to 1048576 (got '2000000')" \
    kmeans --data "$x" -k 2 --tile 2000000
usage 1 kmeans "--n-init must be an integer from 1 to 100000 (got '200000')" \
    kmeans --data "$x" -k 2 --n-init 200000
usage 1 kmeans "--max-iter must be an integer from 1 to 1000000000 (got '2000000000')" \
    kmeans --data "$x" -k 2 --max-iter 2000000000
usage 1 pca "-k must be an integer from 1 to 1073741824 (got '2000000000')" \
    pca --data "$x" -k 2000000000
usage 1 pca "--oversample must be an integer from 0 to 1048576 (got '2000000')" \
    pca --data "$x" --oversample 2000000
usage 1 logreg "--max-iter must be an integer from 0 to 100000000 (got '200000000')" \
    logreg --data "$x" --target-col 0 --max-iter 200000000
usage 1 train "--epochs must be an integer from 1 to 1000000 (got '2000000')" \
    train --epochs 2000000
usage 1 train "--batch must be an integer from 1 to 1073741824 (got '0')" train --batch 0
usage 1 bench "-i/--iterations must be an integer from 1 to 100000000 (got '999999999')" \
    bench allreduce -i 999999999
usage 1 bench "-x/--warmup must be an integer from 0 to 100000000 (got '-1')" bench allreduce -x -1

# bench -z: its value is optional and so, as in OMB, only attached ("-z50,90").
usage 1 bench "unknown benchmark '50' (-z takes its value attached: -z50)" bench -z 50 allreduce
usage 1 bench "unexpected argument '50,90' (-z takes its value attached: -z50,90)" \
    bench allreduce -z 50,90
usage 1 bench "option '-z' takes no '=': write '-z50' (its value attached)" bench allreduce -z=50
usage 1 bench "unknown benchmark 'allreduz'" bench -z allreduz
grep -q "attached" "$tmp/err" && bad "bench -z allreduz: a -z hint for a word that is no percentile"
# A forgotten value taken from the next option, written with one dash.
usage 1 tune "option '-o' needs a value (got the option '-q')" tune -o -q --max 64

# At 2 ranks: one message, every rank exits 2.
usage 2 info "option '--json' takes no value" info --json=1
usage 2 tune "option '--m' is ambiguous" tune --m 4K
usage 2 eval "option '--model-file' has an empty value" eval --model-file=
usage 2 kmeans "option '--out' has an empty value" kmeans --data "$x" -k 2 --out ''
usage 2 bench "unknown benchmark '50' (-z takes its value attached: -z50)" bench -z 50 allreduce
usage 2 train "option '--resume' takes no value" train --resume=yes

[ $fails -eq 0 ] && echo "options: all checks passed"
exit $((fails > 0))
