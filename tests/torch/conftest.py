"""pytest under mpirun for hpml.torch (tests/cli/torch.sh runs this folder at 1 and 2
ranks): every rank runs every test in the same order, so the collectives match."""

import pytest
import torch
from mpi4py import MPI

import hpml.torch as hvd


@pytest.fixture(scope="session", autouse=True)
def initialised():
    torch.set_num_threads(1)
    hvd.init()
    yield
    hvd.shutdown()


@pytest.fixture
def world():
    return MPI.COMM_WORLD
