"""hpml's allreduce from Python against the same call from C, in the same processes.

Run under mpirun (bench/run_python_vs_c.sh). Per size, on one hpml.Comm and one pair of
NumPy f32 arrays (np.zeros, as `python3 -m hpml.bench --buffer numpy` allocates), each
round times four blocks back to back:
  C      libhpml's hpml_bench_time_blocking: the loop of `hpml bench allreduce --impl
         hpml` (barrier; per iteration MPI_Wtime, hpml_allreduce, MPI_Wtime, barrier), on
         this Comm and these arrays;
  C'     the same again: C' / C is what the harness resolves (the control);
  plain  hpml.bench.time_coll (the same loop in Python, as `python3 -m hpml.bench`) around
         comm.allreduce(s, r, "sum", "auto", None);
  bound  the same loop around comm.allreduce_init(s, r, "sum", "auto", None)().
Blocks take the 24 orders in turn over the rounds, so that none always runs first, after
one round that is not counted. A block's figure is the mean over its timed iterations
and the ranks (the `avg` of both benches); a round's ratios are C' / C, plain / C and
bound / C of the same round, its differences C' − C, plain − C and bound − C. Printed per
size: the median block times, and the median over the rounds of each ratio and
difference with its 95% distribution-free interval (order statistics of the binomial),
and whether "within 3% of C" holds: met when the interval's upper end is at most 1.03,
missed when its lower end is above 1.03, else not resolved.

  python3 bench/python_vs_c.py [--rounds N] [--sizes B,B,...] [--iterations N]
      [--skip N] [--large-iterations N] [--large-skip N] [--check]
--check only checks the options (bench/run_python_vs_c.sh does, before mpirun).
--iterations and --skip: timed and untimed (first) iterations per block up to 8 KiB
(default 2000 and 200); --large-iterations and --large-skip above (default 480 and 32: a
block of 512 calls holds as many of the shared-memory store-mode picker's probes, one
pair every 128 calls from 64 KiB, as any other).
"""

import argparse
import itertools
import math
import statistics
import sys

import numpy as np

F32 = 0  # hpml_dtype_t HPML_F32
FORMS = ("c", "c2", "plain", "bound")
ORDERS = list(itertools.permutations(FORMS))


def median_interval(xs, level=0.95):
    """The median of xs and a distribution-free interval holding the population median
    with probability >= level: (x(j), x(n-j+1)) for the largest j with
    P(Binomial(n, 1/2) < j) <= (1 - level) / 2; (nan, nan) when n is too small."""
    xs = sorted(xs)
    n = len(xs)
    tail, j, cum = (1 - level) / 2, 0, 0.0
    while j < n:
        cum_next = cum + math.comb(n, j) / 2 ** n
        if cum_next > tail:
            break
        cum, j = cum_next, j + 1
    if j == 0:
        return statistics.median(xs), math.nan, math.nan
    return statistics.median(xs), xs[j - 1], xs[n - j]


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        print("python_vs_c.py: " + message, file=sys.stderr)
        sys.exit(2)


def parse_args(argv):
    ap = _Parser(prog="python_vs_c.py", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="only check the options and exit (run_python_vs_c.sh does, "
                         "before mpirun)")
    ap.add_argument("--rounds", type=int, default=48, metavar="N",
                    help="counted rounds, after one that is not counted (default 48)")
    ap.add_argument("--sizes", default="8,65536,262144,1048576,4194304", metavar="B,B,...",
                    help="message sizes in bytes, multiples of 4 (f32); default "
                         "8,65536,262144,1048576,4194304")
    ap.add_argument("--iterations", type=int, default=2000, metavar="N",
                    help="timed iterations per block up to 8 KiB (default 2000)")
    ap.add_argument("--skip", type=int, default=200, metavar="N",
                    help="untimed first iterations per block up to 8 KiB (default 200)")
    ap.add_argument("--large-iterations", type=int, default=480, metavar="N",
                    help="timed iterations per block above 8 KiB (default 480)")
    ap.add_argument("--large-skip", type=int, default=32, metavar="N",
                    help="untimed first iterations per block above 8 KiB (default 32)")
    a = ap.parse_args(argv)
    try:
        a.sizes = [int(s) for s in a.sizes.split(",")]
    except ValueError:
        ap.error("--sizes: not a list of integers: %r" % a.sizes)
    if any(s <= 0 or s % 4 for s in a.sizes):
        ap.error("--sizes: every size must be a positive multiple of 4 bytes (f32)")
    if a.rounds < 1 or a.iterations < 1 or a.large_iterations < 1:
        ap.error("--rounds, --iterations and --large-iterations must be positive")
    if a.skip < 0 or a.large_skip < 0:
        ap.error("--skip and --large-skip must not be negative")
    return a


