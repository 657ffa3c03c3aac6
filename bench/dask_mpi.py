"""One Dask cluster's measurements for bench/dask_mpi.sh (which runs it for mpi:// and
tcp:// in the same run and compares):

    mpirun -np 4 python3 bench/dask_mpi.py PROTOCOL OUT.json [--quick] [--pingpong-only]

Rank 0 is the scheduler, ranks 2 and 3 the workers (one thread each), rank 1 the client,
which measures and writes OUT.json:
  - pingpong: worker-to-worker round trips through distributed's RPC (worker 2 calls a
    handler of worker 3 that returns the payload it got), random payloads of 1 B to
    16 MiB; and the same sizes on one comm from worker 2 to an echo listener on worker
    3 (comm_pingpong: the transport without distributed's RPC layer);
    the client and the scheduler stay idle while it runs (the client waits for one
    client.run answer). Median of the round trips, latency = half of it, bandwidth =
    payload / latency. idle_rtt_us: the median RPC round trip of 1 B sent after 0.2 s
    without traffic (a lone message, which meets the progress asleep).
  - sum: (x + x.T).sum() of a persisted random N x N float64 dask.array (MPI4Dask's
    first application), median wall time of the repeats.
  - merge: dd.merge of two persisted pandas dataframes on a key column (MPI4Dask's
    second application; a task shuffle between the workers), median wall time.

Every repeat builds the same graph, with the same keys. distributed's client releases a
result asynchronously (Future.release hands the decrement to the client's event loop)
but counts the next compute's future at once, in the calling thread: a repeat started
before the loop ran the decrement keeps the count above zero, the client never sends
the release, and the scheduler returns the result it still holds (in 0.01-0.02 s, over
tcp:// as well as mpi://). So each repeat waits until the scheduler has forgotten the
result before the next one starts; that wait (release_ms: the client's release through
its batched stream, then polls of the scheduler) is reported too.
"""

import asyncio
import json
import os
import statistics
import sys
import time

import hpml.dask

protocol, out = sys.argv[1], sys.argv[2]
quick = "--quick" in sys.argv[3:]
pingpong_only = "--pingpong-only" in sys.argv[3:]  # for tuning the progress settings
hpml.dask.initialize(protocol=protocol)

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402
from distributed import Client, wait  # noqa: E402
from dask.utils import stringify  # noqa: E402
from distributed.protocol import to_serialize  # noqa: E402

client = Client()
workers = sorted(client.scheduler_info()["workers"].items(), key=lambda kv: int(kv[1]["name"]))
a_addr, b_addr = workers[0][0], workers[1][0]
SIZES = [1, 1 << 10, 64 << 10, 1 << 20, 16 << 20] if not quick else [1, 1 << 20]


def add_echo(dask_worker=None):
    async def echo(comm=None, x=None):
        return {"x": to_serialize(x)}

    dask_worker.handlers["hpml_echo"] = echo


