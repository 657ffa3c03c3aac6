"""Scikit-learn-style estimators over data distributed by rows: every rank passes its own
block of rows (rows may be 0 on some ranks, as an array of shape (0, n_features)), the
model is fitted on all of them together by libhpml's ml layer, and every rank holds the
same fitted model, with scikit-learn's attribute names. fit() and score() are collective
over the estimator's communicator; predict() and transform() are local except where a
docstring says otherwise (the neighbour searches, which search every rank's rows).

The estimators compute what the `hpml kmeans|knn|pca|linreg|logreg` commands compute, with
the same library calls, and match scikit-learn on the same data (and, for K-Means, the
same initial centroids).
"""

import inspect

import numpy as np
from mpi4py import MPI

from . import errors
from ._lib import check, ffi, lib
from .comm import Comm

_default = None


def _default_comm():
    global _default
    if _default is None or _default._c is None:
        _default = Comm(MPI.COMM_WORLD)
    return _default


class _Base:
    """get_params/set_params/repr as scikit-learn's BaseEstimator gives them, and the
    communicator: `comm` is an hpml.Comm, an mpi4py communicator (wrapped once), or None
    (one hpml.Comm over MPI.COMM_WORLD shared by the estimators)."""

    def get_params(self, deep=True):
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {n: getattr(self, n) for n in names}

    def set_params(self, **params):
        valid = self.get_params()
        for k, v in params.items():
            if k not in valid:
                raise errors.ArgumentError(
                    "hpml: %s has no parameter %r" % (type(self).__name__, k)
                )
            setattr(self, k, v)
        return self

    def __repr__(self):
        args = ", ".join("%s=%r" % kv for kv in self.get_params().items())
        return "%s(%s)" % (type(self).__name__, args)

    def _comm(self):
        c = self.comm
        if c is None:
            return _default_comm()
        if isinstance(c, Comm):
            return c
        if isinstance(c, MPI.Comm):
            own = getattr(self, "_wrapped", None)
            if own is None or own.mpi is not c or own._c is None:
                own = self._wrapped = Comm(c)
            return own
        raise errors.ArgumentError(
            "hpml: comm must be an hpml.Comm, an mpi4py communicator or None, not %s"
            % type(c).__name__
        )

    def _fitted(self, attr):
        if not hasattr(self, attr):
            raise errors.MPIError(
                "hpml: this %s is not fitted yet: call fit first" % type(self).__name__
            )


def _rows(X, name="X", dtype=np.float64, keep_f32=False):
    """X as a C-contiguous 2-d array of dtype (float32 stays float32 with keep_f32)."""
    X = np.asarray(X)
    if keep_f32 and X.dtype == np.float32:
        dtype = np.float32
    if X.ndim != 2:
        raise errors.ArgumentError(
            "hpml: %s must be 2-d (rows, features), got shape %s; a rank with no rows passes "
            "an array of shape (0, n_features)" % (name, X.shape)
        )
    if X.dtype.kind not in "biuf":
        raise errors.DtypeError("hpml: %s has dtype %s, not numbers" % (name, X.dtype))
    return np.ascontiguousarray(X, dtype=dtype)


def _agree_cols(comm, d, what):
    """Every rank must have the same number of columns: one allreduce tells each rank."""
    v = comm.allreduce(np.array([d, -d], np.int64), op="max")
    if v[0] != -v[1]:
        raise errors.ArgumentError(
            "hpml: %s: the ranks' data have different numbers of columns (%d to %d)"
            % (what, -v[1], v[0])
        )


def _ptr(a):
    return ffi.cast("void *", a.ctypes.data) if a.size else ffi.NULL


def _dptr(a):
    return ffi.cast("double *", a.ctypes.data)


def _copy(p, n):
    """n doubles at p, copied into a new array."""
    return np.frombuffer(ffi.buffer(p, 8 * n), np.float64).copy() if n else np.empty(0)


def _global_mean(comm, values, count):
    """Sum of `values` and of `count` over the ranks -> their ratio."""
    s = comm.allreduce(np.array([values, count], np.float64))
    return s[0] / s[1] if s[1] else float("nan")


# ---- K-Means ---------------------------------------------------------------------------


