#!/usr/bin/env bash
# Option parsing as a demanding user pokes it (info, tune, knn, eval, predict and the
# command word): a value given to an option that takes none, a missing value, an
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

# At 2 ranks: one message, every rank exits 2.
usage 2 info "option '--json' takes no value" info --json=1
usage 2 tune "option '--m' is ambiguous" tune --m 4K
usage 2 eval "option '--model-file' has an empty value" eval --model-file=

[ $fails -eq 0 ] && echo "options: all checks passed"
exit $((fails > 0))
