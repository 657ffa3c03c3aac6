#!/usr/bin/env bash
# Every point-to-point case at 2 ranks (and the pair cases at 4 on Open MPI), validated,
# with plausible numbers: latencies >= 0, bandwidths below a memory-bandwidth bound,
# and bandwidth consistent across cases (bibw moves twice the bytes of bw per window).
# hpml-test: timeout=240
. "$(dirname "$0")/bench_common.bash"

for c in latency bw bibw mbw_mr multi_lat; do
    for dt in mpi_char f32; do
        bench 2 "$c" -m 64K -i 8 -x 2 -W 8 -c -T "$dt" --csv
        [ $rc -eq 0 ] || { fail "$c $dt exit $rc: $(head -5 "$err")"; continue; }
        check_csv "$out" --ranks 2
    done
done
# The pair cases with two pairs.
np=4
for c in mbw_mr multi_lat; do
    if [ "$MPI" = mpich ]; then args=(-m 256 -i 3 -x 1 -W 2); else args=(-m 4K -i 5 -x 1 -W 4); fi
    bench $np "$c" "${args[@]}" -c --csv
    [ $rc -eq 0 ] || { fail "$c np=$np exit $rc: $(head -5 "$err")"; continue; }
    check_csv "$out" --ranks $np
done
# latency against bw: the one-way time of a 64 KiB message and the time of a 1-message
# window of 64 KiB must agree within a (very) loose factor. Medians (-z50), not means:
# one preemption on a shared machine moves a mean by milliseconds.
agree() {
    bench 2 latency -m 64K:64K -i 50 -x 5 -z50 --csv
    lat=$(python3 -c 'import csv,sys; print(list(csv.DictReader(open(sys.argv[1])))[0]["p50_us"])' "$out")
    bench 2 bw -m 64K:64K -i 20 -x 2 -W 1 -z50 --csv
    win=$(python3 -c 'import csv,sys; print(list(csv.DictReader(open(sys.argv[1])))[0]["p50_us"])' "$out")
    awk -v l="$lat" -v w="$win" 'BEGIN { exit !(l > 0 && w > 0 && w < 50 * l && l < 50 * w) }'
}
agree || agree || fail "latency ($lat us at 64K) and a 1-message bw window ($win us) disagree by over 50x twice"
finish