class KMeans(_Base):
    """Lloyd's K-Means as scikit-learn's KMeans(algorithm='lloyd') runs it.

    init: 'k-means++', 'random', 'k-means||' or an array (n_clusters, n_features), the
    same on every rank. n_init: 'auto' (1, or 10 for 'random') or a count. random_state:
    an int seed (None: 0); hpml's generator is not NumPy's, so only an array init gives
    scikit-learn's exact numbers. Attributes after fit: cluster_centers_, labels_ (this
    rank's rows), inertia_ (all rows), n_iter_, n_features_in_."""

    def __init__(self, n_clusters=8, *, init="k-means++", n_init="auto", max_iter=300,
                 tol=1e-4, random_state=None, comm=None):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.comm = comm

    def fit(self, X, y=None):
        comm = self._comm()
        X = np.array(_rows(X, keep_f32=True), copy=True)  # hpml centres it in place
        rows, d = X.shape
        _agree_cols(comm, d, "KMeans.fit")
        dt = 0 if X.dtype == np.float32 else 1
        p = ffi.new("hpml_kmeans_params_t *")
        lib.hpml_kmeans_params_default(p)
        p.k = int(self.n_clusters)
        keep = None
        if isinstance(self.init, str):
            code = ffi.new("int *")
            if lib.hpml_kmeans_init_parse(self.init.encode(), code) != 0:
                raise errors.ArgumentError(
                    "hpml: KMeans: init %r is not 'k-means++', 'random', 'k-means||' or an "
                    "array" % (self.init,)
                )
            p.init = code[0]
        else:
            keep = np.ascontiguousarray(self.init, dtype=X.dtype)
            if keep.shape != (self.n_clusters, d):
                raise errors.ArgumentError(
                    "hpml: KMeans: init has shape %s, needs (%d, %d)"
                    % (keep.shape, self.n_clusters, d)
                )
            p.init = 3  # HPML_KMEANS_INIT_ARRAY
            p.init_centroids = _ptr(keep)
        if self.n_init != "auto":
            p.n_init = int(self.n_init)
        p.max_iter = int(self.max_iter)
        p.tol = float(self.tol)
        p.seed = 0 if self.random_state is None else int(self.random_state)
        res = ffi.new("hpml_kmeans_result_t *")
        check(lib.hpml_kmeans_fit(comm._handle(), p, dt, _ptr(X), rows, d, res), "KMeans.fit")
        try:
            k = res.k
            buf = ffi.buffer(res.centroids, k * d * X.itemsize)
            self.cluster_centers_ = np.frombuffer(buf, X.dtype).reshape(k, d).copy()
            self.labels_ = np.frombuffer(ffi.buffer(res.labels, 4 * rows), np.int32).copy() \
                if rows else np.empty(0, np.int32)
            self.inertia_ = float(res.inertia)
            self.n_iter_ = int(res.n_iter)
        finally:
            lib.hpml_kmeans_result_free(res)
        self.n_features_in_ = d
        return self

    def _assign(self, X, want_inertia):
        self._fitted("cluster_centers_")
        comm = self._comm()
        C = self.cluster_centers_
        X = _rows(X, dtype=C.dtype)
        if X.shape[1] != C.shape[1]:
            raise errors.ArgumentError(
                "hpml: KMeans: X has %d features, the model %d" % (X.shape[1], C.shape[1])
            )
        labels = np.empty(X.shape[0], np.int32)
        inertia = ffi.new("double *") if want_inertia else ffi.NULL
        dt = 0 if C.dtype == np.float32 else 1
        check(lib.hpml_kmeans_predict(comm._handle(), dt, _ptr(X), X.shape[0], X.shape[1],
                                      _ptr(C), C.shape[0], ffi.cast("int32_t *", _ptr(labels)),
                                      inertia), "KMeans.predict")
        return labels, (inertia[0] if want_inertia else None)

    def predict(self, X):
        """Nearest centre of each of this rank's rows (local)."""
        return self._assign(X, False)[0]

    def fit_predict(self, X, y=None):
        return self.fit(X).labels_

    def transform(self, X):
        """Distances of this rank's rows to every centre (local)."""
        self._fitted("cluster_centers_")
        X = _rows(X, dtype=np.float64)
        C = self.cluster_centers_.astype(np.float64)
        d2 = (X * X).sum(1)[:, None] - 2 * X @ C.T + (C * C).sum(1)[None, :]
        return np.sqrt(np.maximum(d2, 0))

    def score(self, X, y=None):
        """Minus the inertia of every rank's rows (collective)."""
        return -self._assign(X, True)[1]


# ---- nearest neighbours ----------------------------------------------------------------


