#!/usr/bin/python3
"""Reference for tests/cli/linreg.sh: data, and scikit-learn's LinearRegression / Ridge.

  linreg_ref.py gen DIR          write the inputs
  linreg_ref.py check DIR N...   compare DIR/np<N>.* (hpml outputs at N ranks) with sklearn
"""
import json
import sys

import numpy as np
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.metrics import r2_score


def gen(d):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(203, 6)) * [1, 2, 0.5, 3, 1, 10] + [0, 5, -2, 0, 100, 1]
    w = rng.normal(size=(6, 2))
    Y = X @ w + [1.5, -3] + 0.2 * rng.normal(size=(203, 2))
    np.save(f"{d}/X.npy", X)
    np.save(f"{d}/Y.npy", Y)
    np.save(f"{d}/XY.npy", np.hstack([X[:, :2], Y[:, :1], X[:, 2:]]))  # target in column 2
    Xt = rng.normal(size=(41, 6)) * [1, 2, 0.5, 3, 1, 10] + [0, 5, -2, 0, 100, 1]
    np.save(f"{d}/Xt.npy", Xt)
    Yt = Xt @ w + [1.5, -3] + 0.2 * rng.normal(size=(41, 2))
    np.save(f"{d}/Yt.npy", Yt)
    np.save(f"{d}/y0.npy", Y[:, :1])
    np.save(f"{d}/y1.npy", Y[:, 1:2])
    np.save(f"{d}/XYt.npy", np.hstack([Xt[:, :2], Yt[:, :1], Xt[:, 2:]]))  # as XY.npy
    Xc = X.copy()
    Xc[:, 4] = 2.5
    np.save(f"{d}/Xconst.npy", Xc)
    Xl = X.copy()
    Xl[:, 3] = X[:, 0] - 2 * X[:, 1]
    np.save(f"{d}/Xcol.npy", Xl)


def close(name, a, b, tol):
    if np.ndim(a) != 0 and np.shape(a) != np.shape(b):  # JSON scalars and lists aside
        print(f"{name}: shape {np.shape(a)}, expected {np.shape(b)}")
        return 1
    a, b = np.asarray(a, dtype=float).reshape(np.shape(b)), np.asarray(b, dtype=float)
    err = np.abs(a - b).max() / max(1.0, np.abs(b).max())
    if not err <= tol:
        print(f"{name}: relative error {err:.3g} > {tol}")
        return 1
    return 0


def check(d, ranks):
    X, Y = np.load(f"{d}/X.npy"), np.load(f"{d}/Y.npy")
    Xt, Yt = np.load(f"{d}/Xt.npy"), np.load(f"{d}/Yt.npy")
    ols = LinearRegression().fit(X, Y)
    ridge = Ridge(alpha=7.5).fit(X, Y[:, 0])
    noint = LinearRegression(fit_intercept=False).fit(X, Y[:, 1])
    bad = 0
    for n in ranks:
        p = f"{d}/np{n}"
        bad |= close(f"np{n} ols coef", np.load(f"{p}.ols.coef.npy"), ols.coef_, 1e-10)
        bad |= close(f"np{n} ols intercept", np.load(f"{p}.ols.intercept.npy"),
                     ols.intercept_, 1e-10)
        s = json.load(open(f"{p}.ols.json"))
        bad |= close(f"np{n} ols r2", s["r2"], ols.score(X, Y), 1e-12)
        bad |= close(f"np{n} ols r2_test", s["r2_test"], r2_score(Yt, ols.predict(Xt)), 1e-12)
        bad |= close(f"np{n} ols predictions", np.load(f"{p}.ols.pred.npy"), ols.predict(Xt), 1e-10)
        bad |= close(f"np{n} ridge coef", np.load(f"{p}.ridge.npy"), ridge.coef_, 1e-10)
        s = json.load(open(f"{p}.ridge.json"))
        bad |= close(f"np{n} ridge intercept", s["intercept"][0], ridge.intercept_, 1e-10)
        bad |= close(f"np{n} ridge r2", s["r2"], ridge.score(X, Y[:, 0]), 1e-12)
        # --target-col 2 of XY.npy is Y[:, 0]: the same ridge model.
        s = json.load(open(f"{p}.col.json"))
        bad |= close(f"np{n} target-col coef", s["coef"], ridge.coef_, 1e-10)
        bad |= close(f"np{n} target-col r2_test", s["r2_test"],
                     ridge.score(Xt, Yt[:, 0]), 1e-12)
        s = json.load(open(f"{p}.noint.json"))
        bad |= close(f"np{n} no-intercept coef", s["coef"], noint.coef_, 1e-10)
        bad |= close(f"np{n} no-intercept intercept", s["intercept"], [0.0], 0)
    if not bad:
        print(f"linreg: OLS (2 targets), ridge, --target-col, no intercept, R^2 and predictions "
              f"match sklearn at ranks {ranks}")
    return bad


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        sys.exit(check(sys.argv[2], [int(n) for n in sys.argv[3:]]))
