"""Finding and loading libhpml.so through cffi (ABI mode), and the compiled hot path.

The library must be built for the MPI that mpi4py uses: both MPIs export the same MPI_*
symbols with different ABIs (Open MPI's MPI_Comm is a pointer, MPICH's an int), so a
libhpml linked against the other MPI would call into the wrong library. The check reads
the MPI library the .so file names in its ELF dynamic section before loading it.

Where the library is looked for, first found wins:
  1. $HPML_LIB (a file, or a folder holding libhpml.so.0);
  2. in the source tree: <repo>/build/<mpi>/lib/libhpml.so.0, <mpi> being openmpi or
     mpich after the MPI mpi4py uses (`make MPI=<mpi>` builds it);
  3. installed: the lib folder that holds this package's site-packages folder
     (`make install` puts the package in <prefix>/lib/python3.X/dist-packages and the
     library in <prefix>/lib, named after its MPI: libhpml-<mpi>.so.0);
  4. the dynamic loader's search path (libhpml-<mpi>.so.0).

hpml._fast (python/hpml/_fast.c, a CPython extension `make` builds) runs Comm.allreduce
and Comm.bcast on plain buffers without cffi's per-call cost; it calls libhpml through the
function addresses cffi gives it, so one build serves both MPIs. It is looked for in the
package (installed by `make install`), then in the build tree beside the library
(<build>/python/hpml/_fast*.so). Without it the collectives take the checked Python path:
the same results, about a microsecond more per call (`fast` is None then).
"""

import importlib.machinery
import importlib.util
import os
import struct

from mpi4py import MPI

import cffi

from . import errors

# MPI families by ABI: the MPICH ABI family shares MPI_Comm as int.
_VENDOR_FAMILY = {
    "Open MPI": "openmpi",
    "MPICH": "mpich",
    "MVAPICH2": "mpich",
    "Intel MPI": "mpich",
}
_FAMILY_NAME = {"openmpi": "Open MPI", "mpich": "MPICH"}


def _mpi4py_family():
    vendor = MPI.get_vendor()[0]
    fam = _VENDOR_FAMILY.get(vendor)
    if fam is None:
        raise errors.LibraryError(
            "hpml: mpi4py uses %s, an MPI hpml is not built for (Open MPI or MPICH)" % vendor
        )
    return fam


def _elf_needed(path):
    """The DT_NEEDED names of an ELF64 little-endian shared object ([] if not one)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
    ]
    names = []
    for _name, kind, _flags, _addr, off, size, link, _info, _align, entsize in sections:
        if kind != 6:  # SHT_DYNAMIC
            continue
        stroff = sections[link][4]
        for pos in range(off, off + size, entsize or 16):
            tag, val = struct.unpack_from("<qQ", data, pos)
            if tag == 0:
                break
            if tag == 1:  # DT_NEEDED
                end = data.index(b"\0", stroff + val)
                names.append(data[stroff + val : end].decode())
    return names


def _lib_family(path):
    for name in _elf_needed(path):
        if name.startswith("libmpich.so"):
            return "mpich"
        if name.startswith("libmpi.so"):
            return "openmpi"
    return None


def _candidates(family):
    env = os.environ.get("HPML_LIB")
    if env:
        return [os.path.join(env, "libhpml.so.0") if os.path.isdir(env) else env], True
    here = os.path.dirname(os.path.abspath(__file__))
    return [
        os.path.join(here, "..", "..", "build", family, "lib", "libhpml.so.0"),
        os.path.join(here, "..", "..", "..", "libhpml-%s.so.0" % family),
    ], False


def find_library():
    """(path or soname, MPI family) of the libhpml to load; raises LibraryError."""
    family = _mpi4py_family()
    paths, forced = _candidates(family)
    for p in paths:
        if os.path.isfile(p):
            path = os.path.normpath(p)
            built = _lib_family(path)
            if built is None:
                raise errors.LibraryError(
                    "hpml: %s is not a libhpml linked against an MPI library" % path
                )
            if built != family:
                raise errors.LibraryError(
                    "hpml: %s is built for %s but mpi4py uses %s: load the %s build "
                    "(make MPI=%s, HPML_LIB=build/%s/lib/libhpml.so)"
                    % (path, _FAMILY_NAME[built], _FAMILY_NAME[family], _FAMILY_NAME[family],
                       family, family)
                )
            return path, family
        if forced:
            raise errors.LibraryError("hpml: HPML_LIB=%s: no such file" % p)
    # Last, the loader's search path; the MPI cannot be checked before loading there.
    return "libhpml-%s.so.0" % family, family


_CDEF_COMMON = """
typedef struct hpml_comm hpml_comm_t;
typedef struct hpml_request hpml_request_t;

