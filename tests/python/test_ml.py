"""The estimators against scikit-learn on the same data: every rank makes the whole data
set, fits hpml on its block of rows and scikit-learn on all of them."""

import numpy as np
import pytest
from mpi4py import MPI
from sklearn import cluster, decomposition, linear_model, neighbors

import hpml


def blocks(n, size, empty_last=False):
    """Row ranges of each rank; with empty_last the last rank gets none (if size > 1)."""
    parts = size - 1 if empty_last and size > 1 else size
    edges = np.linspace(0, n, parts + 1).astype(int)
    out = [(edges[i], edges[i + 1]) for i in range(parts)]
    return out + [(n, n)] * (size - parts)


def mine(a, comm, empty_last=False):
    lo, hi = blocks(len(a), comm.size, empty_last)[comm.rank]
    return a[lo:hi]


def make_blobs(n=240, d=5, k=4, seed=3):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 6, (k, d))
    y = rng.integers(0, k, n)
    return centres[y] + rng.normal(0, 1.0, (n, d)), y


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("empty_last", [False, True])
def test_kmeans_matches_sklearn(comm, dtype, empty_last):
    X, _ = make_blobs()
    X = X.astype(dtype)
    init = X[[0, 50, 100, 150]].copy()
    ref = cluster.KMeans(4, init=init, n_init=1, algorithm="lloyd", tol=1e-4).fit(X)
    km = hpml.KMeans(4, init=init, n_init=1, comm=comm).fit(mine(X, comm, empty_last))
    assert km.cluster_centers_.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=tol, atol=tol)
    np.testing.assert_array_equal(km.labels_, mine(ref.labels_, comm, empty_last))
    assert km.inertia_ == pytest.approx(ref.inertia_, rel=tol)
    assert km.n_iter_ == ref.n_iter_
    np.testing.assert_array_equal(km.predict(mine(X, comm)), mine(ref.predict(X), comm))
    assert km.score(mine(X, comm)) == pytest.approx(ref.score(X), rel=tol)
    np.testing.assert_allclose(km.transform(X[:5]), ref.transform(X[:5]), rtol=tol, atol=tol)
    again = hpml.KMeans(4, init=init, n_init=1, comm=comm)
    np.testing.assert_array_equal(again.fit_predict(mine(X, comm, empty_last)), km.labels_)


def test_kmeans_plusplus_is_rank_count_independent(comm):
    # hpml's k-means++ draws from its own generator: same result at any rank count.
    X, _ = make_blobs(seed=5)
    km = hpml.KMeans(4, random_state=7, comm=comm).fit(mine(X, comm))
    alone = comm.mpi.bcast(
        hpml.KMeans(4, random_state=7, comm=MPI.COMM_SELF).fit(X).cluster_centers_
        if comm.rank == 0 else None)
    # COMM_SELF fits ran on rank 0 only; every rank compares with rank 0's.
    np.testing.assert_allclose(km.cluster_centers_, alone, rtol=1e-12, atol=1e-12)
    ref = cluster.KMeans(4, init=km.cluster_centers_, n_init=1).fit(X)
    assert km.inertia_ == pytest.approx(ref.inertia_, rel=1e-9)


def test_nearest_neighbors_matches_sklearn(comm):
    rng = np.random.default_rng(11)
    R, Q = rng.normal(size=(90, 4)), rng.normal(size=(31, 4))
    nn = hpml.NearestNeighbors(n_neighbors=6, comm=comm).fit(mine(R, comm, True))
    dist, ind = nn.kneighbors(mine(Q, comm))
    ref = neighbors.NearestNeighbors(n_neighbors=6).fit(R)
    rd, ri = ref.kneighbors(mine(Q, comm))
    np.testing.assert_array_equal(ind, ri)
    np.testing.assert_allclose(dist, rd, rtol=1e-12)
    assert nn.n_samples_fit_ == 90
    assert nn.kneighbors(mine(Q, comm), n_neighbors=2, return_distance=False).shape[1] == 2


def test_kneighbors_classifier_matches_sklearn(comm):
    X, y = make_blobs(n=150, d=3, k=3, seed=8)
    X += np.random.default_rng(1).normal(0, 2.5, X.shape)  # overlapping classes
    labels = np.array(["a", "b", "c"])[y]
    Xt, yt = X[:100], labels[:100]
    Xq, yq = X[100:], labels[100:]
    # The last rank holds no reference rows (and no queries below).
    clf = hpml.KNeighborsClassifier(n_neighbors=5, comm=comm).fit(mine(Xt, comm, True),
                                                                  mine(yt, comm, True))
    ref = neighbors.KNeighborsClassifier(n_neighbors=5).fit(Xt, yt)
    np.testing.assert_array_equal(clf.classes_, ref.classes_)
    np.testing.assert_array_equal(clf.predict(mine(Xq, comm, True)),
                                  mine(ref.predict(Xq), comm, True))
    assert clf.score(mine(Xq, comm, True), mine(yq, comm, True)) == \
        pytest.approx(ref.score(Xq, yq))