class Size:
    """One message size: its arrays, the three timed forms and their per-round means."""

    def __init__(self, comm, nbytes, iters, skip):
        self.nbytes, self.iters, self.skip = nbytes, iters, skip
        self.s = np.zeros(nbytes // 4, np.float32)
        self.r = np.zeros(nbytes // 4, np.float32)
        f, s, r = comm.allreduce, self.s, self.r
        self.forms = {"plain": lambda: f(s, r, "sum", "auto", None),
                      "bound": comm.allreduce_init(s, r, "sum", "auto", None)}
        self.comm = comm
        self.times = {k: [] for k in FORMS}

    def block(self, world, form):
        from hpml import _lib
        from hpml.bench import time_coll

        if form in ("c", "c2"):
            t = np.empty(self.iters)
            ffi = _lib.ffi
            _lib.check(_lib.lib.hpml_bench_time_blocking(
                _lib.mpi_comm(world), self.comm._handle(), b"allreduce", b"hpml",
                ffi.from_buffer(self.s), ffi.from_buffer(self.r), self.nbytes, F32,
                self.iters, self.skip, ffi.from_buffer("double[]", t)),
                "hpml_bench_time_blocking")
        else:
            t = time_coll(world, self.forms[form], self.iters, self.skip)
        self.times[form].append(world.allreduce(float(t.mean())) / world.Get_size())


def report(sizes, rounds):
    print("| bytes | C µs | Py plain µs | Py bound µs | C′ − C µs [95%] | plain − C µs [95%] | "
          "bound − C µs [95%] | C′ / C [95%] | plain / C [95%] | bound / C [95%] | "
          "within 3%: plain | within 3%: bound |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for z in sizes:
        c = z.times["c"]
        cells = ["%d" % z.nbytes] + ["%.2f" % statistics.median(z.times[k])
                                     for k in ("c", "plain", "bound")]
        verdicts = []
        for k in ("c2", "plain", "bound"):
            m, lo, hi = median_interval([p - q for p, q in zip(z.times[k], c)])
            cells.append("%+.3f [%+.3f, %+.3f]" % (m, lo, hi))
        for k in ("c2", "plain", "bound"):
            m, lo, hi = median_interval([p / q for p, q in zip(z.times[k], c)])
            cells.append("%.4f [%.4f, %.4f]" % (m, lo, hi))
            if k != "c2":
                verdicts.append("met" if hi <= 1.03 else "missed" if lo > 1.03 else
                                "not resolved")
        print("| " + " | ".join(cells + verdicts) + " |")
    print()
    print("median over %d rounds; each block the mean over its iterations and the ranks; "
          "intervals: 95%%, distribution-free" % rounds)


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if a.check:
        return
    from mpi4py import MPI

    import hpml
    from hpml.bench import LARGE

    world = MPI.COMM_WORLD
    if world.Get_size() < 2:
        sys.exit("python_vs_c.py: run it under mpirun with at least 2 ranks")
    comm = hpml.Comm(world)
    sizes = [Size(comm, n, *((a.iterations, a.skip) if n <= LARGE else
                             (a.large_iterations, a.large_skip))) for n in a.sizes]
    # A first round, not counted, meets what happens once per Comm and size (the node's
    # shared-memory segment, the store-mode choice, first touches of the pages).
    for r in range(-1, a.rounds):
        for z in sizes:
            for form in ORDERS[r % len(ORDERS)]:
                z.block(world, form)
    for z in sizes:
        for k in FORMS:
            del z.times[k][0]
    if world.Get_rank() == 0:
        report(sizes, a.rounds)
    comm.free()


if __name__ == "__main__":
    main()
