#!/usr/bin/python3
"""Reference for tests/cli/logreg.sh: data, and scikit-learn's LogisticRegression(lbfgs).

  logreg_ref.py gen DIR          write the inputs
  logreg_ref.py check DIR N...   compare DIR/np<N>.* (hpml outputs at N ranks) with sklearn

Both sides run L-BFGS to a strict tolerance (sklearn: tol=1e-10; hpml: --tol 1e-10
--ftol 0). sklearn still stops at its ftol (64 eps relative decrease), ~1e-5 from the
optimum, so hpml's coefficients are compared with sklearn's at 1e-4 and with the optimum
polished by scipy (gtol 1e-13) at 1e-7; hpml's objective must not be worse than sklearn's.
"""
import json
import sys

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

C = 0.5


def gen(d):
    rng = np.random.default_rng(11)
    X = rng.normal(size=(241, 5)) + [1, 0, -1, 0, 2]
    W = rng.normal(size=(5, 3))
    y = np.argmax(X @ W + rng.gumbel(size=(241, 3)), axis=1) * 3 + 1   # labels 1, 4, 7
    np.save(f"{d}/X.npy", X)
    np.save(f"{d}/y.npy", y.reshape(-1, 1))
    np.save(f"{d}/yb.npy", np.where(y == 4, 8, 3).reshape(-1, 1))     # binary: 3, 8
    # 70 features: an evaluation takes the rows in tiles of 468 (256 KiB), several per rank
    Xw = rng.normal(size=(1201, 70))
    yw = np.argmax(Xw @ rng.normal(size=(70, 4)) * 0.3 + rng.gumbel(size=(1201, 4)), axis=1)
    np.save(f"{d}/Xw.npy", Xw)
    np.save(f"{d}/yw.npy", yw.reshape(-1, 1))
    np.savetxt(f"{d}/Xy.csv", np.hstack([X, y.reshape(-1, 1)]), delimiter=",", fmt="%.17g",
               header="a,b,c,d,e,label", comments="")


def objective(X, y, classes, coef, icpt, multinomial):
    """sklearn's objective C * sum(log-loss) + |W|^2 / 2 for a fitted model."""
    if multinomial and len(classes) == 2:
        coef, icpt = np.vstack([-coef, coef]), np.hstack([-icpt, icpt])
    Z = X @ coef.T + icpt
    if not multinomial:
        s = np.where(y == classes[1], 1.0, -1.0)
        loss = np.logaddexp(0, -s * Z[:, 0]).sum()
    else:
        idx = np.searchsorted(classes, y)
        lse = np.logaddexp.reduce(Z, axis=1)
        loss = (lse - Z[np.arange(len(y)), idx]).sum()
    return C * loss + 0.5 * (coef ** 2).sum()


def optimum(X, y, classes, multinomial):
    """The exact minimiser of the objective, to ~1e-10: scipy's L-BFGS-B with zero ftol and
    a tiny gtol on the objective divided by C*n, with its analytic gradient. sklearn's own
    fit stops at ftol = 64 eps, which leaves its coefficients ~1e-5 from the optimum."""
    from scipy.optimize import minimize
    n, d = X.shape
    r = len(classes) if multinomial else 1
    Xb = np.hstack([X, np.ones((n, 1))])
    idx = np.searchsorted(classes, y)

    def f(v):
        w = v.reshape(r, d + 1)
        Z = Xb @ w.T
        if r == 1:
            s = np.where(idx == 1, 1.0, -1.0)
            loss = np.logaddexp(0, -s * Z[:, 0]).sum()
            dz = (1 / (1 + np.exp(-Z[:, 0])) - (idx == 1))[:, None]
        else:
            lse = np.logaddexp.reduce(Z, axis=1)
            loss = (lse - Z[np.arange(n), idx]).sum()
            dz = np.exp(Z - lse[:, None])
            dz[np.arange(n), idx] -= 1
        g = dz.T @ Xb
        g[:, :d] += w[:, :d] / C
        val = loss + 0.5 * (w[:, :d] ** 2).sum() / C
        return val / n, g.ravel() / n

    res = minimize(f, np.zeros(r * (d + 1)), jac=True, method="L-BFGS-B",
                   options=dict(maxiter=100000, ftol=0, gtol=1e-13, maxcor=30))
    w = res.x.reshape(r, d + 1)
    if multinomial:
        w[:, d] -= w[:, d].mean()
        if len(classes) == 2:
            w = w[1:]
    return w[:, :d], w[:, d]


