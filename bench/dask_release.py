"""Repeats of one Dask computation back to back, and what became of each result's release
(docs/dask.md, "Benchmark"): how the repeats of bench/dask_mpi.py once seemed to find a
released result still held by the scheduler.

    mpirun -np 4 python3 bench/dask_release.py PROTOCOL [N] [REPEATS]

PROTOCOL mpi or tcp; (x + x.T).sum() of a persisted N x N array (default 4096), REPEATS
times (default 12) with nothing in between, as bench/dask_mpi.py did before it waited
for the release. For each repeat: its time, whether the client sent the release of the
repeat's result (`client-releases-keys`, timestamped in the client's `_release_key`) and
how long after that the scheduler's handler ran (timestamped there; one clock, one
machine). A repeat that finds the result still held (under a quarter of the median
repeat's time: 0.01-0.05 s against 0.2-0.7 s) follows one whose release the client never
sent: distributed's client counts the next compute's future for the key at once, in the
script's thread, but hands a future's release to its event loop, so the count need not
reach zero between two repeats.
"""

import statistics
import sys
import time

import hpml.dask

protocol = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 12
hpml.dask.initialize(protocol=protocol)

import dask.array as da  # noqa: E402
from dask.utils import stringify  # noqa: E402
from distributed import Client, wait  # noqa: E402

client = Client()


def log_releases(dask_scheduler=None):
    """The scheduler side: when each client-releases-keys message is handled."""
    handler = dask_scheduler.stream_handlers["client-releases-keys"]
    dask_scheduler.hpml_releases = []

    def logged(keys=None, client=None, stimulus_id=None, **kw):
        dask_scheduler.hpml_releases.append((time.time(), list(keys)))
        return handler(keys=keys, client=client, stimulus_id=stimulus_id, **kw)

    dask_scheduler.stream_handlers["client-releases-keys"] = logged


client.run_on_scheduler(log_releases)
sent = []  # (time, key) of every release the client sends
release_key = client._release_key


def logged_release(key):
    sent.append((time.time(), key))
    return release_key(key)


client._release_key = logged_release

x = da.random.RandomState(1).random_sample((n, n), chunks=1024).persist()
wait(x)
ends = []
for i in range(repeats):
    t = time.perf_counter()
    y = (x + x.T).sum()
    y.compute()
    ends.append((time.time(), time.perf_counter() - t))
key = stringify(y.__dask_keys__()[0])
deadline = time.monotonic() + 10
while client.run_on_scheduler(lambda key, dask_scheduler=None: key in dask_scheduler.tasks, key):
    if time.monotonic() > deadline:
        break
    time.sleep(0.01)
handled = [t for t, keys in client.run_on_scheduler(
    lambda dask_scheduler=None: dask_scheduler.hpml_releases) if key in keys]
sent = [t for t, k in sent if k == key]
print("%s, (x + x.T).sum() of %d^2, %d repeats back to back:" % (protocol, n, repeats))
# repeat -> its release: the first sent after it ended, or up to 5 ms before (compute()
# hands the release to the client's loop before it returns); a repeat takes longer
mine = {}
for t in sent:
    i = max((i for i, (end, dt) in enumerate(ends) if end - 5e-3 <= t), default=None)
    if i is not None:
        mine.setdefault(i, t)
held = 0
typical = statistics.median(dt for _, dt in ends)  # most repeats compute
for i, (end, dt) in enumerate(ends):
    if i in mine:
        later = [h for h in handled if h >= mine[i] - 1e-3]
        fate = ("release sent %+.1f ms from its end, handled by the scheduler %.1f ms "
                "later" % ((mine[i] - end) * 1e3, (later[0] - mine[i]) * 1e3)
                if later else "release sent, never handled")
    else:
        fate = "no release sent (the next repeat counted the key first)"
    fast = i > 0 and dt < 0.25 * typical
    held += fast
    print("  repeat %2d: %.3f s%s; %s" % (i, dt, " (result still held)" if fast else "", fate))
print("%s: %d of %d repeats found the result still held, %d of %d releases not sent"
      % (protocol, held, repeats - 1, repeats - len(mine), repeats))
