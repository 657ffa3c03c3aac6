"""The libhpml calls hpml.torch makes on tensor memory, in one place: a tensor's storage
is passed to libhpml as its data_ptr(), so collectives read and write it in place (no
copy through NumPy). Callers check the tensors first (hpml.torch._check)."""

from .._lib import check, ffi, lib, raise_error
from ..comm import Request

_cast = ffi.cast
_IN_PLACE = ffi.cast("const void *", 1)


def ptr(t):
    return _cast("void *", t.data_ptr())


def allreduce(comm, send, recv, n, dt, op, what="allreduce"):
    """recv = op over the ranks of send (send None: in place in recv). Blocking."""
    rc = lib.hpml_allreduce_algo(0, _IN_PLACE if send is None else ptr(send), ptr(recv), n, dt,
                                 op, comm._handle())
    if rc:
        raise_error(rc, what)


def iallreduce(comm, send, recv, n, dt, op, keep, what="iallreduce"):
    """Start an allreduce; a hpml.Request (its result is recv) that keeps `keep` alive."""
    out = ffi.new("hpml_request_t **")
    rc = lib.hpml_iallreduce(_IN_PLACE if send is None else ptr(send), ptr(recv), n, dt, op,
                             comm._handle(), out)
    if rc:
        raise_error(rc, what)
    return Request(out[0], keep, comm, recv)


def bcast(comm, t, n, dt, root, what="broadcast"):
    check(lib.hpml_bcast_algo(0, ptr(t), n, dt, root, comm._handle()), what)


def ibcast(comm, t, n, dt, root, what="broadcast"):
    out = ffi.new("hpml_request_t **")
    check(lib.hpml_ibcast(ptr(t), n, dt, root, comm._handle(), out), what)
    return Request(out[0], t, comm, t)
