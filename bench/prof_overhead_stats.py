#!/usr/bin/python3
"""The paired statistics of bench/prof_overhead.sh: reads its rows ("ROUND WORKLOAD MODE
VALUE", one run each) and prints, per workload and profiler mode, the median of the rounds'
paired differences against the plain run of the same round, with a distribution-free 95%
confidence interval of that median (order statistics of the sign test), and the verdict
against the target.

    prof_overhead_stats.py ROWS

Wall times (seconds) are compared as ratios, mode / plain - 1, in percent; the latency
(microseconds) as a difference, mode - plain. Rows of workload W-loop hold
the program's own time of its loop, paired like the wall times and held to W's bound
(inside the program only). Rows of workload W-self hold the
profiler's own time in W's profiled run (seconds, HPML_PROF_SELF=1), printed as a
percentage of the same round's plain wall time: its median and largest over the rounds,
and whether the largest is within W's target.
"""
import math
import sys

TARGETS = {  # (workload, mode): bound on the paired difference
    ("latency", "stats"): 0.15,  # microseconds added
    ("train", "stats"): 1.0,  # percent
    ("train", "trace"): 5.0,
    ("kmeans", "stats"): 1.0,
    ("kmeans", "trace"): 5.0,
}


def median(v):
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def median_ci(v, level=0.95):
    """The order statistics (d_k, d_{n+1-k}), k as large as possible, whose interval
    covers the population median with probability >= level (sign test), and that
    probability; None when n is too small (n < 6 for 95%)."""
    s = sorted(v)
    n = len(s)
    alpha = 1 - level
    k = 0  # P(Binom(n, 1/2) <= k - 1) <= alpha / 2: the interval is [s[k-1], s[n-k]]
    cdf = 0.0
    for j in range(n + 1):
        cdf += math.comb(n, j) / 2**n
        if cdf > alpha / 2:
            break
        k = j + 1
    if k == 0:
        return None
    cover = 1 - 2 * sum(math.comb(n, j) for j in range(k)) / 2**n
    return s[k - 1], s[n - k], cover


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: prof_overhead_stats.py ROWS")
    runs = {}  # (workload, round) -> {mode: value}
    with open(sys.argv[1]) as f:
        for line in f:
            if not line.strip():
                continue
            r, w, m, x = line.split()
            runs.setdefault((w, int(r)), {})[m] = float(x)
    order = ["latency", "train", "kmeans", "train-loop", "kmeans-loop", "train-self", "kmeans-self"]
    selfs = sorted({w for w, _ in runs if w.endswith("-self")}, key=order.index)
    workloads = sorted({w for w, _ in runs if w not in selfs}, key=order.index)
    print(f"{'target':<18} {'pairs':>5} {'plain':>10} {'mode':>10} {'median diff':>12} "
          f"{'95% CI':>22} {'bound':>7}  verdict")
    for w in workloads:
        rounds = sorted(r for ww, r in runs if ww == w)
        for m in ("stats", "trace"):
            pairs = [runs[(w, r)] for r in rounds if "plain" in runs[(w, r)] and m in runs[(w, r)]]
            if not pairs:
                continue
            if w == "latency":
                d = [p[m] - p["plain"] for p in pairs]
                unit = "us"
            else:
                d = [100 * (p[m] / p["plain"] - 1) for p in pairs]
                unit = "%"
            ci = median_ci(d)
            bound = TARGETS.get((w.replace("-loop", ""), m))
            if ci is None:
                verdict, cis = "too few pairs for a 95% interval (>= 6)", "-"
            else:
                lo, hi, cover = ci
                cis = f"[{lo:+.3f}, {hi:+.3f}] {unit}"
                if bound is None:
                    verdict = ""
                elif hi <= bound:
                    verdict = f"met (upper bound <= {bound:g} {unit}; coverage {100 * cover:.1f}%)"
                elif lo > bound:
                    verdict = f"NOT met (lower bound > {bound:g} {unit})"
                else:
                    verdict = f"not resolved (interval contains {bound:g} {unit})"
            print(f"{w + ' ' + m:<18} {len(d):>5} {median([p['plain'] for p in pairs]):>10.4f} "
                  f"{median([p[m] for p in pairs]):>10.4f} {median(d):>+9.3f} {unit:<2} {cis:>22} "
                  f"{'' if bound is None else format(bound, 'g'):>7}  {verdict}")
    if selfs:
        print(f"{'own time':<18} {'runs':>5} {'median':>10} {'largest':>10}  "
              "(the profiler's own time, largest rank, % of the round's plain wall time)")
    for ws in selfs:
        w = ws[: -len("-self")]
        for m in ("stats", "trace"):
            pct = [100 * runs[(ws, r)][m] / runs[(w, r)]["plain"]
                   for ww, r in runs if ww == ws and m in runs[(ws, r)]
                   and "plain" in runs.get((w, r), {})]
            if not pct:
                continue
            bound = TARGETS.get((w, m))
            verdict = "" if bound is None else (
                f"within {bound:g} %" if max(pct) <= bound else f"largest beyond {bound:g} %")
            print(f"{w + ' ' + m:<18} {len(pct):>5} {median(pct):>9.3f}% {max(pct):>9.3f}%  {verdict}")
    print("# every round (plain/stats/trace; seconds, latency in us):")
    for w in workloads + selfs:
        for r in sorted(r for ww, r in runs if ww == w):
            v = runs[(w, r)]
            print(f"#   {w} round {r}: " + " ".join(f"{m} {v[m]:.4f}" for m in ("plain", "stats", "trace") if m in v))


if __name__ == "__main__":
    main()
