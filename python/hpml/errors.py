"""hpml's exceptions: every error the package raises is an hpml.Error, and also the
built-in exception that fits, so `except ValueError` works as well as `except hpml.Error`.
"""

import builtins


class Error(Exception):
    """An error from hpml. `code` is the library's HPML_ERR_* value (negative) when the
    error came from libhpml, None when the package found it before calling the library."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code
        self.message = message


class ArgumentError(Error, ValueError):
    """Invalid argument: sizes that do not match, a bad root, op or algorithm name."""


class DtypeError(Error, TypeError):
    """A buffer whose element type hpml cannot reduce or move, or device (GPU) memory."""


class BufferError(Error, builtins.BufferError):
    """A buffer that is not contiguous, or read-only where hpml must write."""


class OutOfMemory(Error, MemoryError):
    """An allocation failed."""


class MPIError(Error, RuntimeError):
    """An MPI call failed, the ranks disagreed on a collective, or a call came in the
    wrong state."""


class FileError(Error, OSError):
    """A file could not be opened, read or written."""


class FormatError(Error, ValueError):
    """Malformed input data."""


class UnsupportedError(Error, NotImplementedError):
    """A valid request this build, dtype or op cannot do."""


class RangeError(Error, OverflowError):
    """A number out of range."""


class NumericError(Error, ArithmeticError):
    """NaN or Inf in the data, a singular matrix, no convergence."""


class LibraryError(Error, ImportError):
    """libhpml.so not found, or built for another MPI than the one mpi4py uses."""


# HPML_ERR_* (include/hpml/core.h) -> the class raised for it.
BY_CODE = {
    -1: ArgumentError,
    -2: OutOfMemory,
    -3: MPIError,
    -4: FileError,
    -5: FormatError,
    -6: UnsupportedError,
    -7: MPIError,
    -8: RangeError,
    -9: NumericError,
    -10: MPIError,
}
