#!/usr/bin/python3
"""The paired statistics of bench/omb_compare.sh: reads the rounds' outputs of
osu_allreduce (DIR/omb.R) and of hpml bench (DIR/hpml.R), R = 1..ROUNDS, and prints per
size the median Avg latency of each program, the median over the rounds of the round's
ratio hpml / OMB (the two runs of a round are adjacent in time, so a load change between
rounds cancels), a distribution-free 95% confidence interval of that median (order
statistics of the sign test) and the verdict against the tolerance:

    within   the whole interval lies inside 1 +- TOL
    outside  the whole interval lies outside it
    open     the interval straddles a bound: more rounds, or a quieter machine, decide

    omb_compare_stats.py DIR ROUNDS TOL_PERCENT [--markdown] [--names A,B]

--names compares DIR/B.R against DIR/A.R instead (bench/omb_factors.sh: one set-up
against another), with A and B as the column titles. Exit 0 when every size is within, 1 otherwise, 2 on bad input.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prof_overhead_stats import median, median_ci  # noqa: E402  (one sign-test interval)


def avg_rows(path):
    """(size -> Avg latency, decimals printed) from one program's output: OMB-shaped rows
    (the second column; hpml's further columns are ignored) or hpml bench's --csv (its
    size and avg_us columns). decimals is the most seen in a value: the printed
    resolution."""
    out, dec = {}, 0
    with open(path) as f:
        lines = f.read().splitlines()
    head = next((ln for ln in lines if ln and not ln.startswith("#")), "")
    if head.startswith("case,"):
        cols = head.split(",")
        if "size" not in cols or "avg_us" not in cols:
            raise ValueError(f"{path}: a CSV header without size and avg_us")
        si, ai = cols.index("size"), cols.index("avg_us")
        rows = [ln.split(",") for ln in lines[lines.index(head) + 1:] if ln and ln[0] != "#"]
        pairs = [(r[si], r[ai]) for r in rows if len(r) == len(cols)]
    else:
        pairs = [ln.split()[:2] for ln in lines
                 if not ln.startswith("#") and len(ln.split()) >= 2]
    for size, avg in pairs:
        if size.isdigit() and int(size) > 0:
            out[int(size)] = float(avg)
            dec = max(dec, len(avg.partition(".")[2]))
    return out, dec


def compare(d, rounds, tol, names=("omb", "hpml")):
    """Rows (size, reference median, other median, ratio median, ci or None, verdict), and
    each program's printed decimals {"omb": n, "hpml": n}."""
    read = {k: [avg_rows(os.path.join(d, f"{n}.{r}")) for r in range(1, rounds + 1)]
            for k, n in zip(("omb", "hpml"), names)}
    runs = {k: [rows for rows, _ in v] for k, v in read.items()}
    decimals = {k: max(dec for _, dec in v) for k, v in read.items()}
    sizes = sorted(set.intersection(*(set(x) for x in runs["omb"] + runs["hpml"])))
    if not sizes:
        raise ValueError(f"no size common to every round's output in {d}")
    rows = []
    for s in sizes:
        o = [r[s] for r in runs["omb"]]
        h = [r[s] for r in runs["hpml"]]
        if min(o) <= 0:
            raise ValueError(f"osu_allreduce reported {min(o)} us at {s} bytes")
        ratio = [b / a for a, b in zip(o, h)]
        ci = median_ci(ratio)
        lo_b, hi_b = 1 - tol / 100, 1 + tol / 100
        if ci is None:
            verdict = "open"
        elif ci[0] >= lo_b and ci[1] <= hi_b:
            verdict = "within"
        elif ci[1] < lo_b or ci[0] > hi_b:
            verdict = "outside"
        else:
            verdict = "open"
        rows.append((s, median(o), median(h), median(ratio), ci, verdict))
    return rows, decimals


def main():
    argv = sys.argv[1:]
    md = "--markdown" in argv
    names = None
    if "--names" in argv:
        i = argv.index("--names")
        names = tuple(argv[i + 1].split(",")) if i + 1 < len(argv) else ()
        del argv[i:i + 2]
    args = [a for a in argv if a != "--markdown"]
    if len(args) != 3 or (names is not None and (len(names) != 2 or not all(names))):
        print("usage: omb_compare_stats.py DIR ROUNDS TOL_PERCENT [--markdown] [--names A,B]",
              file=sys.stderr)
        return 2
    try:
        rounds, tol = int(args[1]), float(args[2])
        if rounds < 1 or tol <= 0:
            raise ValueError("ROUNDS must be >= 1 and TOL_PERCENT > 0")
        rows, dec = compare(args[0], rounds, tol, names or ("omb", "hpml"))
    except (OSError, ValueError) as e:
        print(f"omb_compare_stats: {e}", file=sys.stderr)
        return 2
    a, b = names or ("OMB", "hpml")
    if md:
        ta, tb = (f"{a} µs", f"{b} µs") if names else ("`osu_allreduce` µs", "`--impl mpi` µs")
        print(f"| size (B) | {ta} | {tb} | {b} / {a}, median | 95% CI | ±{tol:g}% |")
        print("|---:|---:|---:|---:|---:|:---|")
    else:
        print(f"{'size':>8} {a + ' us':>9} {b + ' us':>9} {'ratio':>7} {'95% CI':>15}  verdict")
    for s, o, h, r, ci, v in rows:
        cis = f"{ci[0]:.3f}–{ci[1]:.3f}" if ci else "-"
        os_, hs = f"{o:.{dec['omb']}f}", f"{h:.{dec['hpml']}f}"
        if md:
            print(f"| {s} | {os_} | {hs} | {r:.3f} | {cis} | {v} |")
        else:
            print(f"{s:>8} {os_:>9} {hs:>9} {r:>7.3f} {cis.replace('–', '-'):>15}  {v}")
    # A printed step that is a large part of the smallest latency quantises the ratios.
    for k, title in (("omb", a), ("hpml", b)):
        step = 10.0 ** -dec[k]
        least = min(row[1 if k == "omb" else 2] for row in rows)
        if least > 0 and step / least > 0.005:
            print(f"# note: {title} prints {dec[k]} decimals: its {step:g} us step is "
                  f"{100 * step / least:.1f}% of its {least:g} us, so the ratios move in steps "
                  f"of that size" + (" (build OMB with -DFLOAT_PRECISION=4: bench/omb_compare.sh"
                                     " --help)" if k == "omb" and not names else ""))
    n = {v: sum(1 for row in rows if row[5] == v) for v in ("within", "outside", "open")}
    cover = next((ci[2] for *_, ci, _ in rows if ci), None)
    print(f"# {rounds} rounds; {n['within']} of {len(rows)} sizes within ±{tol:g}%, "
          f"{n['outside']} outside, {n['open']} open"
          + (f" (interval coverage {100 * cover:.1f}%)" if cover else
             " (fewer than 6 rounds: no 95% interval)"))
    return 0 if n["within"] == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