def check(d, ranks):
    bad = 0
    cases = (("multi", "X", "y", True, ranks), ("bin", "X", "yb", False, ranks),
             ("binsoft", "X", "yb", True, ranks), ("wide", "Xw", "yw", True, [1, 2]))
    for name, xfile, yfile, multi, runs in cases:
        X = np.load(f"{d}/{xfile}.npy")
        y = np.load(f"{d}/{yfile}.npy").ravel()
        kw = dict(multi_class="multinomial") if multi else {}
        sk = LogisticRegression(C=C, solver="lbfgs", tol=1e-10, max_iter=10000, **kw).fit(X, y)
        f_sk = objective(X, y, sk.classes_, sk.coef_, sk.intercept_, multi)
        w_opt, b_opt = optimum(X, y, sk.classes_, multi)
        err = max(abs(sk.coef_ - w_opt).max(), abs(sk.intercept_ - b_opt).max())
        if err > 1e-4:  # sanity: sklearn and this reference minimise the same objective
            print(f"{name}: sklearn is {err:.3g} from the reference optimum"); bad = 1
        first = None
        for n in runs:
            p = f"{d}/np{n}.{name}"
            s = json.load(open(f"{p}.json"))
            coef = np.load(f"{p}.coef.npy")
            icpt = np.load(f"{p}.intercept.npy")
            classes = np.load(f"{p}.classes.npy")
            if classes.shape != sk.classes_.shape or not (classes == sk.classes_).all():
                print(f"{p}: classes {classes} != {sk.classes_}"); bad = 1; continue
            err = max(abs(coef - w_opt).max(), abs(icpt - b_opt).max())
            if err > 1e-7:
                print(f"{p}: coefficients are {err:.3g} from the optimum"); bad = 1
            err = max(abs(coef - sk.coef_).max(), abs(icpt - sk.intercept_).max())
            if err > 1e-4:
                print(f"{p}: coefficients differ from sklearn by {err:.3g}"); bad = 1
            f_me = objective(X, y, classes, coef, icpt, multi)
            if f_me > f_sk + 1e-9 * abs(f_sk):
                print(f"{p}: objective {f_me!r} worse than sklearn's {f_sk!r}"); bad = 1
            if not s["converged"]:
                print(f"{p}: not converged"); bad = 1
            # Predictions: equal to sklearn's except within 1e-6 of a decision boundary.
            pred = np.load(f"{p}.pred.npy")
            if pred.shape != y.shape:
                print(f"{p}: predictions have shape {pred.shape}, not {y.shape}"); bad = 1; continue
            dec = sk.decision_function(X)
            margin = np.abs(dec) if dec.ndim == 1 else np.abs(np.diff(np.sort(dec, 1)[:, -2:], axis=1)).ravel()
            if ((pred != sk.predict(X)) & (margin > 1e-6)).any():
                print(f"{p}: predictions differ from sklearn"); bad = 1
            if abs(s["accuracy"] - sk.score(X, y)) > 1.5 / len(y):
                print(f"{p}: accuracy {s['accuracy']} vs sklearn {sk.score(X, y)}"); bad = 1
            ll = log_loss(y, sk.predict_proba(X))
            if abs(s["log_loss"] - ll) > 1e-6:
                print(f"{p}: log-loss {s['log_loss']} vs sklearn {ll}"); bad = 1
            # Probabilities: sklearn's formula applied to hpml's coefficients, exactly; and
            # close to sklearn's own model (whose coefficients are a little less converged).
            proba = np.load(f"{p}.proba.npy")
            mine = LogisticRegression(**kw)
            mine.classes_, mine.coef_, mine.intercept_ = classes, coef, icpt
            if abs(proba - mine.predict_proba(X)).max() > 1e-12:
                print(f"{p}: probabilities are not sklearn's formula"); bad = 1
            if abs(proba - sk.predict_proba(X)).max() > 3e-4:
                print(f"{p}: probabilities differ by {abs(proba - sk.predict_proba(X)).max():.3g}")
                bad = 1
            if first is None:
                first = coef
            elif abs(coef - first).max() > 1e-7:
                print(f"{p}: differs from the {runs[0]}-rank result by {abs(coef - first).max():.3g}")
                bad = 1
    X = np.load(f"{d}/X.npy")
    s = json.load(open(f"{d}/np{ranks[-1]}.csv.json"))
    sk = LogisticRegression(C=C, solver="lbfgs", tol=1e-10, max_iter=10000).fit(
        X, np.load(f"{d}/y.npy").ravel())
    if np.shape(s["coef"]) != sk.coef_.shape or abs(np.array(s["coef"]) - sk.coef_).max() > 1e-4:
        print("csv --target-col -1: coefficients differ"); bad = 1
    if not bad:
        print(f"logreg: multinomial, binary and binary-softmax models match sklearn at ranks {ranks}"
              f" (70 features, several row tiles: at 1 and 2)")
    return bad


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2])
    else:
        sys.exit(check(sys.argv[2], [int(n) for n in sys.argv[3:]]))
