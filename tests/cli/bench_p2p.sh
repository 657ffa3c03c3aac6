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
# latency: the one-way time is half the round trip, so the printed latency and the
# bandwidth of a 1-message window must agree within a (very) loose factor.
bench 2 latency -m 64K:64K -i 50 -x 5 --csv
lat=$(awk -F, 'NR==2{print $7}' "$out")
bench 2 bw -m 64K:64K -i 20 -x 2 -W 1 --csv
bw=$(awk -F, 'NR==2{print $11}' "$out")
awk -v l="$lat" -v b="$bw" 'BEGIN { impl = 65536 / l; exit !(l > 0 && b > 0 && b < 50 * impl && impl < 50 * b) }' \
    || fail "latency ($lat us at 64K) and bw ($bw MB/s, window 1) disagree by over 50x"
finish
