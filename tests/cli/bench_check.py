#!/usr/bin/env python3
"""Plausibility checks for `hpml bench --csv` output (used by tests/cli/bench_*.sh).

    bench_check.py FILE.csv [--ranks P] [--expect-fail IMPL_PREFIX] [--impls N]

Checks every row: latencies and times finite and >= 0; min <= avg <= max <= maxrank
(the mean of per-iteration maxima across ranks can never be below a per-rank mean);
bandwidths below a generous memory-bandwidth bound; busbw == size * mult * factor /
latency (nccl-tests' definition, recomputed here independently of the harness);
validation "pass" on every row unless the implementation is expected to fail (then
"fail" on every row whose result holds at least one element). Exit 1 on any failure.
"""
import csv
import math
import sys

# One core copying at a few GB/s is the real ceiling on this machine kind; 100 GB/s is
# far above any memory system a CI runner has, so a number above it is a harness bug
# (a time unit off by 10^3, a byte count off by p), never a fast machine.
MEM_BW_BOUND_MBPS = 100000.0

ESIZE = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i8": 1, "u8": 1, "i32": 4, "i64": 8}
MULT = {"allgather": "p", "alltoall": "p", "gather": "p", "scatter": "p"}
FACTOR = {"allreduce": "2(p-1)/p", "iallreduce": "2(p-1)/p", "reduce_scatter": "(p-1)/p",
          "allgather": "(p-1)/p", "alltoall": "(p-1)/p", "gather": "(p-1)/p",
          "scatter": "(p-1)/p", "bcast": "1", "reduce": "1", "ibcast": "1"}


def factor(case, p):
    f = FACTOR[case]
    return {"1": 1.0, "(p-1)/p": (p - 1) / p, "2(p-1)/p": 2 * (p - 1) / p}[f]


def num(row, key):
    v = row.get(key, "")
    return None if v in ("", None) else float(v)


def main():
    args = sys.argv[1:]
    path = args.pop(0)
    ranks = None
    expect_fail = None
    want_impls = None
    while args:
        a = args.pop(0)
        if a == "--ranks":
            ranks = int(args.pop(0))
        elif a == "--expect-fail":
            expect_fail = args.pop(0)
        elif a == "--impls":
            want_impls = int(args.pop(0))
    errors = []
    rows = list(csv.DictReader(open(path)))
    if not rows:
        print(f"{path}: no rows", file=sys.stderr)
        return 1
    impls = sorted({r["impl"] for r in rows})
    if want_impls is not None and len(impls) < want_impls:
        errors.append(f"only {len(impls)} implementations: {impls}")
    for r in rows:
        where = f"{r['case']} {r['impl']} {r['dtype']} p={r['ranks']} size={r['size']}"
        p = int(r["ranks"])
        if ranks is not None and p != ranks:
            errors.append(f"{where}: ranks {p}, expected {ranks}")
        size = int(r["size"])
        for key in ("avg_us", "min_us", "max_us", "maxrank_us", "overall_us", "compute_us",
                    "pure_us"):
            v = num(r, key)
            if v is not None and (not math.isfinite(v) or v < 0):
                errors.append(f"{where}: {key} = {v} (negative or not finite)")
        avg, mn, mx, mr = (num(r, k) for k in ("avg_us", "min_us", "max_us", "maxrank_us"))
        eps = 2e-4  # the CSV rounds to 4 decimals
        if None not in (avg, mn, mx):
            if not (mn <= avg + eps and avg <= mx + eps):
                errors.append(f"{where}: min {mn} <= avg {avg} <= max {mx} violated")
        if mr is not None and mx is not None and mr + eps < mx * (1 - 1e-9):
            errors.append(f"{where}: per-iteration max across ranks {mr} below max {mx}")
        for key in ("bw_MBps", "algbw_MBps", "busbw_MBps"):
            v = num(r, key)
            if v is not None and (v < 0 or v > MEM_BW_BOUND_MBPS):
                errors.append(f"{where}: {key} = {v} outside [0, {MEM_BW_BOUND_MBPS}]")
        # Point-to-point latency: the message cannot cross faster than memory copies it.
        if r["case"] in ("latency", "multi_lat") and size > 0 and avg:
            if size / avg > MEM_BW_BOUND_MBPS:
                errors.append(f"{where}: {size} B in {avg} us is above the memory bound")
        ov = num(r, "overlap_pct")
        if ov is not None and not (0 <= ov <= 100):
            errors.append(f"{where}: overlap {ov}% outside [0, 100]")
        bus = num(r, "busbw_MBps")
        if bus is not None and r["case"] in FACTOR:
            lat = num(r, "pure_us") if r["case"].startswith("i") else avg
            mult = p if MULT.get(r["case"]) == "p" else 1
            want = size * mult * factor(r["case"], p) / lat if lat and lat > 0 else 0.0
            if abs(bus - want) > 1e-2 * max(want, 1.0) + 0.01:
                errors.append(f"{where}: busbw {bus} but size*{mult}*factor/latency = {want}")
        v = r["validation"]
        failing = expect_fail is not None and r["impl"].startswith(expect_fail)
        esize = ESIZE.get(r["dtype"], 1)
        elems = size // esize // (p if r["case"] == "reduce_scatter" else 1)
        if failing and elems > 0:
            if v != "fail":
                errors.append(f"{where}: validation '{v}', expected 'fail' (broken algorithm)")
        elif v not in ("pass", ""):
            errors.append(f"{where}: validation '{v}'")
    for e in errors[:50]:
        print("bench_check: " + e, file=sys.stderr)
    print(f"bench_check: {path}: {len(rows)} rows, {len(impls)} implementations, "
          f"{len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