const char *hpml_version(void);
const char *hpml_build_commit(void);
const char *hpml_strerror(int err);
const char *hpml_last_error(void);
void hpml_clear_error(void);

size_t hpml_dtype_size(int dt);
int hpml_reduce_local(void *dst, const void *src, size_t n, int dt, int op);

int hpml_comm_create(MPI_Comm user, const void *cfg, hpml_comm_t **out);
void hpml_comm_destroy(hpml_comm_t *comm);
int hpml_comm_rank(const hpml_comm_t *comm);
int hpml_comm_size(const hpml_comm_t *comm);
int hpml_comm_nodes(const hpml_comm_t *comm);
int hpml_comm_node(const hpml_comm_t *comm);
int hpml_comm_local_rank(const hpml_comm_t *comm);
int hpml_comm_local_size(const hpml_comm_t *comm);

int hpml_allreduce_algo(int algo, const void *sendbuf, void *recvbuf, size_t count,
                        int dtype, int op, hpml_comm_t *comm);
int hpml_bcast_algo(int algo, void *buf, size_t count, int dtype, int root, hpml_comm_t *comm);
int hpml_barrier(hpml_comm_t *comm);
int hpml_reduce_algo(int algo, const void *sendbuf, void *recvbuf, size_t count,
                     int dtype, int op, int root, hpml_comm_t *comm);
int hpml_allgather_algo(int algo, const void *sendbuf, void *recvbuf, size_t count,
                        int dtype, hpml_comm_t *comm);
int hpml_reduce_scatter_algo(int algo, const void *sendbuf, void *recvbuf, size_t count,
                             int dtype, int op, hpml_comm_t *comm);
int hpml_alltoallv(const void *sendbuf, const size_t *scounts, const size_t *sdispls,
                   void *recvbuf, const size_t *rcounts, const size_t *rdispls, int dtype,
                   hpml_comm_t *comm);
int hpml_algo_list(int coll, const int **algos, size_t *n);
int hpml_algo_selected(hpml_comm_t *comm, int coll, size_t bytes);
const char *hpml_algo_name(int algo);
const char *hpml_coll_name(int coll);

void *hpml_comm_alloc_shared(hpml_comm_t *comm, size_t bytes);
void hpml_comm_free_shared(hpml_comm_t *comm, void *p);

int hpml_iallreduce(const void *sendbuf, void *recvbuf, size_t count, int dtype, int op,
                    hpml_comm_t *comm, hpml_request_t **req);
int hpml_ibcast(void *buf, size_t count, int dtype, int root, hpml_comm_t *comm,
                hpml_request_t **req);
int hpml_wait(hpml_request_t *req);
int hpml_test(hpml_request_t *req, int *done);

typedef struct FILE FILE;
int hpml_select_describe(hpml_comm_t *comm, FILE *f, int json);

typedef struct hpml_setting {
    const char *name;
    int kind;
    const char *def_;
    uint64_t min, max;
    const char *choices;
    int agreed;
    const char *doc;
} hpml_setting_t;
size_t hpml_settings_count(void);
const hpml_setting_t *hpml_setting_at(size_t i);

const char *hpml_blas_config(void);
int hpml_blas_threads(void);
void hpml_blas_set_threads(int n);
int hpml_cpu_has_avx2(void);
int hpml_cpu_has_f16c(void);
int hpml_cpu_has_fma(void);
int hpml_simd_active(void);
size_t hpml_cpu_llc_bytes(void);

