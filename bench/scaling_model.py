#!/usr/bin/python3
"""The alpha-beta-gamma cost model of allreduce across nodes (docs/scaling.md).

Two levels. Within a node: shared memory, a synchronisation costs alpha_s and moving a
byte through the node segment (copied in, reduced, copied out: about 3 passes) costs
3 / beta_s. Between nodes: a message costs alpha_n plus its bytes over the node's link,
B bytes/s each way; the node's ranks share that link.

  hier (2 nodes)  alpha_n + n / B + fill                  one copy crosses each link
  hier (N nodes)  2 (N-1) alpha_n + 2 (N-1)/N n / B + fill (ring among each slice's owners)
  fill            3 C / beta_s + C / (L B)                one pipeline chunk (C) exposed
  flat ring       2 (P-1) alpha_n + 2 (P-1)/P n / B       ranks in node order: one ring
                                                          edge crosses each link
  flat rec. dbl.  log2(P) alpha_n + log2(N) L n / B       log2 N steps leave the node, with
                                                          all L ranks sending n at once
  flat Rabenseifner  2 log2(P) alpha_n + 2 (N-1)/N n / B + 3 (L-1)/L n / beta_s
                  (recursive halving, then doubling; ranks in node order, P a power of 2:
                  the steps that leave the node carry 2 (N-1)/N n per node, as hier, and
                  the node's steps do not overlap them)

P = N L ranks. The MPI library picks its own algorithm; the model takes the best flat
one as its stand-in (Open MPI 4.1 runs Rabenseifner at 4 ranks from 8 KiB). Usage:

  bench/scaling_model.py --alpha-us A --link-mbit R --shm-gbs S [--ppn L] [--bytes N]
      [--measured FILE]

prints the predictions at 2, 4, 8, ..., 1024 nodes and which algorithm the model picks;
--measured FILE (lines "nodes ppn bytes mpi_us hier_us") adds the measured times beside
the model's for those rows.
"""
import argparse
import math
import sys

CHUNK = 256 << 10  # HPML_SHM_CHUNK's default


def hier(n, N, L, a, B, bs):
    fill = 3 * CHUNK / bs + CHUNK / (L * B)
    if N == 2:
        return a + n / B + fill
    return 2 * (N - 1) * a + 2 * (N - 1) / N * n / B + fill


def flat(n, N, L, a, B, bs):
    P = N * L
    ring = 2 * (P - 1) * a + 2 * (P - 1) / P * n / B
    rd = math.log2(P) * a + math.log2(N) * L * n / B
    rab = 2 * math.log2(P) * a + 2 * (N - 1) / N * n / B + 3 * (L - 1) / L * n / bs
    return min(ring, rd, rab)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--alpha-us", type=float, required=True, help="network latency, µs")
    ap.add_argument("--link-mbit", type=float, required=True, help="link rate, Mbit/s")
    ap.add_argument("--shm-gbs", type=float, required=True, help="shared-memory GB/s per rank")
    ap.add_argument("--ppn", type=int, default=2)
    ap.add_argument("--bytes", default="1M,16M")
    ap.add_argument("--measured")
    o = ap.parse_args()
    if o.alpha_us < 0 or o.link_mbit <= 0 or o.shm_gbs <= 0 or o.ppn < 1:
        sys.exit("scaling_model.py: --alpha-us >= 0, --link-mbit > 0, --shm-gbs > 0, --ppn >= 1")
    a, B, bs = o.alpha_us * 1e-6, o.link_mbit * 1e6 / 8, o.shm_gbs * 1e9
    unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    sizes = [int(s[:-1]) * unit[s[-1]] if s[-1] in unit else int(s) for s in o.bytes.split(",")]
    print("| nodes x ranks | size | flat (model) ms | hier (model) ms | model picks |")
    print("|---|---:|---:|---:|---|")
    for n in sizes:
        for N in [2 ** k for k in range(1, 11)]:
            f, h = flat(n, N, o.ppn, a, B, bs) * 1e3, hier(n, N, o.ppn, a, B, bs) * 1e3
            print("| %d x %d | %s | %.1f | %.1f | %s |" % (
                N, o.ppn, "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10),
                f, h, "hier" if h < f else "mpi"))
    if o.measured:
        print()
        print("| nodes x ranks | size | mpi measured ms | flat model ms | hier measured ms | hier model ms |")
        print("|---|---:|---:|---:|---:|---:|")
        for line in open(o.measured):
            N, L, n, m_us, h_us = line.split()
            N, L, n = int(N), int(L), int(n)
            print("| %d x %d | %s | %.1f | %.1f | %.1f | %.1f |" % (
                N, L, "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10),
                float(m_us) / 1e3, flat(n, N, L, a, B, bs) * 1e3, float(h_us) / 1e3,
                hier(n, N, L, a, B, bs) * 1e3))


if __name__ == "__main__":
    main()