async def pingpong(peer, sizes, quick, gap=0, iters=None, dask_worker=None):
    """Median round trip per size; gap: seconds of silence before each (iters of them,
    no warm-up)."""
    res = {}
    for size in sizes:
        # random bytes: distributed's lz4 compression (on by default) finds nothing to
        # gain and sends them as they are, so the ping-pong measures the transport
        payload = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
        n = iters or (300 if size <= 65536 else (100 if size <= 1 << 20 else 30))
        if quick:
            n = min(n, 5)
        warm = 0 if gap else max(3, n // 10)
        times = []
        for i in range(warm + n):
            if gap:
                await asyncio.sleep(gap)
            t = time.perf_counter()
            r = await dask_worker.rpc(peer).hpml_echo(x=to_serialize(payload))
            dt = time.perf_counter() - t
            assert len(r["x"]) == size
            if i >= warm:
                times.append(dt)
        res[size] = statistics.median(times)
    return res


async def start_echo(protocol, dask_worker=None):
    from distributed.comm import listen

    async def handle(comm):
        while True:
            try:
                await comm.write(await comm.read())
            except OSError:  # CommClosedError: the other side is done
                return

    where = "tcp://127.0.0.1" if protocol == "tcp" else "mpi://"
    listener = listen(where, handle, deserialize=False)
    await listener.start()
    dask_worker._hpml_echo = listener  # keep it
    return listener.contact_address


async def comm_pingpong(addr, sizes, quick, dask_worker=None):
    from distributed.comm import connect

    comm = await connect(addr)
    res = {}
    for size in sizes:
        payload = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
        iters = 5 if quick else (1000 if size <= 65536 else (100 if size <= 1 << 20 else 30))
        times = []
        for i in range(iters + max(3, iters // 10)):
            t = time.perf_counter()
            await comm.write({"x": to_serialize(payload)})
            r = await comm.read()
            dt = time.perf_counter() - t
            assert len(r["x"]) == size
            times.append(dt)
        res[size] = statistics.median(times[max(3, iters // 10):])
    await comm.close()
    return res


client.run(add_echo, workers=[b_addr])
rtt = client.run(pingpong, b_addr, SIZES, quick, workers=[a_addr])[a_addr]
# a lone message: 1 B round trips, each after 0.2 s without traffic between the workers
idle = client.run(pingpong, b_addr, [1], quick, 0.2, 15, workers=[a_addr])[a_addr][1]
echo_addr = client.run(start_echo, protocol, workers=[b_addr])[b_addr]
raw = client.run(comm_pingpong, echo_addr, SIZES, quick, workers=[a_addr])[a_addr]
result = {"protocol": protocol, "progress": dask.config.get("distributed.comm.mpi.progress",
                                                            "thread"),
          "pingpong": {str(s): {"rtt_us": t * 1e6, "latency_us": t / 2 * 1e6,
                                "bandwidth_MBps": s / (t / 2) / 1e6}
                       for s, t in rtt.items()},
          "comm_pingpong": {str(s): {"rtt_us": t * 1e6, "latency_us": t / 2 * 1e6,
                                     "bandwidth_MBps": s / (t / 2) / 1e6}
                            for s, t in raw.items()},
          "idle_rtt_us": idle * 1e6}
print("%s pingpong: %s" % (protocol, ", ".join(
    "%d B %.1f us" % (s, t / 2 * 1e6) for s, t in rtt.items())), flush=True)
print("%s comm ping-pong: %s" % (protocol, ", ".join(
    "%d B %.1f us" % (s, t / 2 * 1e6) for s, t in raw.items())), flush=True)
print("%s 1 B RPC round trip after 0.2 s idle: %.1f us" % (protocol, idle * 1e6), flush=True)

if pingpong_only:
    n, chunk, reps = 0, 0, 0
elif not quick:
    n, chunk, reps = 8192, 1024, 3
else:
    n, chunk, reps = 512, 256, 1
if pingpong_only:
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    sys.exit(0)


def _holds(key, dask_scheduler=None):
    return key in dask_scheduler.tasks


def timed(collection):
    """(result, seconds to compute it, ms until the scheduler has forgotten it)."""
    t = time.perf_counter()
    fut = client.compute(collection)
    value = fut.result()
    seconds = time.perf_counter() - t
    key = stringify(fut.key)
    fut.release()
    del fut
    t = time.perf_counter()
    while client.run_on_scheduler(_holds, key):
        if time.perf_counter() - t > 30:
            raise RuntimeError("the scheduler still holds %s 30 s after its release" % key)
        time.sleep(1e-3)
    return value, seconds, (time.perf_counter() - t) * 1e3


x = da.random.RandomState(1).random_sample((n, n), chunks=chunk).persist()
wait(x)
times, release = [], []
for _ in range(reps):
    got, dt, ms = timed((x + x.T).sum())
    times.append(dt)
    release.append(ms)
result["sum"] = {"n": n, "chunk": chunk, "seconds": statistics.median(times),
                 "all": times, "value": float(got), "release_ms": release}
print("%s sum of x + x.T (%d^2): %.3f s (all %s; released on the scheduler after %s ms)"
      % (protocol, n, result["sum"]["seconds"], " ".join("%.3f" % t for t in times),
         " ".join("%.1f" % m for m in release)), flush=True)

try:
    import dask.dataframe as dd
    import pandas as pd
except ImportError:
    dd = None
if dd is not None:
    rows = 2_000_000 if not quick else 20_000
    rng = np.random.default_rng(2)
    left = pd.DataFrame({"key": rng.permutation(rows), "a": rng.random(rows)})
    right = pd.DataFrame({"key": rng.permutation(rows), "b": rng.random(rows)})
    ldd = client.persist(dd.from_pandas(left, npartitions=8))
    rdd = client.persist(dd.from_pandas(right, npartitions=8))
    wait([ldd, rdd])
    times, release = [], []
    for _ in range(reps):
        t = time.perf_counter()
        m = dd.merge(ldd, rdd, on="key", shuffle="tasks")[["a", "b"]].sum()
        build = time.perf_counter() - t  # the merge's graph, as before
        total, dt, ms = timed(m)
        times.append(build + dt)
        release.append(ms)
    want = left["a"].sum() + right["b"].sum()
    assert abs(float(total.sum()) - want) < 1e-6 * want, (total, want)
    result["merge"] = {"rows": rows, "partitions": 8, "seconds": statistics.median(times),
                       "all": times, "release_ms": release}
    print("%s merge (%d rows): %.3f s" % (protocol, rows, result["merge"]["seconds"]),
          flush=True)

with open(out + ".tmp", "w") as f:
    json.dump(result, f, indent=1)
os.replace(out + ".tmp", out)