@pytest.mark.parametrize("solver", ["full", "randomized"])
def test_pca_matches_sklearn(comm, solver):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(120, 6)) @ rng.normal(size=(6, 6)) + 3
    pca = hpml.PCA(3, svd_solver=solver, comm=comm).fit(mine(X, comm, True))
    ref = decomposition.PCA(3, svd_solver="full").fit(X)
    tol = 1e-8 if solver == "full" else 1e-6
    np.testing.assert_allclose(pca.components_, ref.components_, atol=tol)
    np.testing.assert_allclose(pca.explained_variance_, ref.explained_variance_, rtol=tol)
    np.testing.assert_allclose(pca.explained_variance_ratio_, ref.explained_variance_ratio_,
                               rtol=tol)
    np.testing.assert_allclose(pca.singular_values_, ref.singular_values_, rtol=tol)
    np.testing.assert_allclose(pca.mean_, ref.mean_, rtol=1e-12)
    np.testing.assert_allclose(pca.transform(mine(X, comm)), ref.transform(mine(X, comm)),
                               atol=1e-6)
    assert pca.n_samples_ == 120 and pca.n_components_ == 3
    Z = hpml.PCA(3, svd_solver=solver, comm=comm).fit_transform(mine(X, comm))
    np.testing.assert_allclose(Z, ref.transform(mine(X, comm)), atol=1e-6)
    np.testing.assert_allclose(pca.inverse_transform(Z), ref.inverse_transform(Z), atol=1e-9)


@pytest.mark.parametrize("model", ["linear", "ridge"])
@pytest.mark.parametrize("targets", [1, 2])
def test_regression_matches_sklearn(comm, model, targets):
    rng = np.random.default_rng(9)
    X = rng.normal(size=(80, 4))
    Y = X @ rng.normal(size=(4, targets)) + 0.5 + rng.normal(0, 0.3, (80, targets))
    y = Y[:, 0] if targets == 1 else Y
    if model == "linear":
        est, ref = hpml.LinearRegression(comm=comm), linear_model.LinearRegression()
    else:
        est, ref = hpml.Ridge(alpha=2.5, comm=comm), linear_model.Ridge(alpha=2.5)
    est.fit(mine(X, comm, True), mine(y, comm, True))
    ref.fit(X, y)
    assert np.shape(est.coef_) == np.shape(ref.coef_)
    assert np.shape(est.intercept_) == np.shape(ref.intercept_)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-10)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-10)
    np.testing.assert_allclose(est.predict(mine(X, comm)), ref.predict(mine(X, comm)),
                               rtol=1e-10)
    assert est.score(mine(X, comm), mine(y, comm)) == pytest.approx(ref.score(X, y), rel=1e-10)


@pytest.mark.parametrize("classes", [2, 3])
def test_logistic_regression_matches_sklearn(comm, classes):
    X, y = make_blobs(n=160, d=4, k=classes, seed=12)
    X += np.random.default_rng(2).normal(0, 4, X.shape)
    y = y * 10 + 1  # labels that are not 0..k-1
    est = hpml.LogisticRegression(C=0.5, max_iter=200, tol=1e-8, comm=comm)
    est.fit(mine(X, comm), mine(y, comm))
    ref = linear_model.LogisticRegression(C=0.5, max_iter=200, tol=1e-8).fit(X, y)
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    assert est.coef_.shape == ref.coef_.shape
    # Both run L-BFGS on one objective; scikit-learn stops ~1e-5 from its minimum
    # (tests/ref/logreg_ref.py), so compare closely and require an objective as low.
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-3, atol=2e-4)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-3, atol=2e-4)
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(X), atol=5e-4)

    def objective(m):
        p = m.predict_proba(X)[np.arange(len(y)), np.searchsorted(m.classes_, y)]
        return -0.5 * np.log(p).sum() + 0.5 * (m.coef_ ** 2).sum()  # C = 0.5

    assert objective(est) <= objective(ref) * (1 + 1e-9)
    np.testing.assert_array_equal(est.predict(X), ref.predict(X))
    np.testing.assert_allclose(est.decision_function(X), ref.decision_function(X), atol=2e-3)
    np.testing.assert_allclose(est.predict_log_proba(X), np.log(est.predict_proba(X)))
    assert est.score(mine(X, comm), mine(y, comm)) == pytest.approx(ref.score(X, y))


def test_estimator_errors(comm):
    X, _ = make_blobs(n=30)
    with pytest.raises(hpml.ArgumentError, match="must be 2-d"):
        hpml.KMeans(2, comm=comm).fit(X[:, 0])
    with pytest.raises(hpml.ArgumentError, match="init 'kmeans' is not"):
        hpml.KMeans(2, init="kmeans", comm=comm).fit(X)
    with pytest.raises(hpml.ArgumentError, match=r"init has shape \(1, 5\), needs \(2, 5\)"):
        hpml.KMeans(2, init=X[:1], comm=comm).fit(X)
    if comm.size > 1:  # the ranks' blocks disagree on the columns: every rank says so
        with pytest.raises(hpml.ArgumentError, match=r"different numbers of columns \(3 to 4\)"):
            hpml.PCA(2, comm=comm).fit(X[:, : 3 + comm.rank % 2])
    with pytest.raises(hpml.MPIError, match="not fitted"):
        hpml.PCA(2, comm=comm).transform(X)
    with pytest.raises(hpml.ArgumentError, match="no parameter 'k'"):
        hpml.KMeans(comm=comm).set_params(k=3)
    # An error from the library, the same on every rank: more clusters than rows.
    with pytest.raises(hpml.ArgumentError, match="KMeans.fit: invalid argument"):
        hpml.KMeans(1000, comm=comm).fit(mine(X, comm))
    # NaN in the data: the library's numeric error.
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(hpml.NumericError):
        hpml.KMeans(2, comm=comm).fit(Xn)
    assert "n_clusters=8" in repr(hpml.KMeans(comm=comm))
