#!/usr/bin/python3
"""K-Means Lloyd: hpml (MPI ranks) vs scikit-learn 1.2 (OpenMP threads), side by side.

Same data (uniform random f32, so labels keep changing and no run stops early), same
initial centroids (a .npy file given to both), tol=0. The time per iteration is taken
the same way for both: the in-process time of the fit (scikit-learn: KMeans.fit around
the call; hpml: hpml_kmeans_fit, the slowest rank, "compute_seconds" of --json) with I2
and with I1 iterations, (t(I2) - t(I1)) / (I2 - I1), so process start-up, reading,
centring and the final label/inertia pass cancel out. Each fit is repeated --repeat
times and the median taken. hpml's own per-iteration clock (lloyd_iter_seconds /
iterations, slowest rank, at I2) is printed beside it as a cross-check.

Ranks are bound to cores and BLAS is one thread per rank. On a shared machine run the
whole script under `chrt -f 1` (scikit-learn runs in this process, mpirun inherits the
policy) so both sides get the cores ahead of ordinary jobs.

Also measures the machine: single-core SGEMM peak (numpy's BLAS, one thread) and read
bandwidth (one core, and two processes at once).

  chrt -f 1 /usr/bin/python3 bench/kmeans_vs_sklearn.py --hpml build/openmpi/bin/hpml \\
      [--mpirun "mpirun.openmpi --allow-run-as-root --bind-to core"] \\
      [--shapes 1000000x32,200000x784] [--k 16] [--ranks 1,2] [--iters 5,15] [--repeat 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from threadpoolctl import threadpool_limits


def measure_machine():
    with threadpool_limits(1):
        a = np.random.rand(2048, 2048).astype(np.float32)
        np.dot(a, a)
        best = 1e9
        for _ in range(3):
            t = time.perf_counter()
            np.dot(a, a)
            best = min(best, time.perf_counter() - t)
        gemm = 2 * 2048 ** 3 / best / 1e9
    x = np.ones(256 * 2 ** 20 // 4 * 4, dtype=np.float32)  # 1 GiB... 256 Mi floats
    x.sum()
    best = 1e9
    for _ in range(3):
        t = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t)
    bw1 = x.nbytes / best / 1e9
    # two processes reading at once: the bandwidth two ranks share
    code = ("import numpy as np,time;x=np.ones(%d,dtype=np.float32);x.sum();"
            "b=min((lambda t:(x.sum(),time.perf_counter()-t)[1])(time.perf_counter()) "
            "for _ in range(3));print(x.nbytes/b/1e9)" % (x.size // 2))
    ps = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
          for _ in range(2)]
    bw2 = sum(float(p.communicate()[0]) for p in ps)
    return gemm, bw1, bw2


def sk_time(X, C0, iters, threads):
    from sklearn.cluster import KMeans
    with threadpool_limits(threads, user_api="openmp"):
        t = time.perf_counter()
        km = KMeans(len(C0), init=C0, n_init=1, max_iter=iters, tol=0.0,
                    algorithm="lloyd").fit(X)
        t = time.perf_counter() - t
    if km.n_iter_ != iters:
        print(f"# warning: sklearn stopped after {km.n_iter_} of {iters}", file=sys.stderr)
    return t, km.inertia_


def hpml_time(args, ranks, xpath, cpath, iters):
    cmd = args.mpirun.split() + ["-np", str(ranks), args.hpml, "kmeans", "--data", xpath,
                                 "--init", cpath, "--max-iter", str(iters), "--tol", "0",
                                 "--json"]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    for attempt in (1, 2):
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode == 0:
            break
        # Say why (a shared machine's transient failures should not pass silently),
        # then retry once.
        print(f"# hpml failed (exit {p.returncode}, attempt {attempt}): {p.stderr.strip()}",
              file=sys.stderr)
    else:
        sys.exit(f"hpml failed twice: {' '.join(cmd)}")
    s = json.loads(p.stdout)
    if s["n_iter"] != iters:
        print(f"# warning: hpml stopped after {s['n_iter']} of {iters}", file=sys.stderr)
    return s["compute_seconds"], s["inertia"], s["lloyd_iter_seconds"] / s["iterations"]


def per_iter(fn, i1, i2, repeat):
    """Median fit times at i1 and i2 iterations (runs interleaved, so a burst of load
    hits both), their difference per iteration, and the last i2 run's other results."""
    ta, tb = [], []
    for _ in range(repeat):
        ta.append(fn(i1)[0])
        r = fn(i2)
        tb.append(r[0])
    return max(statistics.median(tb) - statistics.median(ta), 1e-9) / (i2 - i1), r

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hpml", required=True, metavar="PATH", help="the hpml binary (e.g. build/openmpi/bin/hpml)")
    ap.add_argument("--mpirun", default="mpirun.openmpi --allow-run-as-root --bind-to core",
                    help="launcher command for the hpml runs (default: %(default)s)")
    ap.add_argument("--shapes", default="1000000x32,200000x784", metavar="NxD,...",
                    help="data shapes, rows x features (default: %(default)s)")
    ap.add_argument("--k", type=int, default=16, help="clusters (default: %(default)s)")
    ap.add_argument("--ranks", default="1,2", metavar="R,...",
                    help="hpml rank counts; scikit-learn gets as many threads (default: %(default)s)")
    ap.add_argument("--iters", default="5,15", metavar="I1,I2",
                    help="the two iteration counts whose time difference is measured "
                         "(default: %(default)s)")
    ap.add_argument("--repeat", type=int, default=5, metavar="N",
                    help="fits per setting, the median taken (default: %(default)s)")
    ap.add_argument("--dir", default=None,
                    help="where the data files go (default: a new temporary directory)")
    args = ap.parse_args()
    i1, i2 = (int(v) for v in args.iters.split(","))
    ranks = [int(r) for r in args.ranks.split(",")]
    d = args.dir or tempfile.mkdtemp(prefix="hpml-kmeans-bench-")

    gemm, bw1, bw2 = measure_machine()
    print(f"# machine: SGEMM peak {gemm:.1f} GFLOP/s per core (numpy BLAS, 1 thread); "
          f"read bandwidth {bw1:.1f} GB/s one core, {bw2:.1f} GB/s two processes")
    print(f"# per-iteration time = (fit time at {i2} iters - at {i1} iters) / {i2 - i1}, "
          f"medians of {args.repeat}; f32, k={args.k}, same initial centroids; "
          f"'own' = hpml's own per-iteration clock; load average {os.getloadavg()[0]:.2f}")
    print(f"# mpirun: {args.mpirun}")
    hdr = (f"{'shape':>14} {'impl':>18} {'ms/iter':>9} {'own ms':>7} {'GFLOP/s':>8} "
           f"{'%peak':>6} {'GB/s':>6} {'vs sk':>6} {'inertia':>14}")
    print(hdr)
    rows = []
    for shape in args.shapes.split(","):
        n, p = (int(v) for v in shape.split("x"))
        rng = np.random.default_rng(1)
        X = rng.random((n, p), dtype=np.float32)
        C0 = X[rng.choice(n, args.k, replace=False)].copy()
        xpath, cpath = f"{d}/X_{shape}.npy", f"{d}/C0_{shape}.npy"
        np.save(xpath, X)
        np.save(cpath, C0)
        flops = 2.0 * n * p * args.k
        nbytes = 4.0 * n * p
        res = {}
        for th in (1, 2):
            t, last = per_iter(lambda it: sk_time(X, C0, it, th), i1, i2, args.repeat)
            res[f"sklearn {th} thr"] = (t, last[1], th, None)
        for r in ranks:
            t, last = per_iter(lambda it: hpml_time(args, r, xpath, cpath, it), i1, i2,
                               args.repeat)
            res[f"hpml {r} rank{'s' if r > 1 else ''}"] = (t, last[1], r, last[2])
        sk2 = res["sklearn 2 thr"][0]
        for name, (t, inertia, cores, own) in res.items():
            owns = f"{own * 1e3:7.2f}" if own else f"{'-':>7}"
            line = (f"{shape:>14} {name:>18} {t * 1e3:9.2f} {owns} {flops / t / 1e9:8.1f} "
                    f"{100 * flops / t / 1e9 / (gemm * cores):6.1f} {nbytes / t / 1e9:6.1f} "
                    f"{sk2 / t:6.2f} {inertia:14.7g}")
            print(line, flush=True)
            rows.append((shape, name, t))
        print(f"# load average now {os.getloadavg()[0]:.2f}")
        h1 = res.get("hpml 1 rank", (None,))[0]
        h2 = res.get("hpml 2 ranks", (None,))[0]
        if h1 and h2:
            print(f"# {shape}: hpml scaling 1->2 ranks {h1 / h2:.2f}x, "
                  f"efficiency {100 * h1 / (2 * h2):.0f}%; hpml 2 ranks vs sklearn 2 threads "
                  f"{sk2 / h2:.2f}x")
        os.remove(xpath)


if __name__ == "__main__":
    main()
