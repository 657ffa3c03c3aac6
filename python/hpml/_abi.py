"""The C declarations of libhpml that the package uses, and MPI communicator handles.

Apart from hpml._lib so that it can be used without mpi4py: tests/python/handles_check.py
loads this file alone to pass communicators to a libhpml built for an MPI that Debian's
mpi4py is not built for (MPICH), with these very declarations.
"""

# Both MPIs' MPI_Comm: Open MPI's is a pointer, the MPICH family's an int.
_COMM_TYPEDEF = {"openmpi": "typedef void *MPI_Comm;\n", "mpich": "typedef int MPI_Comm;\n"}


def cdef(family, max_library_version_string):
    """The cdef text for a libhpml built for `family` ("openmpi" or "mpich"), whose mpi.h
    has MPI_MAX_LIBRARY_VERSION_STRING = max_library_version_string."""
    return (_COMM_TYPEDEF[family]
            + _CDEF_COMMON % {"MAX_LIBRARY_VERSION_STRING": max_library_version_string}
            + _LIBC_CDEF)


def c_comm(ffi, handle):
    """The C MPI_Comm of a communicator handle given as an integer (mpi4py's
    MPI._handleof: a pointer's address, or an int handle, perhaps widened with its sign
    to 64 bits); ffi must hold cdef()'s declarations. An int handle keeps its low 32
    bits, as a C conversion to int does."""
    return ffi.cast("MPI_Comm", handle)


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
int hpml_bench_time_blocking(MPI_Comm comm, hpml_comm_t *hcomm, const char *case_name,
                             const char *impl, const void *sendbuf, void *recvbuf,
                             size_t bytes, int dtype, long iters, long skip, double *t);
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

