#!/usr/bin/python3
"""Reference data and scikit-learn results for hpml's K-Means tests.

  kmeans_ref.py gen DIR                     write the test cases into DIR
  kmeans_ref.py check DIR CASE PREFIX JSON  compare hpml's PREFIX.centroids.npy,
                                            PREFIX.labels.npy and --json summary with
                                            scikit-learn's KMeans on the same data and
                                            the same initial centroids; exit 1 on mismatch
  kmeans_ref.py props DIR CASE PREFIX JSON  checks that need no reference (k-means++ etc.)
  kmeans_ref.py batch FILE                  run the check/props lines of FILE (each line:
                                            a name, a tab, then check|props and its four
                                            arguments); print every failure with its name
                                            and exit 1 if any failed. One process pays for
                                            importing scikit-learn once.

Runs with Debian's /usr/bin/python3 (scikit-learn 1.2, numpy).
"""
import json
import sys

import numpy as np
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

# case: (dtype, rows, cols, k); rows chosen not to divide by 2 or 3
CASES = {
    "f64": ("float64", 1001, 5, 4),
    "f32": ("float32", 1001, 7, 5),
    "empty": ("float64", 601, 3, 4),   # one initial centroid far away: relocated
    "far": ("float32", 503, 4, 3),     # data far from the origin (centring matters)
    "wide": ("float32", 2003, 9, 21),  # k > 16: several vectors of centres per row
    "wide64": ("float64", 1501, 5, 19),
}


def gen(d):
    rng = np.random.RandomState(7)
    for name, (dt, n, p, k) in CASES.items():
        X, _ = make_blobs(n_samples=n, n_features=p, centers=k, cluster_std=2.0,
                          random_state=3)
        if name == "far":
            X = X + 1000.0
        X = X.astype(dt)
        C0 = X[rng.choice(n, k, replace=False)].copy()
        if name == "empty":
            C0[2] = X.max(axis=0) + 100.0
        np.save(f"{d}/{name}.X.npy", X)
        np.save(f"{d}/{name}.C0.npy", C0)
    # a clustered data set for k-means++ properties (10 tight blobs)
    X, _ = make_blobs(n_samples=2000, n_features=4, centers=10, cluster_std=0.3,
                      center_box=(-50, 50), random_state=11)
    np.save(f"{d}/blobs.X.npy", X)


class Mismatch(Exception):
    pass


def fail(msg):
    raise Mismatch(msg)


def batch(path):
    failed = 0
    with open(path) as f:
        for line in f:
            name, args = line.rstrip("\n").split("\t")
            what, *rest = args.split(" ")
            try:
                (check if what == "check" else props)(*rest)
            except Mismatch as e:
                print(f"kmeans_ref: FAIL: {name}: {e}")
                failed += 1
    return failed


def check(d, case, prefix, js):
    dt, n, p, k = CASES[case]
    X = np.load(f"{d}/{case}.X.npy")
    C0 = np.load(f"{d}/{case}.C0.npy")
    km = KMeans(n_clusters=k, init=C0, n_init=1, max_iter=300, tol=1e-4,
                algorithm="lloyd").fit(X)
    C = np.load(f"{prefix}.centroids.npy")
    L = np.load(f"{prefix}.labels.npy")
    s = json.load(open(js))
    f32 = dt == "float32"
    rtol = 2e-4 if f32 else 1e-9
    scale = max(1.0, float(np.abs(X).max()))
    err_c = float(np.abs(C - km.cluster_centers_).max()) / scale
    err_i = abs(s["inertia"] - km.inertia_) / km.inertia_
    bad = int((L != km.labels_).sum())
    print(f"{case}: sklearn n_iter={km.n_iter_} inertia={km.inertia_:.10g}; "
          f"hpml n_iter={s['n_iter']} inertia={s['inertia']:.10g}; "
          f"max|dC|/scale={err_c:.2e} rel dI={err_i:.2e} label diffs={bad}")
    if C.shape != (k, p) or L.shape != (n,):
        fail(f"shapes {C.shape} {L.shape}")
    if C.dtype != np.dtype(dt) or L.dtype != np.int32:
        fail(f"dtypes {C.dtype} {L.dtype}")
    if err_c > rtol or err_i > rtol:
        fail("centroids or inertia differ from scikit-learn")
    if bad > (2 if f32 else 0):
        fail(f"{bad} labels differ from scikit-learn")
    # The labels go straight into scikit-learn's metrics, which need a 1-D array.
    if not f32 and adjusted_rand_score(km.labels_, L) != 1.0:
        fail("adjusted_rand_score against scikit-learn's labels is not 1")
    if not f32 and s["n_iter"] != km.n_iter_:
        fail("iteration count differs from scikit-learn")
    if f32 and abs(s["n_iter"] - km.n_iter_) > 1:
        fail("iteration count differs from scikit-learn")
    if case == "empty" and s["relocated"] < 1:
        fail("the empty cluster was not relocated")


def props(d, case, prefix, js):
    """Properties of a fit with no reference run: labels are the nearest centroid,
    inertia consistent with labels and centroids."""
    X = np.load(f"{d}/{case}.X.npy").astype(np.float64)
    C = np.load(f"{prefix}.centroids.npy").astype(np.float64)
    L = np.load(f"{prefix}.labels.npy")
    s = json.load(open(js))
    D = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)
    near = D.argmin(axis=1)
    ok = (near == L) | np.isclose(D[np.arange(len(L)), L], D.min(axis=1), rtol=1e-5)
    inert = D[np.arange(len(L)), L].sum()
    print(f"{case}: hpml inertia={s['inertia']:.10g} recomputed={inert:.10g} "
          f"non-nearest labels={int((~ok).sum())}")
    if not ok.all():
        fail("labels are not the nearest centroids")
    if abs(inert - s["inertia"]) > 1e-4 * inert:
        fail("inertia does not match centroids and labels")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "gen":
        gen(sys.argv[2])
    elif len(sys.argv) == 6 and sys.argv[1] in ("check", "props"):
        try:
            (check if sys.argv[1] == "check" else props)(*sys.argv[2:])
        except Mismatch as e:
            print("kmeans_ref: FAIL:", e)
            sys.exit(1)
    elif len(sys.argv) == 3 and sys.argv[1] == "batch":
        sys.exit(1 if batch(sys.argv[2]) else 0)
    else:
        print(__doc__)
        sys.exit(2)
