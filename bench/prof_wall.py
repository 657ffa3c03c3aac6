#!/usr/bin/python3
"""The wall-time overhead of libhpml-prof.so on `hpml train` and `hpml kmeans` (targets:
statistics mode <= +1%, trace mode <= +5%), by many short runs in paired blocks.

    chrt -f 1 bench/prof_wall.py [--mpi openmpi,mpich] [--commands train,kmeans]
                                 [--modes stats,trace] [--budget SECONDS] [--blocks N]
                                 [--run SPEC] [--quick]

Each workload (MPI x command, 2 ranks bound one per core) runs in blocks of six in the
order plain, stats, trace, trace, stats, plain (every other block stats and trace swap;
with --modes stats alone: plain, stats, stats, plain): each profiled mode gets two
pairs per block, one with plain first and one with plain last (ABBA), so that a linear
drift of the machine's speed and the place in the pair cancel. Blocks go round-robin
over the workloads (the drift is shared alike) until --blocks per workload or until the
next round would end after --budget seconds.

Per workload and mode it prints the median of the pairs' ratios (mode / plain - 1, %)
with a distribution-free 95% interval of that median (order statistics of the sign
test: bench/prof_overhead_stats.py), and the verdict against the target: met when the
upper end is within it, missed when the lower end is beyond it, not resolved otherwise.
Beside it, the same for each block's ratio of sums, (mode1 + mode2) / (plain1 + plain2)
- 1, in which a linear drift cancels exactly; for the CPU time (user + system of the
launcher and the ranks, from wait4), which depends less on the host's speed states; and
the profiler's own time (HPML_PROF_SELF=1, set in every profiled run; the largest rank,
as % of the paired plain wall time): the mechanism, next to the wall time, the target.

Runs are short (--run, 0.42 s: the iterations are scaled to it first, from plain runs
at two sizes; Open MPI's launcher takes 0.35 s of it), so that >= 100 pairs of each of
the 8 configurations (2 MPIs x 2 commands x 2 modes) fit ten minutes (--budget counts
the blocks, not that scaling); kmeans gets 100,000 rows per 0.42 s of --run (it converges
after about 600 iterations). Fixed costs weigh more in a short run than in a long
one: the profiler's start and last snapshot, and the loading of the library (the runs
give it to the ranks as `hpml prof` does, by the launcher's option: Hydra's -genv, Open
MPI's -x, so that the launcher's own processes do not load it). The "ms" column, the
median paired difference in milliseconds, shows a cost that does not grow with the
run. --run takes one length for all, or a comma-separated list of SECONDS (for the
workloads not named) and WORKLOAD=SECONDS, a workload being an MPI or MPI:command:
`--run 0.42,mpich:kmeans=1.26` gives MPICH's kmeans longer runs in the same round-robin
(its runs at 0.42 s move more from run to run than the others). --quick: tiny sizes and
2 blocks, no scaling, to check the script (not a measurement).
Three more modes take a statistics-mode cost apart (each paired with plain runs as
above, against the same 1%): nolive (statistics with HPML_PROF_LIVE=0: the counters in
ordinary memory instead of the .live mapping), nosites (HPML_PROF_CALLSITES=0: no call
sites) and preload (an empty shared library, built by the script with cc, given to the
ranks the same way: what preloading any library through the launcher costs).
Times are timed around the launcher with time.perf_counter; the report (`hpml prof
merge`) is not part of them, as `hpml prof` writes it after the run.
"""
import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prof_overhead_stats import median_ci  # noqa: E402

TARGET = {"stats": 1.0, "trace": 5.0, "nolive": 1.0, "nosites": 1.0, "preload": 1.0}  # % of plain
LAUNCH = {
    "openmpi": ["mpirun.openmpi", "--allow-run-as-root", "--bind-to", "core", "-np", "2"],
    "mpich": ["mpirun.mpich", "-bind-to", "core", "-np", "2"],
}


def run(argv, env, errpath):
    """Wall seconds and CPU seconds (user + system, with the waited-for descendants) of
    argv, its standard error in errpath; raises on failure."""
    with open(errpath, "w") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        with open(errpath) as f:
            raise RuntimeError(f"exit {p.returncode}: {' '.join(argv)}\n{f.read()[-2000:]}")
    return wall, ru.ru_utime + ru.ru_stime


