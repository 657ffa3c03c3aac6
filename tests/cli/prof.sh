#!/usr/bin/env bash
# hpml prof and libhpml-prof.so against analytic totals:
# - hpml bench latency on 2 ranks: MPI_Send/MPI_Recv counts, their log2 size histograms
#   and the point-to-point matrix equal (iterations + warm-up) per size in each direction
#   (plus the harness's one connection Sendrecv per pair of ranks);
# - a collective over point-to-point (hpml's ring allreduce): 2(p-1) messages of n/p
#   bytes to the right neighbour per call, in the matrix, attributed to hpml_allreduce's
#   ring and to the call sites in allreduce_ring.c;
# - MPI_IN_PLACE passes through: an in-place allreduce gives the closed form's result, the
#   same with and without the profiler (C, and python3 with mpi4py on Open MPI);
# - POSIX/stdio I/O per file, also through descriptors made by dup/dup2/dup3/fcntl and
#   files opened by openat, creat, mkstemp and freopen (a C program; hpml kmeans on a gzip file, which zlib
#   reads through a dup'd descriptor), MPI_Pcontrol(0) pausing counts;
# - MPI_Abort on one rank, exit without MPI_Finalize and kill -TERM of one rank still
#   leave every rank's file and a report from `hpml prof merge`, marked incomplete; a rank
#   killed with SIGKILL (no periodic snapshots) has its counts recovered from its mapping;
# - trace mode: the gzip'd Chrome trace parses as JSON and follows the Trace Event Format
#   (pid = world rank on every event, "X" with dur; per thread, slices in time order that
#   nest and "B"/"E" pairs; flows "s"/"f" pairing by id, each inside a slice, from each
#   send to the receive that matched it, for MPI_Irecv to the MPI_Wait*/MPI_Test* that
#   completed it), respects its event cap within 1%, keeps only the steps asked;
# - the library is given to Hydra's and Open MPI's ranks by their launcher's option, not
#   preloaded into the launcher; usage and file errors.
# Env (from tests/run.sh): HPML, MPIRUN, MPI, BUILD.
# hpml-test: timeout=200
set -u
: "${HPML:?}" "${MPIRUN:?}" "${MPI:?}" "${BUILD:?}"
# tests/run.sh sets Open MPI's SIGTERM-to-SIGKILL grace to 0 to end failing jobs fast; the
# profiler's SIGTERM handler needs the default grace to write its data.
export OMPI_MCA_odls_base_sigkill_timeout=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
prog=$BUILD/tests/cli/prof_prog
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }

# prof DIR ARGS...: hpml prof -q -o DIR -- $MPIRUN ARGS; status in $rc, output in DIR.out
prof() {
    local d=$1
    shift
    # shellcheck disable=SC2086 # MPIRUN is a command with its options
    timeout 120 "$HPML" prof -q -o "$d" -- $MPIRUN "$@" >"$d.out" 2>"$d.err"
    rc=$?
}
# check DIR PYTHON: run PYTHON with r = the JSON report of DIR; prints what failed
check() {
    /usr/bin/python3 - "$1/report.json" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
calls = {c["name"]: c for c in r["calls"]}
def hist(call, comm="world"):
    for h in r["histograms"]:
        if h["call"] == call and h["comm"] == comm:
            return {b["bin"]: b["count"] for b in h["bins"]}
    return {}
M, B = r["matrix"]["messages"], r["matrix"]["bytes"]
exec(sys.argv[2])
PY
}

# self_check DIR: with HPML_PROF_SELF=1, every MPI call, hpml collective and I/O call
# counted was timed once, and the profiler's own time is within each rank's wall time;
# prints what failed
self_check() {
    check "$1" '
timed = sum(c["count"] for c in r["calls"]) + sum(h["count"] for h in r["hpml_collectives"]) \
    + sum(c["count"] for f in r["io"] for c in f["calls"])
ps = [k["profiler_self"] for k in r["rank_info"]]
if None in ps or sum(x["calls"] for x in ps) != timed:
    print("profiler_self %s, want %d calls in all" % (ps, timed))
elif any(not (0 < x["s"] < k["wall_s"]) or abs(x["s"] - x["calls_s"] - x["start_s"] - x["snapshots_s"]) > 1e-8
         for x, k in zip(ps, r["rank_info"])):
    print("profiler_self times %s" % ps)'
}

