#!/usr/bin/python3
"""Reference for tests/cli/pca.sh: data, and scikit-learn's PCA / TruncatedSVD answers.

  pca_ref.py gen DIR          write the inputs
  pca_ref.py check DIR N...   compare DIR/np<N>.* (hpml outputs at N ranks) with sklearn
"""
import sys

import numpy as np
from sklearn.decomposition import PCA, TruncatedSVD

K = 4


def gen(d):
    rng = np.random.default_rng(7)
    # Tall, correlated, offset, with a decaying spectrum.
    X = (rng.normal(size=(157, 8)) * 0.7 ** np.arange(8)) @ rng.normal(size=(8, 8)) + 4.0
    np.save(f"{d}/X.npy", X)
    np.savetxt(f"{d}/X.csv", X, delimiter=",", fmt="%.17g")
    # Wide, rank 5 plus small noise, for the randomized solver.
    W = rng.normal(size=(61, 5)) @ (rng.normal(size=(5, 300)) * np.array([[9], [6], [4], [3], [2]]))
    W += 0.01 * rng.normal(size=W.shape)
    np.save(f"{d}/W.npy", W)


def close(name, a, b, tol, bad):
    if np.shape(a) != np.shape(b):
        print(f"{name}: shape {np.shape(a)}, expected {np.shape(b)}")
        return 1
    a, b = np.asarray(a), np.asarray(b)
    err = np.abs(a - b).max() / max(1.0, np.abs(b).max())
    if not err <= tol:
        print(f"{name}: relative error {err:.3g} > {tol}")
        return 1
    return bad


def compare(prefix, m, X, bad, tol):
    bad = close(f"{prefix} components", np.load(f"{prefix}.components.npy"), m.components_, tol, bad)
    bad = close(f"{prefix} explained_variance", np.load(f"{prefix}.explained_variance.npy"),
                m.explained_variance_, tol, bad)
    bad = close(f"{prefix} explained_variance_ratio",
                np.load(f"{prefix}.explained_variance_ratio.npy"), m.explained_variance_ratio_,
                tol, bad)
    bad = close(f"{prefix} singular_values", np.load(f"{prefix}.singular_values.npy"),
                m.singular_values_, tol, bad)
    bad = close(f"{prefix} transform", np.load(f"{prefix}.t.npy"), m.transform(X), tol, bad)
    return bad


def check(d, ranks):
    X, W = np.load(f"{d}/X.npy"), np.load(f"{d}/W.npy")
    full = PCA(n_components=K, svd_solver="full").fit(X)
    tsvd = TruncatedSVD(n_components=K, algorithm="arpack", tol=0).fit(X)
    wide = PCA(n_components=3, svd_solver="full").fit(W)
    bad = 0
    for n in ranks:
        bad = compare(f"{d}/np{n}.full", full, X, bad, 1e-9)       # signs included
        bad = compare(f"{d}/np{n}.tsvd", tsvd, X, bad, 1e-8)
        bad = compare(f"{d}/np{n}.rand", wide, W, bad, 1e-7)
    bad = compare(f"{d}/np{ranks[-1]}.csv", full, X, bad, 1e-9)
    # The result does not depend on the rank count beyond rounding.
    for what in ("full", "tsvd", "rand"):
        a = np.load(f"{d}/np{ranks[0]}.{what}.components.npy")
        for n in ranks[1:]:
            bad = close(f"{what} np{ranks[0]} vs np{n}", np.load(f"{d}/np{n}.{what}.components.npy"),
                        a, 1e-11, bad)
    if not bad:
        print(f"pca: full, CSV, truncated SVD and randomized results match sklearn at ranks {ranks}")
    return bad


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        sys.exit(check(sys.argv[2], [int(n) for n in sys.argv[3:]]))