typedef struct hpml_sysinfo {
    char mpi_library[%(MAX_LIBRARY_VERSION_STRING)d];
    int mpi_version, mpi_subversion;
    int thread_provided;
    int ranks;
    int nodes;
    char (*hostnames)[256];
    int *node_ranks;
    int shm_works;
    char shm_detail[256];
} hpml_sysinfo_t;
int hpml_sysinfo_gather(MPI_Comm comm, hpml_sysinfo_t *out);
void hpml_sysinfo_free(hpml_sysinfo_t *info);
const char *hpml_thread_level_name(int level);

/* ml */
typedef struct hpml_kmeans_params {
    size_t k;
    int init;
    const void *init_centroids;
    int max_iter;
    double tol;
    int n_init;
    uint64_t seed;
    int n_local_trials;
    int parallel_rounds;
    double oversampling;
    size_t tile_rows;
    int no_center;
    void *progress;
    void *progress_user;
} hpml_kmeans_params_t;
void hpml_kmeans_params_default(hpml_kmeans_params_t *p);
typedef struct hpml_kmeans_result {
    size_t k, cols;
    int dtype;
    void *centroids;
    int32_t *labels;
    size_t rows;
    size_t total_rows;
    double inertia;
    int n_iter;
    int converged;
    int strict;
    int best_run;
    size_t relocated;
    size_t empty;
    double init_seconds;
    double lloyd_seconds;
    int total_iter;
    double iter_seconds;
} hpml_kmeans_result_t;
int hpml_kmeans_fit(hpml_comm_t *comm, const hpml_kmeans_params_t *params, int dtype,
                    void *X, size_t rows, size_t cols, hpml_kmeans_result_t *out);
void hpml_kmeans_result_free(hpml_kmeans_result_t *r);
int hpml_kmeans_predict(hpml_comm_t *comm, int dtype, const void *X, size_t rows,
                        size_t cols, const void *centroids, size_t k, int32_t *labels,
                        double *inertia);
int hpml_kmeans_init_parse(const char *name, int *out);

int hpml_knn_search(hpml_comm_t *comm, const double *ref, const int64_t *labels, size_t nref,
                    const double *query, size_t nq, size_t d, size_t k, int64_t *indices,
                    double *distances, int64_t *pred, void *progress, void *progress_ctx);

typedef struct hpml_pca_config {
    size_t n_components;
    int solver;
    int center;
    size_t oversample;
    int n_iter;
    uint64_t seed;
} hpml_pca_config_t;
void hpml_pca_config_init(hpml_pca_config_t *cfg);
typedef struct hpml_pca {
    size_t n_samples, n_features, n_components;
    int center;
    double *mean;
    double *components;
    double *explained_variance;
    double *explained_variance_ratio;
    double *singular_values;
    double total_variance;
} hpml_pca_t;
int hpml_pca_fit(hpml_comm_t *comm, const double *x, size_t rows, size_t d,
                 const hpml_pca_config_t *cfg, hpml_pca_t **out);
int hpml_pca_transform(const hpml_pca_t *pca, const double *x, size_t rows, double *out);
void hpml_pca_destroy(hpml_pca_t *pca);

typedef struct hpml_linreg_config {
    double alpha;
    int fit_intercept;
} hpml_linreg_config_t;
typedef struct hpml_linreg {
    size_t n_samples, n_features, n_targets;
    double *coef;
    double *intercept;
} hpml_linreg_t;
int hpml_linreg_fit(hpml_comm_t *comm, const double *x, const double *y, size_t rows, size_t d,
                    size_t t, const hpml_linreg_config_t *cfg, hpml_linreg_t **out);
int hpml_linreg_predict(const hpml_linreg_t *m, const double *x, size_t rows, double *pred);
void hpml_linreg_destroy(hpml_linreg_t *m);
int hpml_r2_score(hpml_comm_t *comm, const double *y, const double *pred, size_t rows,
                  size_t t, double *r2);

