#!/usr/bin/env bash
# Run the libFuzzer binaries of build/fuzz/ (make fuzz-build) one target after another,
# at the lowest CPU priority, and report per target: executions, executions per second,
# corpus size and findings. New corpus entries go to build/fuzz/corpus-<name> (the seeds
# in tests/fuzz/corpus/<name> are read, never written); crashes, leaks, timeouts and
# out-of-memory inputs to build/fuzz/<name>-<kind>-<hash>.
#
#   tests/fuzz/run.sh [--seconds N] [--targets npy,csv,...] [--build DIR]
#
# Each run: -max_total_time=N (default 600) -timeout=10 -rss_limit_mb=2048, plus
# $FUZZ_ARGS. Exit status 1 when any target has a finding.
set -u

seconds=600
targets=
build=build/fuzz
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "fuzz/run.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done

repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo" || exit 2
if [ -z "$targets" ]; then
    targets=$(ls tests/fuzz/fuzz_*.c | sed 's|.*/fuzz_||; s|\.c$||' | paste -sd, -)
fi
IFS=, read -r -a names <<<"$targets"
findings=0
summary=()
for n in "${names[@]}"; do
    bin=$build/fuzz_$n
    if [ ! -x "$bin" ]; then
        echo "fuzz/run.sh: $bin not built (make fuzz-build)" >&2
        exit 2
    fi
    corpus=$build/corpus-$n
    log=$build/$n.log
    mkdir -p "$corpus"
    dict=()
    [ -f "tests/fuzz/$n.dict" ] && dict=(-dict="tests/fuzz/$n.dict")
    before=$(ls "$build" | grep -cE "^$n-(crash|leak|timeout|oom)-")
    echo "== fuzz_$n: ${seconds}s, log $log"
    # One target at a time and nice 19: the fuzzer must not starve other work on the host.
    nice -n 19 "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$build/$n-" "${dict[@]}" ${FUZZ_ARGS:-} \
        "$corpus" "tests/fuzz/corpus/$n" >"$log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
    corp=$(grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -1 | sed 's/corp: //')
    found=$(ls "$build" | grep -E "^$n-(crash|leak|timeout|oom)-")
    after=$(printf '%s' "$found" | grep -c .)
    line=$(printf '%-8s %10s execs %6s/s  corpus %-12s' "$n" "${execs:-?}" "${rate:-?}" \
        "${corp:-?}")
    if [ "$after" -gt "$before" ] || [ $rc -ne 0 ]; then
        findings=$((findings + 1))
        line="$line  FINDING (exit $rc): $(echo "$found" | tr '\n' ' ')"
        grep -m3 -E '^==[0-9]+==ERROR|runtime error|fuzz check failed|SUMMARY' "$log" |
            sed 's/^/    /'
    else
        line="$line  clean"
    fi
    echo "$line"
    summary+=("$line")
done
echo "== summary (${seconds}s per target)"
printf '%s\n' "${summary[@]}"
[ $findings -eq 0 ]
