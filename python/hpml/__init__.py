"""hpml from Python: hpml's collectives on NumPy arrays and other buffer-protocol objects
over mpi4py communicators, scikit-learn-style estimators over each rank's rows, and
OMB-Py-compatible benchmarks (python3 -m hpml.bench). See docs/python.md.

    from mpi4py import MPI
    import numpy as np, hpml

    comm = hpml.Comm(MPI.COMM_WORLD)
    x = np.ones(1024, np.float32)
    comm.allreduce(hpml.IN_PLACE, x)          # x is now the sum over the ranks

Importing hpml initialises MPI through mpi4py and loads libhpml.so built for the same MPI
(see hpml._lib for where it is looked for; HPML_LIB names it explicitly).
"""

from .errors import (  # noqa: F401
    ArgumentError,
    BufferError,
    DtypeError,
    Error,
    FileError,
    FormatError,
    LibraryError,
    MPIError,
    NumericError,
    OutOfMemory,
    RangeError,
    UnsupportedError,
)
from ._lib import path as library_path  # noqa: F401
from .comm import ALGOS, DTYPE_NAMES, IN_PLACE, Comm, Request  # noqa: F401
from .info import info, version  # noqa: F401
from .ml import (  # noqa: F401
    PCA,
    KMeans,
    KNeighborsClassifier,
    LinearRegression,
    LogisticRegression,
    NearestNeighbors,
    Ridge,
)

__all__ = [
    "Comm", "Request", "IN_PLACE", "ALGOS", "DTYPE_NAMES", "info", "version", "library_path",
    "Error", "ArgumentError", "BufferError", "DtypeError", "FileError", "FormatError",
    "LibraryError", "MPIError", "NumericError", "OutOfMemory", "RangeError",
    "UnsupportedError",
    "KMeans", "NearestNeighbors", "KNeighborsClassifier", "PCA", "LinearRegression", "Ridge",
    "LogisticRegression",
]