typedef struct hpml_logreg_config {
    double C;
    int fit_intercept;
    int multinomial;
    size_t max_iter;
    double tol;
    double ftol;
    size_t memory;
    void *progress;
    void *progress_ctx;
} hpml_logreg_config_t;
void hpml_logreg_config_init(hpml_logreg_config_t *cfg);
typedef struct hpml_logreg {
    size_t n_samples, n_features, n_classes;
    size_t n_rows;
    int multinomial;
    int64_t *classes;
    double *coef;
    double *intercept;
    size_t n_iter;
    int converged;
    double objective;
} hpml_logreg_t;
int hpml_logreg_fit(hpml_comm_t *comm, const double *x, const int64_t *y, size_t rows, size_t d,
                    const hpml_logreg_config_t *cfg, hpml_logreg_t **out);
int hpml_logreg_predict_proba(const hpml_logreg_t *m, const double *x, size_t rows,
                              double *proba);
int hpml_logreg_predict(const hpml_logreg_t *m, const double *x, size_t rows, int64_t *pred);
void hpml_logreg_destroy(hpml_logreg_t *m);
"""

_LIBC_CDEF = """
FILE *open_memstream(char **ptr, size_t *sizeloc);
int fclose(FILE *stream);
void free(void *ptr);
"""

# The version of the --json records' schema (HPML_JSON_SCHEMA_VERSION, hpml/core.h).
JSON_SCHEMA_VERSION = 1

ffi = cffi.FFI()
path, family = find_library()
ffi.cdef(
    ("typedef void *MPI_Comm;\n" if family == "openmpi" else "typedef int MPI_Comm;\n")
    + _CDEF_COMMON % {"MAX_LIBRARY_VERSION_STRING": MPI.MAX_LIBRARY_VERSION_STRING}
    + _LIBC_CDEF
)
try:
    lib = ffi.dlopen(path)
except OSError as e:
    raise errors.LibraryError(
        "hpml: cannot load %s (%s): build it with `make MPI=%s`, or set HPML_LIB to its path"
        % (path, e, family)
    ) from None
libc = ffi.dlopen(None)


def _load_fast():
    try:
        from . import _fast  # installed beside this file

        return _fast
    except ImportError:
        pass
    if os.sep not in path:  # found by the dynamic loader: no build tree to look in
        return None
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        p = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(path))), "python", "hpml",
                         "_fast" + suffix)
        if os.path.isfile(p):
            spec = importlib.util.spec_from_file_location("hpml._fast", p)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
    return None


fast = _load_fast()


def address(fn):
    """The address of a libhpml function, as an integer (for hpml._fast)."""
    return int(ffi.cast("uintptr_t", fn))


def mpi_comm(comm):
    """The C MPI_Comm of an mpi4py communicator, as this MPI represents it."""
    return ffi.cast("MPI_Comm", MPI._handleof(comm))


def raise_error(rc, what=None):
    """Raise the hpml.Error for a negative return code, with hpml's message."""
    detail = ffi.string(lib.hpml_last_error()).decode(errors="replace")
    text = ffi.string(lib.hpml_strerror(rc)).decode()
    msg = "hpml: %s%s%s" % (what + ": " if what else "", text, ": " + detail if detail else "")
    lib.hpml_clear_error()
    raise errors.BY_CODE.get(rc, errors.Error)(msg, rc)


def check(rc, what=None):
    if rc != 0:
        raise_error(rc, what)


def capture(fn):
    """Call fn(FILE *) and return what it wrote there (through open_memstream)."""
    ptr = ffi.new("char **")
    size = ffi.new("size_t *")
    f = libc.open_memstream(ptr, size)
    if f == ffi.NULL:
        raise errors.OutOfMemory("hpml: open_memstream failed")
    try:
        rc = fn(f)
    finally:
        libc.fclose(f)
        text = ffi.string(ptr[0], size[0]).decode(errors="replace")
        libc.free(ptr[0])
    check(rc)
    return text