class NearestNeighbors(_Base):
    """Exact brute-force Euclidean neighbours over every rank's reference rows. Indices
    are global: rank 0's rows first, then rank 1's, and so on."""

    def __init__(self, n_neighbors=5, *, comm=None):
        self.n_neighbors = n_neighbors
        self.comm = comm

    def fit(self, X, y=None):
        comm = self._comm()
        self._fit_X = _rows(X)
        _agree_cols(comm, self._fit_X.shape[1], type(self).__name__ + ".fit")
        self.n_features_in_ = self._fit_X.shape[1]
        self.n_samples_fit_ = int(comm.allreduce(np.array([self._fit_X.shape[0]], np.int64))[0])
        self._labels = None
        return self

    def _search(self, X, k, want_dist, want_pred):
        self._fitted("_fit_X")
        comm = self._comm()
        k = self.n_neighbors if k is None else int(k)
        Q = _rows(X)
        if Q.shape[1] != self.n_features_in_:
            raise errors.ArgumentError(
                "hpml: %s: X has %d features, the fitted data %d"
                % (type(self).__name__, Q.shape[1], self.n_features_in_)
            )
        nq, nref = Q.shape[0], self._fit_X.shape[0]
        ind = np.empty((nq, k), np.int64)
        dist = np.empty((nq, k)) if want_dist else None
        pred = np.empty(nq, np.int64) if want_pred else None
        lab = self._labels if want_pred and nref else None  # NULL: this rank has no rows

        def ptr(a, ctype):
            return ffi.NULL if a is None else ffi.cast(ctype, a.ctypes.data)

        check(lib.hpml_knn_search(
            comm._handle(), ffi.cast("double *", _ptr(self._fit_X)), ptr(lab, "int64_t *"),
            nref, ffi.cast("double *", _ptr(Q)), nq, Q.shape[1], k, ptr(ind, "int64_t *"),
            ptr(dist, "double *"), ptr(pred, "int64_t *"), ffi.NULL, ffi.NULL),
            type(self).__name__)
        return dist, ind, pred

    def kneighbors(self, X, n_neighbors=None, return_distance=True):
        """(distances, indices) of this rank's query rows X, nearest first (collective:
        every rank passes its queries, perhaps none)."""
        dist, ind, _ = self._search(X, n_neighbors, return_distance, False)
        return (dist, ind) if return_distance else ind


class KNeighborsClassifier(NearestNeighbors):
    """Majority vote of the n_neighbors nearest reference rows (ties: the smallest class,
    as scikit-learn). Labels may be any sortable values; classes_ holds every rank's."""

    def fit(self, X, y):
        super().fit(X)
        comm = self._comm()
        y = np.asarray(y)
        if y.shape != (self._fit_X.shape[0],):
            raise errors.ArgumentError(
                "hpml: KNeighborsClassifier.fit: y has shape %s, X %d rows"
                % (y.shape, self._fit_X.shape[0])
            )
        self.classes_ = np.unique(np.concatenate(comm.mpi.allgather(np.unique(y))))
        self._labels = np.searchsorted(self.classes_, y).astype(np.int64)
        return self

    def predict(self, X):
        """Class of each of this rank's query rows (collective)."""
        self._fitted("classes_")
        _, _, pred = self._search(X, None, False, True)
        return self.classes_[pred]

    def score(self, X, y):
        """Accuracy over every rank's queries (collective)."""
        pred = self.predict(X)
        y = np.asarray(y)
        return _global_mean(self._comm(), float((pred == y).sum()), float(len(y)))


# ---- PCA -------------------------------------------------------------------------------