# --- latency on 2 ranks: sizes 0, 1, 2, ... 8192, 50 iterations + 5 warm-up each ----------
prof "$tmp/lat" -np 2 "$HPML" bench latency -m 0:8K -i 50 -x 5
if [ $rc -ne 0 ]; then fail "latency under hpml prof: exit $rc: $(tail -3 "$tmp/lat.err")"
else
    out=$(check "$tmp/lat" '
sizes = [0] + [1 << k for k in range(14)]          # 0, 1, 2, ..., 8192
n = 50 + 5
e = []
if not r["complete"]: e.append("incomplete: " + r["incomplete"])
for call in ("MPI_Send", "MPI_Recv"):
    c = calls[call]
    if c["per_rank"]["count"] != [n * len(sizes)] * 2: e.append(call + " counts %s" % c["per_rank"]["count"])
    if c["per_rank"]["bytes"] != [n * sum(sizes)] * 2: e.append(call + " bytes %s" % c["per_rank"]["bytes"])
    want = {(s.bit_length() if s else 0): 2 * n for s in sizes}
    if hist(call) != want: e.append(call + " histogram %s, want %s" % (hist(call), want))
# One connection Sendrecv of 1 byte per ordered pair (the harness touches every pair once).
if M != [[0, n * len(sizes) + 1], [n * len(sizes) + 1, 0]]: e.append("messages %s" % M)
if B != [[0, n * sum(sizes) + 1], [n * sum(sizes) + 1, 0]]: e.append("bytes %s" % B)
print("; ".join(e))')
    [ -z "$out" ] && ok "latency: counts, histograms and matrix exact" || fail "latency: $out"
    grep -q "^## Point-to-point matrix" "$tmp/lat/report.txt" || fail "latency: no matrix in report.txt"
fi

# --- ring allreduce (hpml's algorithm over MPI_Sendrecv) ----------------------------------
# MPICH busy-polls: 2 ranks there, 4 on Open MPI.
np=4
[ "$MPI" = mpich ] && np=2
# Call sites two frames deep (HPML_PROF_CALLSITES=2 reaches the ranks through hpml prof),
# and the profiler timing itself (HPML_PROF_SELF=1).
HPML_PROF_CALLSITES=2 HPML_PROF_SELF=1 prof "$tmp/ring" -np $np "$HPML" bench allreduce --impl hpml:ring -m 4:64 -i 20 -x 2
if [ $rc -ne 0 ]; then fail "ring allreduce: exit $rc: $(tail -3 "$tmp/ring.err")"
else
    out=$(check "$tmp/ring" "
p = $np
sizes = [4, 8, 16, 32, 64]
n = 20 + 2
e = []
for i in range(p):
    for j in range(p):
        right = j == (i + 1) % p
        wm = (2 * (p - 1) * n * len(sizes) if right else 0) + (1 if i != j else 0)
        wb = (2 * (p - 1) * n * sum(s // p for s in sizes) if right else 0) + (1 if i != j else 0)
        if M[i][j] != wm or B[i][j] != wb:
            e.append('%d->%d: %d msgs %d bytes, want %d %d' % (i, j, M[i][j], B[i][j], wm, wb))
want = {(s // p).bit_length(): p * 2 * (p - 1) * n for s in sizes}
want[1] = want.get(1, 0) + p * (p - 1)   # the connection Sendrecvs, 1 byte each
if hist('MPI_Sendrecv') != want: e.append('histogram %s, want %s' % (hist('MPI_Sendrecv'), want))
# hpml's dispatcher names the collective and its algorithm; every ring message is inside it.
hc = [h for h in r['hpml_collectives'] if h['call'] == 'hpml_allreduce' and h['algorithm'] == 'ring']
if len(hc) != 1 or hc[0]['count'] != p * n * len(sizes) or hc[0]['bytes'] != p * n * sum(sizes) \
        or hc[0]['p2p_messages'] != p * 2 * (p - 1) * n * len(sizes):
    e.append('hpml_collectives %s' % r['hpml_collectives'])
# The ring's Sendrecvs are attributed to the file and function that make them, called
# from hpml's dispatcher.
ring = [c for c in r['callsites'] if c['call'] == 'MPI_Sendrecv' and 'allreduce_ring' in c['frames'][0]['where']
        and len(c['frames']) == 2 and c['frames'][1]['where'].startswith('hpml_allreduce_algo (')]
if sum(c['count'] for c in ring) != p * 2 * (p - 1) * n * len(sizes):
    e.append('ring call sites %s' % [c for c in r['callsites'] if c['call'] == 'MPI_Sendrecv'])
print('; '.join(e))")
    out=$out$(self_check "$tmp/ring")
    [ -z "$out" ] && ok "ring allreduce on $np ranks: matrix, histogram, hpml_allreduce ring and its call sites exact; HPML_PROF_SELF timed every call" || fail "ring: $out"
    grep -q "^rank .* prof  *prof%" "$tmp/ring/report.txt" || fail "ring: no prof column in report.txt with HPML_PROF_SELF=1"
fi

# --- sub-communicators: their ranks counted as world ranks ---------------------------------
# hpml's hierarchical allreduce on 2 virtual nodes of 2 ranks (HPML_RANKS_PER_NODE=2): the
# node part goes through shared memory; each half of the vector is allreduced between the
# two ranks that own it on the two nodes, over their own communicator ({0,2} and {1,3}),
# which on 2 nodes is one exchange of n/2 bytes (MPI_Isend and MPI_Irecv). Open MPI only
# (4 ranks; MPICH busy-polls).
if [ "$MPI" = openmpi ]; then
    HPML_RANKS_PER_NODE=2 prof "$tmp/hier" -np 4 -x HPML_RANKS_PER_NODE "$HPML" bench allreduce \
        --impl hpml:hier -m 1K:4K -i 10 -x 1
    out=$(check "$tmp/hier" '
n, sizes = 11, [1024, 2048, 4096]
e = []
for i in range(4):
    for j in range(4):
        pair = (i + 2) % 4 == j
        wm = (n * len(sizes) if pair else 0) + (i != j)
        wb = (n * sum(s // 2 for s in sizes) if pair else 0) + (i != j)
        if (M[i][j], B[i][j]) != (wm, wb): e.append("%d->%d: %d %d, want %d %d" % (i, j, M[i][j], B[i][j], wm, wb))
for g in ("2 ranks {0,2}", "2 ranks {1,3}"):
    if hist("MPI_Isend", g) != {10: 2 * n, 11: 2 * n, 12: 2 * n}: e.append("%s: %s" % (g, hist("MPI_Isend", g)))
print("; ".join(e))' 2>&1)
    [ $rc -eq 0 ] && [ -z "$out" ] && ok "hierarchical allreduce: slice communicators' messages between world ranks 0-2 and 1-3, exact" ||
        fail "hier: exit $rc: $out"
fi

# The pictures, from the ring's folder: gnuplot's SVGs, whole (closing tag), the matrix an image.
"$HPML" prof merge -q --plot "$tmp/ring" 2>"$tmp/plot.err"
if [ $? -eq 0 ] && tail -c 20 "$tmp/ring/matrix.svg" | grep -q '</svg>' &&
    tail -c 20 "$tmp/ring/ranks.svg" | grep -q '</svg>' && grep -q '<image' "$tmp/ring/matrix.svg" &&
    grep -q 'MPI_Sendrecv' "$tmp/ring/ranks.svg"; then
    ok "--plot: matrix.svg (heat map) and ranks.svg (time per rank)"
else
    fail "--plot: $(cat "$tmp/plot.err")"
fi

# --- in-place allreduce: same result with and without the profiler ----------------------
# shellcheck disable=SC2086
plain=$($MPIRUN -np 3 "$prog" inplace 1000 2>&1)
prof "$tmp/inpl" -np 3 "$prog" inplace 1000
profiled=$(cat "$tmp/inpl.out")
if [ $rc -ne 0 ] || [ "$plain" != "$profiled" ] || [ "${plain%% *}" != "inplace" ] ||
    ! grep -q '^inplace ok' <<<"$plain"; then
    fail "in-place allreduce: without '$plain', with '$profiled' (exit $rc)"
else
    out=$(check "$tmp/inpl" '
c = calls["MPI_Allreduce"]
e = []
if c["per_rank"]["count"] != [3, 3, 3]: e.append("counts %s" % c["per_rank"]["count"])
if c["per_rank"]["bytes"] != [8000 + 8000 + 4] * 3: e.append("bytes %s" % c["per_rank"]["bytes"])
print("; ".join(e))')
    [ -z "$out" ] && ok "in-place allreduce: $plain with and without" || fail "in-place: $out"
fi

# --- POSIX and stdio I/O -------------------------------------------------------------------
# (traced: the I/O calls are on the timeline too, checked with the trace below)
mkdir -p "$tmp/iodata"
# shellcheck disable=SC2086
"$HPML" prof -q --trace -o "$tmp/io" -- $MPIRUN -np 2 "$prog" io "$tmp/iodata" >"$tmp/io.out" 2>"$tmp/io.err"
rc=$?
if [ $rc -ne 0 ]; then fail "io: exit $rc: $(tail -3 "$tmp/io.err")"
else
    out=$(check "$tmp/io" "
e = []
want = {'open': (2, 0), 'write': (3, 12288), 'pwrite': (1, 100), 'fsync': (1, 0), 'close': (2, 0),
        'read': (2, 8192), 'pread': (1, 10), 'fopen': (1, 0), 'fwrite': (10, 1000),
        'fread': (1, 1000), 'fclose': (1, 0)}
for rank in (0, 1):
    path = '$tmp/iodata/io-%d.dat' % rank
    f = [x for x in r['io'] if x['path'] == path]
    if len(f) != 1: e.append('no entry for ' + path); continue
    got = {c['name']: (c['count'], c['bytes']) for c in f[0]['calls']}
    if got != want: e.append('%s: %s' % (path, got))
    sizes = {b['bin']: b['count'] for b in f[0]['sizes']}
    if sizes != {13: 5, 7: 11, 4: 1, 10: 1}: e.append('%s sizes %s' % (path, sizes))
print('; '.join(e))")
    [ -z "$out" ] && ok "I/O: calls, bytes and sizes per file exact" || fail "io: $out"
fi

# --- descriptors made from a followed one, and files opened by openat and creat ----------------
# Exact per file (prof_prog.c, dups): without the dup wrappers the bytes through the
# duplicates went nowhere, and those after dup2 to the file the descriptor had before.
mkdir -p "$tmp/dupdata"
prof "$tmp/dup" -np 2 "$prog" dup "$tmp/dupdata"
out=$(check "$tmp/dup" "
e = []
want = {'$tmp/dupdata/dup-%d.dat': {'open': (4, 0), 'dup': (6, 0), 'write': (2, 1500), 'read': (5, 380),
                                    'pread': (1, 300), 'close': (10, 0)},
        '$tmp/dupdata/creat-%d.dat': {'open': (2, 0), 'write': (1, 7), 'close': (2, 0),
                                      'fopen': (1, 0), 'fwrite': (1, 5), 'fclose': (1, 0)}}
io = {f['path']: {c['name']: (c['count'], c['bytes']) for c in f['calls']} for f in r['io']}
for rank in (0, 1):
    for p, w in want.items():
        if io.get(p % rank) != w: e.append('%s: %s' % (p % rank, io.get(p % rank)))
if io.get('$tmp/dupdata') != {'open': (2, 0), 'close': (2, 0)}: e.append('dir: %s' % io.get('$tmp/dupdata'))
for rank in (0, 1):
    t = [v for p, v in io.items() if p.startswith('$tmp/dupdata/tmp-%d-' % rank) and len(p) == len('$tmp/dupdata/tmp-0-XXXXXX')]
    if t != [{'open': (1, 0), 'write': (1, 3), 'close': (1, 0), 'fopen': (1, 0), 'fclose': (1, 0)}]:
        e.append('mkstemp of rank %d: %s' % (rank, t))
print('; '.join(e))" 2>&1)
[ $rc -eq 0 ] && [ -z "$out" ] && ok "I/O through dup, dup2, dup3, fcntl, openat, creat, mkstemp, freopen: exact per file" ||
    fail "dup: exit $rc: $out"

# hpml reads a gzip file through a dup'd descriptor (zlib's gzdopen): each rank reads the
# whole (small) file through it, so the file's read bytes are twice its size.
/usr/bin/python3 -c "
import gzip, struct, numpy as np
x = np.random.default_rng(0).random((2000, 8), dtype=np.float32).astype('>f4')
open('$tmp/x.gz', 'wb').write(gzip.compress(bytes([0, 0, 0x0D, 2]) + struct.pack('>II', 2000, 8) + x.tobytes()))"
prof "$tmp/gz" -np 2 "$HPML" kmeans --data "$tmp/x.gz" -k 3 --max-iter 3
out=$(check "$tmp/gz" "
import os
f = {c['name']: (c['count'], c['bytes']) for x in r['io'] if x['path'] == '$tmp/x.gz' for c in x['calls']}
size = os.path.getsize('$tmp/x.gz')
if f.get('read', (0, 0))[1] != 2 * size or f.get('dup', (0, 0))[0] != 2:
    print('x.gz (%d B): %s' % (size, f))" 2>&1)
[ $rc -eq 0 ] && [ -z "$out" ] && ok "hpml kmeans on .gz: the reads through zlib's dup'd descriptor counted, 2 x file size" ||
    fail "gz: exit $rc: $out"

# --- MPI_Pcontrol(0) pauses counting -----------------------------------------------------------
prof "$tmp/pc" -np 2 "$prog" pcontrol
out=$(check "$tmp/pc" 'print("" if calls["MPI_Send"]["per_rank"]["count"] == [3, 3] else "sends %s" % calls["MPI_Send"]["per_rank"]["count"])' 2>&1)
[ $rc -eq 0 ] && [ -z "$out" ] && ok "MPI_Pcontrol: 3 counted sends per rank" || fail "pcontrol: exit $rc $out"

# --- MPI_Abort on rank 1 ---------------------------------------------------------------------
prof "$tmp/abort" -np 2 "$prog" abort
if [ $rc -eq 0 ] || [ ! -f "$tmp/abort/rank-0.prof" ] || [ ! -f "$tmp/abort/rank-1.prof" ] ||
    [ ! -f "$tmp/abort/report.json" ]; then
    fail "MPI_Abort: exit $rc, files: $(ls "$tmp/abort" 2>&1 | tr '\n' ' ')"
else
    out=$(check "$tmp/abort" '
e = []
if r["complete"]: e.append("complete")
if r["rank_info"][1]["state"] != "abort": e.append("rank 1 state %s" % r["rank_info"][1]["state"])
if not all(x["file"] for x in r["rank_info"]): e.append("a rank without its file")
# Rank 1 wrote its last snapshot in MPI_Abort; rank 0 has what it flushed before the
# launcher killed it (with SIGTERM: everything; with SIGKILL: its last periodic snapshot).
if calls["MPI_Barrier"]["per_rank"]["count"][1] != 1: e.append("barriers %s" % calls["MPI_Barrier"]["per_rank"]["count"])
print("; ".join(e))')
    [ -z "$out" ] && grep -q "report incomplete: .*rank 1: MPI_Abort" "$tmp/abort.err" &&
        ok "MPI_Abort: both files, report incomplete (rank 1: MPI_Abort)" ||
        fail "MPI_Abort: $out; $(grep incomplete "$tmp/abort.err")"
fi

# --- exit without MPI_Finalize on rank 1 -----------------------------------------------
prof "$tmp/exit" -np 2 "$prog" exit
out=$(check "$tmp/exit" '
e = []
if r["complete"] or r["rank_info"][1]["state"] != "exit": e.append("rank 1 state %s" % r["rank_info"][1]["state"])
if not all(x["file"] for x in r["rank_info"]): e.append("a rank without its file")
print("; ".join(e))' 2>&1)
[ $rc -ne 0 ] && [ -z "$out" ] && ok "exit without MPI_Finalize: both files, rank 1 'exit'" ||
    fail "exit: exit $rc: $out"

# spin DIR PERIOD [OPTIONS]: hpml prof of prof_prog spin in the background ($bg), output in
# DIR.out and DIR.err; once it runs, $pid1 is rank 1's pid (empty if it did not start).
spin() {
    local d=$1 period=$2
    shift 2
    # shellcheck disable=SC2086
    timeout 60 "$HPML" prof "$@" --period "$period" -o "$d" -- $MPIRUN -np 2 "$prog" spin \
        >"$d.out" 2>"$d.err" &
    bg=$!
    pid1=
    for _ in $(seq 200); do
        if grep -q ready "$d.out" 2>/dev/null && [ -f "$d/rank-1.prof" ]; then
            pid1=$(awk 'NR == 2 { print $5 }' "$d/rank-1.prof")
            [ -n "$pid1" ] && break
        fi
        sleep 0.05
    done
    sleep 0.3 # a few periodic snapshots, some hundred round trips
}

# --- kill -TERM of one rank ---------------------------------------------------------------------
spin "$tmp/term" 0.1 -q
if [ -z "$pid1" ]; then
    fail "kill -TERM: the job did not start"
    kill -TERM "$bg" 2>/dev/null
    wait "$bg"
else
    kill -TERM "$pid1"
    wait "$bg"
    rc=$?
    out=$(check "$tmp/term" '
e = []
if r["complete"]: e.append("complete")
if r["rank_info"][1]["state"] != "signal:15": e.append("rank 1 state %s" % r["rank_info"][1]["state"])
if not all(x["file"] for x in r["rank_info"]): e.append("a rank without its file")
if M[0][1] < 10 or M[1][0] < 10: e.append("matrix %s" % M)
print("; ".join(e))' 2>&1)
    [ $rc -ne 0 ] && [ -z "$out" ] && ok "kill -TERM of rank 1: both files, report incomplete (exit $rc)" ||
        fail "kill -TERM: exit $rc: $out; $(tail -2 "$tmp/term.err")"
    # merge again from the files alone: exit 3 (incomplete), the same verdict
    rm -f "$tmp/term/report.json" "$tmp/term/report.txt"
    "$HPML" prof merge -q "$tmp/term" 2>"$tmp/merge.err"
    rc=$?
    [ $rc -eq 3 ] && [ -f "$tmp/term/report.json" ] && grep -q "rank 1: signal 15" "$tmp/merge.err" &&
        ok "merge after kill: exit 3, $(grep -m1 incomplete "$tmp/merge.err")" ||
        fail "merge after kill: exit $rc: $(cat "$tmp/merge.err")"
fi

# --- kill -KILL of one rank, no periodic snapshots ------------------------------------------
# Only its counters' mapping (rank-1.live) holds rank 1's ping-pong: merge recovers them,
# and they agree with what rank 0 counted (the kill may fall between a message and its
# count: one apart at most). Traced: its trace events too (checked with the trace below).
spin "$tmp/kill" 0 --trace
if [ -z "$pid1" ] || [ ! -f "$tmp/kill/rank-1.live" ]; then
    fail "kill -KILL: the job did not start"
    kill -TERM "$bg" 2>/dev/null
    wait "$bg"
else
    kill -KILL "$pid1"
    wait "$bg"
    rc=$?
    out=$(check "$tmp/kill" '
e = []
if r["rank_info"][1]["state"] != "killed": e.append("rank 1 state %s" % r["rank_info"][1]["state"])
s1, r0 = calls["MPI_Send"]["per_rank"]["count"][1], calls["MPI_Recv"]["per_rank"]["count"][0]
if not (s1 >= 1 and s1 <= r0 <= s1 + 1 and M[1][0] == s1): e.append("rank 1 sent %d, rank 0 received %d, matrix %s" % (s1, r0, M))
# its time is that of its last call: it ping-ponged for the 0.3 s spin waits after "ready"
w0, w1 = r["rank_info"][0]["wall_s"], r["rank_info"][1]["wall_s"]
if not (0.25 <= w1 <= w0 + 0.05): e.append("rank 1 time %.3f s, rank 0 %.3f s" % (w1, w0))
print("; ".join(e))' 2>&1)
    [ $rc -ne 0 ] && [ -z "$out" ] && [ ! -e "$tmp/kill/rank-1.live" ] &&
        grep -q "rank 1 was killed: its counts up to its last call come from rank-1.live" "$tmp/kill.err" &&
        ok "kill -KILL of rank 1: its counts recovered from its mapping ($(grep -o 'MPI_Send *[0-9]*' "$tmp/kill/report.txt" | head -1))" ||
        fail "kill -KILL: exit $rc: $out; $(tail -3 "$tmp/kill.err")"
fi
# A damaged mapping does not take the report down: rank 1's, its pointers overwritten,
# is left alone (its last snapshot stands) and said so. Run without hpml prof, which would
# have recovered it at once.
mkdir -p "$tmp/bad"
# shellcheck disable=SC2086
LD_PRELOAD="$BUILD/lib/libhpml-prof.so" HPML_PROF_DIR="$tmp/bad/p" HPML_PROF_PERIOD=0 \
    timeout 60 $MPIRUN -np 2 "$prog" spin >"$tmp/bad/out" 2>&1 &
bg=$!
for _ in $(seq 200); do
    grep -q ready "$tmp/bad/out" 2>/dev/null && [ -f "$tmp/bad/p/rank-1.live" ] && break
    sleep 0.05
done
kill -KILL "$(awk 'NR == 2 { print $5 }' "$tmp/bad/p/rank-1.prof")" 2>/dev/null
wait "$bg"
/usr/bin/python3 -c "
f = open('$tmp/bad/p/rank-1.live', 'r+b')
f.seek(200)  # past the file's identity (magic, address, sizes, rank, run): its pointers
f.write(b'\xff' * 4000)" 2>/dev/null
"$HPML" prof merge -q "$tmp/bad/p" >/dev/null 2>"$tmp/bad/err"
rc=$?
[ $rc -eq 3 ] && [ -f "$tmp/bad/p/report.json" ] && grep -q "rank 1: recovering rank-1.live failed (signal" "$tmp/bad/err" &&
    ok "a damaged rank-1.live: merge still reports (exit 3), $(grep -o 'rank 1: last periodic snapshot' "$tmp/bad/err")" ||
    fail "damaged mapping: merge exit $rc: $(cat "$tmp/bad/err")"
# A normal end leaves no mapping behind.
[ -z "$(ls "$tmp"/lat/*.live "$tmp"/term/*.live 2>/dev/null)" ] && ok "no rank-N.live after a run that ended" ||
    fail "rank-N.live left: $(ls "$tmp"/lat/*.live "$tmp"/term/*.live 2>&1)"

# --- python3 with mpi4py (Debian's is built for Open MPI) ---------------------------------
if [ "$MPI" = openmpi ] && /usr/bin/python3 -c "import mpi4py, numpy" 2>/dev/null; then
    cat >"$tmp/inplace.py" <<'PY'
import numpy as np
from mpi4py import MPI
c = MPI.COMM_WORLD
p, r = c.Get_size(), c.Get_rank()
a = np.arange(1000, dtype=np.float64) + 1000.0 * r
c.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM)
want = np.arange(1000, dtype=np.float64) * p + 1000.0 * p * (p - 1) / 2
bad = c.allreduce(int(not np.array_equal(a, want)))
if r == 0:
    print("mpi4py", "ok" if bad == 0 else "WRONG", a.sum())
PY
    # shellcheck disable=SC2086
    plain=$($MPIRUN -np 2 /usr/bin/python3 "$tmp/inplace.py" 2>&1)
    prof "$tmp/py" -np 2 /usr/bin/python3 "$tmp/inplace.py"
    profiled=$(cat "$tmp/py.out")
    out=$(check "$tmp/py" 'print("" if calls["MPI_Allreduce"]["per_rank"]["count"] == [1, 1] and calls["MPI_Allreduce"]["bytes"] == 16000 else "allreduce %s" % calls["MPI_Allreduce"])' 2>&1)
    if [ $rc -eq 0 ] && [ "$plain" = "$profiled" ] && grep -q '^mpi4py ok' <<<"$plain" && [ -z "$out" ]; then
        ok "python3 + mpi4py: in-place allreduce '$plain' with and without; 1 MPI_Allreduce of 8000 bytes per rank"
    else
        fail "mpi4py: without '$plain', with '$profiled' (exit $rc) $out"
    fi
else
    echo "skipped: python3 with mpi4py (Open MPI only; needs python3-mpi4py)"
fi

# --- trace mode: Chrome trace-event JSON (gzip) -----------------------------------------
# tcheck DIR PYTHON: run PYTHON with ev = the trace's events (gzip + JSON parse)
tcheck() {
    /usr/bin/python3 - "$1/trace.json.gz" "$2" <<'PY'
import gzip, json, sys
d = json.load(gzip.open(sys.argv[1]))
ev = d["traceEvents"]
e = []
# The Trace Event Format: every event has name, ph, pid, tid and (but metadata) ts; "X"
# has dur; pid is the world rank everywhere.
for x in ev:
    if not all(k in x for k in ("name", "ph", "pid", "tid")) or x["ph"] not in "MXBEsf":
        e.append("malformed %s" % x); break
    if x["ph"] != "M" and not (isinstance(x.get("ts"), (int, float)) and x["ts"] >= 0): e.append("no ts %s" % x); break
    if x["ph"] == "X" and not x.get("dur", -1) >= 0: e.append("no dur %s" % x); break
    if not 0 <= x["pid"] < d["otherData"]["ranks"]: e.append("pid %s" % x); break
    # Only the spec's keys, its metadata names, and flow events the way Perfetto's JSON
    # importer pairs them (integer id, one cat and name) and binds them ("bp": "e" on
    # the "f" only: an "s" always binds to its enclosing slice).
    if set(x) - {"name", "cat", "ph", "pid", "tid", "ts", "dur", "args", "id", "bp"}: e.append("keys %s" % x); break
    if x["ph"] == "M" and x["name"] not in ("process_name", "process_sort_index"): e.append("metadata %s" % x); break
    if x["ph"] in "sf" and (not isinstance(x.get("id"), int) or x.get("cat") != "flow" or x["name"] != "message"
                            or ("bp" in x) != (x["ph"] == "f") or x.get("bp", "e") != "e"):
        e.append("flow %s" % x); break
# No displayTimeUnit: older Perfetto trace processors took it for the unit of ts and dur.
if set(d) != {"traceEvents", "otherData"}: e.append("top-level keys %s" % sorted(d))
X = [x for x in ev if x["ph"] == "X"]
# Per thread (pid, tid), in the file's order: slices start in time order and nest or
# follow one another (never overlap in part); every "B" has its "E", innermost first.
threads = {}
for x in ev:
    if x["ph"] in "XBE": threads.setdefault((x["pid"], x["tid"]), []).append(x)
for k, xs in threads.items():
    last, ends, opened = -1.0, [], []
    for x in xs:
        if x["ts"] < last: e.append("ts not monotonic on %s: %s" % (k, x)); break
        last = x["ts"]
        if x["ph"] == "B": opened.append(x["name"])
        elif x["ph"] == "E" and (not opened or opened.pop() != x["name"]): e.append("E without B on %s: %s" % (k, x)); break
        elif x["ph"] == "X":
            while ends and ends[-1] <= x["ts"] + 0.0015: ends.pop()
            if ends and x["ts"] + x["dur"] > ends[-1] + 0.0015: e.append("slices overlap on %s: %s" % (k, x)); break
            ends.append(x["ts"] + x["dur"])
    if opened: e.append("B without E on %s: %s" % (k, opened))
# Flows: each id once "s" and once "f" (with "bp": "e"), each inside a slice of its thread
# (what it binds to).
def inside(x, names=None):
    return any(y["pid"] == x["pid"] and y["tid"] == x["tid"] and (names is None or y["name"] in names)
               and y["ts"] <= x["ts"] <= y["ts"] + y["dur"] for y in X)
def enclosing(x):
    return [y for y in X if y["pid"] == x["pid"] and y["tid"] == x["tid"] and y["ts"] <= x["ts"] <= y["ts"] + y["dur"]]
S = [x for x in ev if x["ph"] == "s"]
F = [x for x in ev if x["ph"] == "f"]
s, f = {x["id"]: x for x in S}, {x["id"]: x for x in F}
if len(s) != len(S) or len(f) != len(F) or set(s) != set(f): e.append("flow ids do not pair: %d s, %d f" % (len(S), len(F)))
if any(x.get("bp") != "e" for x in F): e.append("a flow end without bp e")
for x in (S + F)[:400]:
    if not inside(x): e.append("flow event outside any slice: %s" % x); break
exec(sys.argv[2])
print("; ".join(e))
PY
}
# shellcheck disable=SC2086
"$HPML" prof -q --trace -o "$tmp/tr" -- $MPIRUN -np 2 "$HPML" bench latency -m 0:64 -i 10 -x 1 \
    >"$tmp/tr.out" 2>"$tmp/tr.err"
rc=$?
if [ $rc -ne 0 ] || [ ! -f "$tmp/tr/trace.json.gz" ]; then fail "trace: exit $rc: $(tail -2 "$tmp/tr.err")"
else
    out=$(tcheck "$tmp/tr" '
n = 8 * 11                      # sizes 0, 1, ..., 64; 10 iterations + 1 warm-up
sends = {p: sum(1 for x in X if x["name"] == "MPI_Send" and x["pid"] == p) for p in (0, 1)}
if sends != {0: n, 1: n}: e.append("MPI_Send events %s" % sends)
if any(x["args"]["to"] != 1 - x["pid"] for x in X if x["name"] == "MPI_Send"): e.append("send peers")
# Every message flows from a send on one rank to its receive on the other: one per
# MPI_Send and one per connection Sendrecv in each direction.
if len(s) != 2 * (n + 1) or set(s) != set(f): e.append("flows: %d starts, %d ends" % (len(s), len(f)))
for i in list(s)[:40]:
    if s[i]["pid"] == f[i]["pid"] or not inside(s[i], ("MPI_Send", "MPI_Sendrecv")) \
            or not inside(f[i], ("MPI_Recv", "MPI_Sendrecv")):
        e.append("flow %s -> %s" % (s[i], f[i])); break')
    [ -z "$out" ] && ok "trace: valid JSON, pid = rank, 2 x 88 MPI_Send events, 178 flows send -> receive" ||
        fail "trace: $out"
fi
# Receives posted with MPI_Irecv: each message's flow ends in the call that completed its
# receive (waited for in reverse order; wildcards; MPI_Waitall of 2 and of 20, MPI_Testsome,
# MPI_Wait). The profiler timing itself (HPML_PROF_SELF=1) includes the matching.
# shellcheck disable=SC2086
HPML_PROF_SELF=1 "$HPML" prof -q --trace -o "$tmp/ir" -- $MPIRUN -np 2 "$prog" irecv >/dev/null 2>"$tmp/ir.err"
rc=$?
out=$(tcheck "$tmp/ir" '
def call(x, names):     # the slice of one of names around x, as (name, its index among them)
    for y in enclosing(x):
        if y["name"] in names:
            same = [z for z in X if z["pid"] == y["pid"] and z["name"] == y["name"]]
            return y, same.index(y)
    return None, -1
got = {}
for i in s:
    snd, _ = call(s[i], ("MPI_Send", "MPI_Isend"))
    rcv, k = call(f[i], ("MPI_Wait", "MPI_Waitall", "MPI_Testsome"))
    if snd is None or rcv is None: e.append("flow %s -> %s not on a send and a completion" % (s[i], f[i])); break
    got[snd["args"]["bytes"]] = (f[i]["pid"], rcv["name"], k if rcv["name"] == "MPI_Wait" else 0)
# the 20 of tag 4 end in the second MPI_Waitall
waitall = [x for x in X if x["pid"] == 1 and x["name"] == "MPI_Waitall"]
if len(waitall) != 2 or sum(1 for i in s if enclosing(f[i]) == [waitall[1]]) != 20: e.append("tag 4 flows not in the second MPI_Waitall")
want = {8: (1, "MPI_Wait", 2), 16: (1, "MPI_Wait", 1), 24: (1, "MPI_Wait", 0), 32: (1, "MPI_Waitall", 0),
        40: (1, "MPI_Waitall", 0), 56: (1, "MPI_Testsome", 0), 64: (1, "MPI_Testsome", 0), 48: (0, "MPI_Wait", 0)}
want.update({b: (1, "MPI_Waitall", 0) for b in range(100, 120)})
if len(s) != 28: e.append("%d flows, want 28" % len(s))
if got != want: e.append("flows (bytes: rank, call, which MPI_Wait) %s, want %s" % (sorted(got.items()), sorted(want.items())))' 2>&1)
out=$out$(self_check "$tmp/ir" 2>&1)
[ $rc -eq 0 ] && [ -z "$out" ] && ok "trace: 28 flows into the MPI_Wait/Waitall/Testsome that completed each MPI_Irecv; HPML_PROF_SELF timed every call" ||
    fail "trace of MPI_Irecv (exit $rc): $out $(tail -2 "$tmp/ir.err")"
# shellcheck disable=SC2086
"$HPML" prof -q --trace --trace-max 300 -o "$tmp/cap" -- $MPIRUN -np 2 "$HPML" bench latency \
    -m 0:64 -i 10 -x 1 >/dev/null 2>"$tmp/cap.err"
out=$(tcheck "$tmp/cap" 'm = sum(1 for x in ev if x["ph"] != "M")
if not 297 <= m <= 300: e.append("%d events for a cap of 300" % m)' 2>&1)
[ -z "$out" ] && ok "trace cap 300: $(grep -o '[0-9]* events' "$tmp/cap.err")" || fail "trace cap: $out"
# shellcheck disable=SC2086
"$HPML" prof -q --trace --trace-steps 1:2 -o "$tmp/steps" -- $MPIRUN -np 2 "$prog" steps \
    >/dev/null 2>"$tmp/steps.err"
out=$(tcheck "$tmp/steps" '
sends = sorted(x["pid"] for x in X if x["name"] == "MPI_Send")
if sends != [0, 0, 1, 1]: e.append("MPI_Send events of step 1: %s" % sends)
reg = sorted((x["pid"], x["ph"], x["name"]) for x in ev if x["ph"] in "BE")
if reg != [(0, "B", "step"), (0, "E", "step"), (1, "B", "step"), (1, "E", "step")]: e.append("regions %s" % reg)' 2>&1)
[ -z "$out" ] && ok "trace steps 1:2: step 1 only (2 round trips), its region on both ranks" ||
    fail "trace steps: $out"
out=$(tcheck "$tmp/io" "
w = sorted((x['pid'], x['args']['file'], x['args']['bytes']) for x in X if x['cat'] == 'io' and x['name'] == 'write')
want = sorted((p, '$tmp/iodata/io-%d.dat' % p, 4096) for p in (0, 1) for _ in range(3))
if w != want: e.append('write events %s' % w)" 2>&1)
[ -z "$out" ] && ok "trace: each rank's 3 writes of 4096 bytes on the timeline, with their file" ||
    fail "trace of I/O: $out"
if [ -f "$tmp/kill/report.json" ]; then
    out=$(tcheck "$tmp/kill" "
s1 = [c for c in json.load(open('$tmp/kill/report.json'))['calls'] if c['name'] == 'MPI_Send'][0]['per_rank']['count'][1]
n1 = sum(1 for x in X if x['pid'] == 1 and x['name'] == 'MPI_Send')
if n1 != s1 or sum(1 for i in s if s[i]['pid'] == 1) != n1: e.append('rank 1: %d MPI_Send counted, %d events, flows %d' % (s1, n1, len(s)))" 2>&1)
    [ -z "$out" ] && ok "trace of the rank killed by SIGKILL: one event and one flow per counted send" ||
        fail "trace after kill -KILL: $out"
fi

# --- the library reaches the ranks only, not Hydra's or Open MPI's own processes --------
# A launcher named mpiexec.hydra (or orterun) gets the library through its option for the
# ranks' environment and none in its own (Open MPI also -x for each profiler setting,
# which its remote ranks would not get otherwise); another command gets it in its
# environment.
# (Stand-in launchers that write what they got; no rank runs, so no report.)
mkdir -p "$tmp/fake"
for l in mpiexec.hydra orterun other; do
    printf '#!/bin/sh\necho "env=$LD_PRELOAD args=$*" >"%s/%s.got"\n' "$tmp/fake" "$l" >"$tmp/fake/$l"
    chmod +x "$tmp/fake/$l"
    env -u HPML_PROF_SELF -u HPML_PROF_CALLSITES -u HPML_PROF_LIVE LD_PRELOAD= \
        "$HPML" prof -q --trace -o "$tmp/fake/out" -- "$tmp/fake/$l" -np 2 prog >/dev/null 2>&1
done
lib=$(sed -n 's/^env= args=-genv LD_PRELOAD \(.*libhpml-prof.so\) -np 2 prog$/\1/p' "$tmp/fake/mpiexec.hydra.got")
x="-x LD_PRELOAD=$lib -x HPML_PROF_DIR -x HPML_PROF_PERIOD -x HPML_PROF_TRACE -x HPML_PROF_TRACE_MAX"
if [ -z "$lib" ] || [ "$(cat "$tmp/fake/orterun.got")" != "env= args=$x -np 2 prog" ] ||
    [ "$(cat "$tmp/fake/other.got")" != "env=$lib args=-np 2 prog" ]; then
    fail "launcher's preload: $(cat "$tmp"/fake/*.got)"
else ok "LD_PRELOAD: -genv for Hydra, -x for Open MPI (and its settings), the environment for other launchers"
fi

# --- usage and file errors ---------------------------------------------------------------------
"$HPML" prof -q -o "$tmp/x" "$prog" >/dev/null 2>"$tmp/e1"
[ $? -eq 2 ] && grep -q "give the command to profile after '--'" "$tmp/e1" && ok "no '--': exit 2" ||
    fail "no '--': $(cat "$tmp/e1")"
"$HPML" prof --lib "$tmp/none.so" -o "$tmp/x" -- true >/dev/null 2>"$tmp/e2"
[ $? -eq 1 ] && grep -q "none.so: No such file" "$tmp/e2" && ok "missing --lib: exit 1" ||
    fail "missing --lib: $(cat "$tmp/e2")"
mkdir -p "$tmp/empty"
"$HPML" prof merge "$tmp/empty" >/dev/null 2>"$tmp/e3"
[ $? -eq 1 ] && grep -q "no profiler files" "$tmp/e3" && ok "merge of an empty folder: exit 1" ||
    fail "merge of an empty folder: $(cat "$tmp/e3")"
"$HPML" prof merge >/dev/null 2>"$tmp/e4"
[ $? -eq 2 ] && grep -q "missing the folder" "$tmp/e4" && ok "merge without a folder: exit 2" ||
    fail "merge without a folder: $(cat "$tmp/e4")"
echo "hpml-prof 1" >"$tmp/empty/rank-0.prof"
"$HPML" prof merge "$tmp/empty" >/dev/null 2>"$tmp/e5"
[ $? -eq 1 ] && grep -q "not a file of libhpml-prof.so" "$tmp/e5" && ok "merge of a foreign file: exit 1" ||
    fail "merge of a foreign file: $(cat "$tmp/e5")"
# shellcheck disable=SC2086
$MPIRUN -np 2 "$HPML" prof -- true >/dev/null 2>"$tmp/e6"
[ $? -eq 2 ] && grep -q "run hpml prof as one process" "$tmp/e6" && ok "under mpirun: exit 2" ||
    fail "under mpirun: $(cat "$tmp/e6")"
# An earlier run's rank file in the same folder is ignored (the newest run is reported).
prof "$tmp/lat" -np 1 "$prog" inplace 10
out=$(check "$tmp/lat" 'print("" if r["ranks"] == 1 and r["stale_files"] == 1 and r["complete"] else "ranks %d stale %d" % (r["ranks"], r["stale_files"]))' 2>&1)
[ $rc -eq 0 ] && [ -z "$out" ] && ok "an earlier run's file is ignored" || fail "stale files: $out"

[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all ok"
