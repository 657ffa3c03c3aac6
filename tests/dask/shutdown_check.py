"""hpml.dask over tcp:// at 4 ranks, with a client script that shuts the cluster down
itself (run by tests/cli/dask.sh): mpirun -np 4 python3 shutdown_check.py. At exit rank
1 must not wait for a scheduler that is gone; the driver checks that every rank exits 0
within 5 s of "client done" with no traceback."""

import time

import hpml.dask

hpml.dask.initialize(protocol="tcp")

from distributed import Client  # noqa: E402

client = Client()
assert client.scheduler_info()["address"].startswith("tcp://127.0.0.1:")
assert client.submit(sum, [1, 2, 3]).result() == 6
client.shutdown()
print("client done %.6f" % time.time(), flush=True)