class PCA(_Base):
    """Principal component analysis: svd_solver 'full' (covariance + LAPACK) or
    'randomized' (scikit-learn's randomized SVD; random_state seeds hpml's own generator).
    Signs follow scikit-learn's svd_flip."""

    def __init__(self, n_components=2, *, svd_solver="full", n_oversamples=10,
                 iterated_power="auto", random_state=None, comm=None):
        self.n_components = n_components
        self.svd_solver = svd_solver
        self.n_oversamples = n_oversamples
        self.iterated_power = iterated_power
        self.random_state = random_state
        self.comm = comm

    def fit(self, X, y=None):
        comm = self._comm()
        X = _rows(X)
        _agree_cols(comm, X.shape[1], "PCA.fit")
        cfg = ffi.new("hpml_pca_config_t *")
        lib.hpml_pca_config_init(cfg)
        cfg.n_components = int(self.n_components)
        if self.svd_solver not in ("full", "randomized"):
            raise errors.ArgumentError(
                "hpml: PCA: svd_solver %r is not 'full' or 'randomized'" % (self.svd_solver,)
            )
        cfg.solver = 0 if self.svd_solver == "full" else 1
        cfg.center = 1
        cfg.oversample = int(self.n_oversamples)
        cfg.n_iter = -1 if self.iterated_power == "auto" else int(self.iterated_power)
        cfg.seed = 0 if self.random_state is None else int(self.random_state)
        out = ffi.new("hpml_pca_t **")
        check(lib.hpml_pca_fit(comm._handle(), _dptr(X), X.shape[0], X.shape[1], cfg, out),
              "PCA.fit")
        m = self._model = ffi.gc(out[0], lib.hpml_pca_destroy)
        k, d = m.n_components, m.n_features
        self.components_ = _copy(m.components, k * d).reshape(k, d)
        self.mean_ = _copy(m.mean, d)
        self.explained_variance_ = _copy(m.explained_variance, k)
        self.explained_variance_ratio_ = _copy(m.explained_variance_ratio, k)
        self.singular_values_ = _copy(m.singular_values, k)
        self.n_components_ = k
        self.n_samples_ = m.n_samples
        self.n_features_in_ = d
        return self

    def transform(self, X):
        """This rank's rows projected on the components (local)."""
        self._fitted("components_")
        X = _rows(X)
        if X.shape[1] != self.n_features_in_:
            raise errors.ArgumentError(
                "hpml: PCA: X has %d features, the model %d" % (X.shape[1], self.n_features_in_)
            )
        out = np.empty((X.shape[0], self.n_components_))
        check(lib.hpml_pca_transform(self._model, _dptr(X), X.shape[0], _dptr(out)),
              "PCA.transform")
        return out

    def fit_transform(self, X, y=None):
        return self.fit(X).transform(X)

    def inverse_transform(self, Z):
        self._fitted("components_")
        return np.asarray(Z, np.float64) @ self.components_ + self.mean_


# ---- linear models ---------------------------------------------------------------------


class _LinearBase(_Base):
    alpha = 0.0

    def fit(self, X, y):
        comm = self._comm()
        X = _rows(X)
        y = np.asarray(y, np.float64)
        one = y.ndim == 1
        Y = np.ascontiguousarray(y.reshape(-1, 1) if one else y)
        if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
            raise errors.ArgumentError(
                "hpml: %s.fit: y has shape %s, X %d rows" % (type(self).__name__, y.shape,
                                                            X.shape[0])
            )
        _agree_cols(comm, X.shape[1] * 65536 + Y.shape[1], type(self).__name__ + ".fit")
        cfg = ffi.new("hpml_linreg_config_t *")
        cfg.alpha = float(self.alpha)
        cfg.fit_intercept = 1 if self.fit_intercept else 0
        out = ffi.new("hpml_linreg_t **")
        check(lib.hpml_linreg_fit(comm._handle(), _dptr(X), _dptr(Y), X.shape[0], X.shape[1],
                                  Y.shape[1], cfg, out), type(self).__name__ + ".fit")
        m = self._model = ffi.gc(out[0], lib.hpml_linreg_destroy)
        t, d = m.n_targets, m.n_features
        coef = _copy(m.coef, t * d).reshape(t, d)
        icpt = _copy(m.intercept, t)
        self._one = one
        self.coef_ = coef[0] if one else coef
        self.intercept_ = (float(icpt[0]) if self.fit_intercept else 0.0) if one else icpt
        self.n_features_in_ = d
        return self

    def predict(self, X):
        """Predictions for this rank's rows (local)."""
        self._fitted("coef_")
        X = _rows(X)
        m = self._model
        if X.shape[1] != m.n_features:
            raise errors.ArgumentError(
                "hpml: %s: X has %d features, the model %d"
                % (type(self).__name__, X.shape[1], m.n_features)
            )
        pred = np.empty((X.shape[0], m.n_targets))
        check(lib.hpml_linreg_predict(m, _dptr(X), X.shape[0], _dptr(pred)), "predict")
        return pred[:, 0] if self._one else pred

    def score(self, X, y):
        """R^2 over every rank's rows (collective; averaged over targets as scikit-learn)."""
        comm = self._comm()
        pred = self.predict(X)
        y = np.asarray(y, np.float64)
        Y = np.ascontiguousarray(y.reshape(len(y), -1))
        P = np.ascontiguousarray(pred.reshape(len(y), -1))
        r2 = ffi.new("double *")
        check(lib.hpml_r2_score(comm._handle(), _dptr(Y), _dptr(P), Y.shape[0], Y.shape[1], r2),
              "score")
        return r2[0]