def own_time(pdir):
    """The profiler's own time of the run (HPML_PROF_SELF=1, the last 'p' line of each
    rank file: bookkeeping + start + snapshots), the largest rank, in seconds."""
    best = None
    for name in os.listdir(pdir):
        if not (name.startswith("rank-") and name.endswith(".prof")):
            continue
        s = None
        with open(os.path.join(pdir, name)) as f:
            for line in f:
                w = line.split()
                if w and w[0] == "p":
                    s = (int(w[2]) + int(w[3]) + int(w[4])) / 1e9
        if s is None:
            return None
        best = s if best is None else max(best, s)
    return best


def fmt_ci(v):
    ci = median_ci(v)
    if ci is None:
        return None, "-"
    return ci, f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


def verdict(ci, bound):
    if ci is None:
        return "too few for a 95% interval"
    if ci[1] <= bound:
        return "met"
    if ci[0] > bound:
        return "NOT met"
    return "not resolved"


def parse_run(spec, work):
    """--run: a comma-separated list of SECONDS (for every workload not named; 0.42
    when not given) and WORKLOAD=SECONDS, WORKLOAD being MPI or MPI:COMMAND of --mpi and
    --commands; the more specific wins. Returns {(mpi, command): seconds}."""
    default, per_mpi, per_work = None, {}, {}
    bad = f"prof_wall.py: --run takes SECONDS and MPI[:COMMAND]=SECONDS, seconds positive, " \
          f"for the MPIs and commands asked (got '{spec}')"
    for part in spec.split(","):
        key, eq, val = part.rpartition("=")
        try:
            sec = float(val)
        except ValueError:
            sys.exit(bad)
        if not 0 < sec < float("inf"):
            sys.exit(bad)
        if not eq:
            if default is not None:
                sys.exit(bad)
            default = sec
        elif key in {m for m, _ in work}:
            per_mpi[key] = sec
        elif tuple(key.split(":")) in work:
            per_work[tuple(key.split(":"))] = sec
        else:
            sys.exit(bad)
    default = 0.42 if default is None else default
    return {w: per_work.get(w, per_mpi.get(w[0], default)) for w in work}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--mpi", default="openmpi,mpich", help="openmpi, mpich or both (default)")
    ap.add_argument("--budget", type=float, default=570,
                    help="seconds of blocks, the scaling before them not counted (default 570)")
    ap.add_argument("--blocks", type=int, default=1000, help="at most N blocks per workload")
    ap.add_argument("--run", default="0.42",
                    help="seconds of a plain run, sizes scaled to it (default 0.42), or per "
                         "workload: SECONDS,MPI=SECONDS,MPI:COMMAND=SECONDS,...")
    ap.add_argument("--commands", default="train,kmeans",
                    help="train, kmeans or both (default)")
    ap.add_argument("--modes", default="stats,trace",
                    help="modes to pair with plain runs: stats, trace (default: both), "
                         "nolive, nosites, preload")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 2 blocks: a check")
    a = ap.parse_args()
    mpis = a.mpi.split(",")
    modes = a.modes.split(",")
    if not modes or any(m not in TARGET for m in modes) or len(set(modes)) != len(modes):
        sys.exit("prof_wall.py: --modes takes distinct stats, trace, nolive, nosites, preload "
                 f"(got '{a.modes}')")
    commands = a.commands.split(",")
    if not commands or any(c not in ("train", "kmeans") for c in commands) \
            or len(set(commands)) != len(commands):
        sys.exit(f"prof_wall.py: --commands takes train and/or kmeans (got '{a.commands}')")
    for m in mpis:
        if m not in LAUNCH:
            sys.exit(f"prof_wall.py: --mpi takes openmpi and/or mpich (got '{m}')")
    work = [(m, c) for m in mpis for c in commands]
    runs = parse_run(a.run, work)
    if a.blocks < 1 or a.budget <= 0:
        sys.exit("prof_wall.py: --blocks and --budget must be positive")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for m in mpis:
        if not (os.access(f"{repo}/build/{m}/bin/hpml", os.X_OK)
                and os.path.exists(f"{repo}/build/{m}/lib/libhpml-prof.so")):
            sys.exit(f"prof_wall.py: build first: make MPI={m}")
    if a.quick:
        a.blocks = min(a.blocks, 2)
    # Starting sizes per MPI (train iterations, kmeans iterations), scaled before the
    # blocks so that a plain run takes --run seconds (see calibrate).
    # kmeans stops when its labels stop changing (after about 600 iterations on 100,000
    # rows): longer runs take more rows, not more iterations.
    rows = {m: 5000 if a.quick else 100000 * max(1, round(runs[(m, "kmeans")] / 0.42))
            for m in mpis if (m, "kmeans") in runs}
    iters = {m: {"train": 25, "kmeans": 40} if m == "openmpi" else {"train": 80, "kmeans": 250}
             for m in mpis}
    if a.quick:
        iters = {m: {"train": 3, "kmeans": 5} for m in mpis}
    tmp = tempfile.mkdtemp(prefix="prof_wall.")
    try:
        import numpy as np
        for r in set(rows.values()):
            np.save(f"{tmp}/x{r}.npy",
                    np.random.default_rng(1).random((r, 32), dtype=np.float32))
        empty_lib = f"{tmp}/empty.so"
        if "preload" in modes:
            with open(f"{tmp}/empty.c", "w") as f:
                f.write("int prof_wall_empty_library;\n")
            subprocess.run(["cc", "-shared", "-fPIC", "-o", empty_lib, f"{tmp}/empty.c"],
                           check=True)

        def command(m, c, n=None):
            n = iters[m][c] if n is None else n
            if c == "train":
                return ["train", "--synthetic", "--model", "mlp", "--iters", str(n),
                        "--warmup-iters", "2", "--no-progress"]
            return ["kmeans", "--data", f"{tmp}/x{rows[m]}.npy", "-k", "16", "--init", "random",
                    "--n-init", "1", "--max-iter", str(n), "--tol", "0"]

        base = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        pdir = f"{tmp}/p"

        def env_of(mode):
            if mode == "plain":
                return base
            e = dict(base, HPML_PROF_DIR=pdir, HPML_PROF_PERIOD="5", HPML_PROF_SELF="1")
            if mode == "trace":
                e["HPML_PROF_TRACE"] = "1"
            elif mode == "nolive":
                e["HPML_PROF_LIVE"] = "0"
            elif mode == "nosites":
                e["HPML_PROF_CALLSITES"] = "0"
            return e

        def launch(m, mode):
            """The launcher's command: as `hpml prof` runs it, the library given to the
            ranks by the launcher's option (Hydra's -genv, Open MPI's -x)."""
            if mode == "plain":
                return LAUNCH[m]
            lib = empty_lib if mode == "preload" else f"{repo}/build/{m}/lib/libhpml-prof.so"
            opt = ["-genv", "LD_PRELOAD", lib] if m == "mpich" else ["-x", f"LD_PRELOAD={lib}"]
            return LAUNCH[m][:1] + opt + LAUNCH[m][1:]

        def calibrate(m, c):
            """Iterations for a plain run of runs[(m, c)] seconds (n/4 to 20n): the faster
            of two plain runs at n and at 2n iterations give the time per iteration and
            the fixed part."""
            n = iters[m][c]
            t = [min(run(LAUNCH[m] + [f"{repo}/build/{m}/bin/hpml"] + command(m, c, k), base,
                         f"{tmp}/err")[0] for _ in range(2)) for k in (n, 2 * n)]
            per = (t[1] - t[0]) / n
            if per > 0:
                want = round((runs[(m, c)] - (t[0] - per * n)) / per)
                iters[m][c] = max(max(3, n // 4), min(20 * n, want))
            print(f"{m} {c}: {n} iterations {t[0]:.3f} s, {2 * n} {t[1]:.3f} s: "
                  f"{iters[m][c]} iterations", file=sys.stderr)

        if not a.quick:
            for m, c in work:
                calibrate(m, c)
        res = {w: [] for w in work}  # per workload: blocks of [(mode, wall, cpu, own)]
        load0 = open("/proc/loadavg").read().split()[:3]
        t_start = time.perf_counter()
        last_round = 0.0
        for b in range(a.blocks):
            if b and time.perf_counter() - t_start + last_round > a.budget:
                break
            t_round = time.perf_counter()
            ms = modes if b % 2 == 0 else modes[::-1]
            order = ["plain"] + ms + ms[::-1] + ["plain"]
            for m, c in work:
                blk = []
                for mode in order:
                    shutil.rmtree(pdir, ignore_errors=True)
                    argv = launch(m, mode) + [f"{repo}/build/{m}/bin/hpml"] + command(m, c)
                    wall, cpu = run(argv, env_of(mode), f"{tmp}/err")
                    own = own_time(pdir) if mode not in ("plain", "preload") else None
                    blk.append((mode, wall, cpu, own))
                res[(m, c)].append(blk)
            last_round = time.perf_counter() - t_round
            print(f"block {b + 1} done ({last_round:.1f} s)", file=sys.stderr)
        elapsed = time.perf_counter() - t_start
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    commit = subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    pol = os.sched_getscheduler(0)
    sched = {os.SCHED_FIFO: "SCHED_FIFO", os.SCHED_RR: "SCHED_RR"}.get(pol, "SCHED_OTHER")
    prio = os.sched_getparam(0).sched_priority
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    nb = len(next(iter(res.values())))
    print(f"# hpml prof wall-time overhead, {nb} blocks per workload ({2 * nb} pairs per mode), "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, build {commit}, {cpu}, "
          f"{platform.node()}")
    load1 = " ".join(open("/proc/loadavg").read().split()[:3])
    asked = ", ".join(f"{m} {c} {t:g}" for (m, c), t in runs.items())
    print(f"# plain run asked (s): {asked}; iterations: {iters}; kmeans rows {rows} x 32 f32, "
          f"k 16; 2 ranks bound one per core; "
          f"{sched} priority {prio}; load {' '.join(load0)} at the start, {load1} at the end; "
          f"{elapsed:.0f} s")
    print(f"{'MPI':<8} {'command':<7} {'mode':<7} {'pairs':>5} {'plain s':>8} {'mode s':>8} "
          f"{'wall %':>7} {'ms':>6} {'95% CI':>16} {'target':>6}  {'verdict':<13} {'blocks %':>8} "
          f"{'95% CI':>16} {'CPU %':>6} {'95% CI':>16} {'own % med':>9} {'max':>6}")
    for (m, c), blocks in res.items():
        for mode in modes:
            d, dms, dcpu, dblk, own, pl, pm = [], [], [], [], [], [], []
            for blk in blocks:
                plains = [x for x in blk if x[0] == "plain"]
                runs = [x for x in blk if x[0] == mode]
                # pairs: the first plain with the first mode run, the second with the second
                for p, q in zip(plains, runs):
                    d.append(100 * (q[1] / p[1] - 1))
                    dms.append(1000 * (q[1] - p[1]))
                    dcpu.append(100 * (q[2] / p[2] - 1))
                    pl.append(p[1])
                    pm.append(q[1])
                    if q[3] is not None:
                        own.append(100 * q[3] / p[1])
                dblk.append(100 * (sum(x[1] for x in runs) / sum(x[1] for x in plains) - 1))
            ci, cis = fmt_ci(d)
            _, bcis = fmt_ci(dblk)
            _, ccis = fmt_ci(dcpu)
            ownm = f"{statistics.median(own):.3f}" if own else "-"
            ownx = f"{max(own):.3f}" if own else "-"
            print(f"{m:<8} {c:<7} {mode:<7} {len(d):>5} {statistics.median(pl):>8.4f} "
                  f"{statistics.median(pm):>8.4f} {statistics.median(d):>+7.2f} "
                  f"{statistics.median(dms):>+6.1f} {cis:>16} "
                  f"{TARGET[mode]:>5g}%  {verdict(ci, TARGET[mode]):<13} "
                  f"{statistics.median(dblk):>+8.2f} {bcis:>16} {statistics.median(dcpu):>+6.2f} "
                  f"{ccis:>16} {ownm:>9} {ownx:>6}")


if __name__ == "__main__":
    main()
