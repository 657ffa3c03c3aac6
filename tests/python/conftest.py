"""pytest under mpirun: every rank runs every test in the same order, so the collectives
inside the tests match. tests/cli/python.sh runs this folder at 1, 2 and 3 ranks with
HPML_CHECK=1, so a test that diverges between ranks fails with a mismatch instead of
hanging."""

import numpy as np
import pytest
from mpi4py import MPI

import hpml


@pytest.fixture(scope="session")
def comm():
    c = hpml.Comm(MPI.COMM_WORLD)
    yield c
    c.free()


def rank_data(dtype, n, rank, lo=-4, hi=5, seed=7):
    """Rank `rank`'s integer-valued data: exact in every hpml dtype, so sums, products,
    minima and maxima are exact whatever order the ranks combine them in."""
    rng = np.random.default_rng(seed * 1000 + rank)
    return rng.integers(lo, hi, size=n).astype(dtype)


def all_data(dtype, n, size, **kw):
    return np.stack([rank_data(dtype, n, r, **kw) for r in range(size)])


def to_bf16(x):
    """float32 values exact in bfloat16 -> their bf16 bits as uint16."""
    return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def from_bf16(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)