class LinearRegression(_LinearBase):
    """Ordinary least squares by the normal equations (centred, as scikit-learn)."""

    def __init__(self, *, fit_intercept=True, comm=None):
        self.fit_intercept = fit_intercept
        self.comm = comm


class Ridge(_LinearBase):
    """Least squares with the penalty alpha |w|^2 (the intercept is not penalised)."""

    def __init__(self, alpha=1.0, *, fit_intercept=True, comm=None):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.comm = comm


class LogisticRegression(_Base):
    """L2-regularised logistic regression by L-BFGS, scikit-learn's
    LogisticRegression(solver='lbfgs') objective: binary (sigmoid) for two classes,
    multinomial (softmax) for more, or always with multi_class='multinomial'."""

    def __init__(self, *, C=1.0, fit_intercept=True, max_iter=100, tol=1e-4,
                 multi_class="auto", comm=None):
        self.C = C
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.multi_class = multi_class
        self.comm = comm

    def fit(self, X, y):
        comm = self._comm()
        X = _rows(X)
        y = np.asarray(y)
        if y.shape != (X.shape[0],):
            raise errors.ArgumentError(
                "hpml: LogisticRegression.fit: y has shape %s, X %d rows" % (y.shape, X.shape[0])
            )
        _agree_cols(comm, X.shape[1], "LogisticRegression.fit")
        classes = np.unique(np.concatenate(comm.mpi.allgather(np.unique(y))))
        codes = np.searchsorted(classes, y).astype(np.int64)
        if self.multi_class not in ("auto", "multinomial"):
            raise errors.ArgumentError(
                "hpml: LogisticRegression: multi_class %r is not 'auto' or 'multinomial'"
                % (self.multi_class,)
            )
        cfg = ffi.new("hpml_logreg_config_t *")
        lib.hpml_logreg_config_init(cfg)
        cfg.C = float(self.C)
        cfg.fit_intercept = 1 if self.fit_intercept else 0
        cfg.multinomial = 1 if self.multi_class == "multinomial" else 0
        cfg.max_iter = int(self.max_iter)
        cfg.tol = float(self.tol)
        out = ffi.new("hpml_logreg_t **")
        check(lib.hpml_logreg_fit(comm._handle(), _dptr(X), ffi.cast("int64_t *", _ptr(codes)),
                                  X.shape[0], X.shape[1], cfg, out), "LogisticRegression.fit")
        m = self._model = ffi.gc(out[0], lib.hpml_logreg_destroy)
        r, d = m.n_rows, m.n_features
        self.coef_ = _copy(m.coef, r * d).reshape(r, d)
        self.intercept_ = _copy(m.intercept, r)
        self.n_iter_ = np.array([m.n_iter], np.int32)
        self.classes_ = classes
        self.n_features_in_ = d
        return self

    def _rows_for_model(self, X):
        self._fitted("coef_")
        X = _rows(X)
        if X.shape[1] != self.n_features_in_:
            raise errors.ArgumentError(
                "hpml: LogisticRegression: X has %d features, the model %d"
                % (X.shape[1], self.n_features_in_)
            )
        return X

    def decision_function(self, X):
        z = self._rows_for_model(X) @ self.coef_.T + self.intercept_
        return z[:, 0] if z.shape[1] == 1 else z

    def predict_proba(self, X):
        """Class probabilities of this rank's rows (local)."""
        X = self._rows_for_model(X)
        proba = np.empty((X.shape[0], len(self.classes_)))
        check(lib.hpml_logreg_predict_proba(self._model, _dptr(X), X.shape[0], _dptr(proba)),
              "predict_proba")
        return proba

    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))

    def predict(self, X):
        """Class of each of this rank's rows (local)."""
        X = self._rows_for_model(X)
        pred = np.empty(X.shape[0], np.int64)
        check(lib.hpml_logreg_predict(self._model, _dptr(X), X.shape[0],
                                      ffi.cast("int64_t *", pred.ctypes.data)), "predict")
        return self.classes_[pred]

    def score(self, X, y):
        """Accuracy over every rank's rows (collective)."""
        pred = self.predict(X)
        y = np.asarray(y)
        return _global_mean(self._comm(), float((pred == y).sum()), float(len(y)))
