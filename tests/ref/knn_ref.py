#!/usr/bin/python3
"""Reference for tests/cli/knn.sh: data, and scikit-learn's answers to compare with.

  knn_ref.py gen DIR          write the inputs
  knn_ref.py check DIR N...   compare DIR/np<N>.* (hpml outputs of run N) with sklearn
"""
import sys

import numpy as np
from sklearn.neighbors import KNeighborsClassifier, NearestNeighbors

K = 5


def gen(d):
    rng = np.random.default_rng(42)
    # 611 references: more than one block of the fused search (256 rows)
    np.save(f"{d}/R.npy", rng.normal(size=(611, 6)))
    np.save(f"{d}/Q.npy", rng.normal(size=(67, 6)))
    np.save(f"{d}/l.npy", rng.integers(0, 4, size=(611, 1)))
    np.save(f"{d}/ql.npy", rng.integers(0, 4, size=(67, 1)))
    # Integer points on a 3x3 grid: many exactly equal distances.
    np.save(f"{d}/Rt.npy", rng.integers(0, 3, size=(61, 2)).astype(np.float64))
    np.save(f"{d}/Qt.npy", rng.integers(0, 3, size=(17, 2)).astype(np.float64))


def check(d, ranks):
    R, Q = np.load(f"{d}/R.npy"), np.load(f"{d}/Q.npy")
    l, ql = np.load(f"{d}/l.npy").ravel(), np.load(f"{d}/ql.npy").ravel()
    dist, ind = NearestNeighbors(n_neighbors=K, algorithm="brute").fit(R).kneighbors(Q)
    clf = KNeighborsClassifier(n_neighbors=K, algorithm="brute").fit(R, l)
    pred, acc = clf.predict(Q), clf.score(Q, ql)
    Rt, Qt = np.load(f"{d}/Rt.npy"), np.load(f"{d}/Qt.npy")
    tdist, _ = NearestNeighbors(n_neighbors=9, algorithm="brute").fit(Rt).kneighbors(Qt)
    # sklearn orders exact ties arbitrarily (heap + unstable sort); hpml takes the lower
    # index first, i.e. a stable sort of the exact (integer) squared distances.
    d2 = ((Qt[:, None, :] - Rt[None, :, :]) ** 2).sum(-1)
    tind = np.argsort(d2, axis=1, kind="stable")[:, :9]
    bad = 0
    for n in ranks:
        p = f"{d}/np{n}"
        i, dd = np.load(f"{p}.indices.npy"), np.load(f"{p}.distances.npy")
        pr = np.load(f"{p}.predictions.npy")
        if i.shape != ind.shape or not (i == ind).all():
            print(f"np={n}: indices differ from sklearn"); bad = 1
        if not np.allclose(dd, dist, rtol=1e-12, atol=1e-13):
            print(f"np={n}: distances differ by {abs(dd - dist).max()}"); bad = 1
        if pr.shape != pred.shape or not (pr == pred).all():
            print(f"np={n}: predictions differ from sklearn"); bad = 1
        a = float(open(f"{p}.acc").read())
        if abs(a - acc) > 1e-12:
            print(f"np={n}: accuracy {a} != sklearn {acc}"); bad = 1
        ti, td = np.load(f"{p}.ties.npy"), np.load(f"{p}.tiesd.npy")
        if not (ti == tind).all():
            print(f"np={n}: tie order is not lower-index-first"); bad = 1
        if not np.allclose(td, tdist, rtol=0, atol=1e-14):
            print(f"np={n}: tie distances differ from sklearn"); bad = 1
    if not bad:
        print(f"knn: indices, distances, predictions, accuracy {acc:.4f} and tie order "
              f"match at ranks {ranks}")
    return bad


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        sys.exit(check(sys.argv[2], sys.argv[3:]))
