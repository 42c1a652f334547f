"""Fairlearn's reductions vs ``drflmodel.sklearn.DEOClassifier`` on Adult.

Same data and split as ``examples/fair_vfl_adult.py``: the shipped LIBSVM a8a copy of UCI Adult,
a stratified 6,000-row training subsample (group x label, seed 0) and the whole test set (9,865
rows); ``--quick`` uses 2,000 + 2,000 rows. Groups: a = female, b = male (not among the features);
favourable label: income > 50K.

Models (all linear in the same 121 one-hot features):

* ``LogisticRegression()`` (scikit-learn, unconstrained);
* Fairlearn 0.15 ``ExponentiatedGradient(LogisticRegression(), EqualizedOdds())`` -- the issue's
  baseline -- and, with ``TruePositiveRateParity()``, the Fairlearn constraint closest to DEO
  (equal opportunity). Its predictions are *randomized* (a mixture of logistic models);
  ``predict(X, random_state=0)`` is used. ``best_gap_`` is the duality gap of the
  reduction's Lagrangian game; it assumes an exact best-response oracle for cost-weighted 0-1 loss,
  which a logistic regression is not, so it certifies nothing about the returned model;
* ``DEOClassifier`` (drflmodel): logistic loss, ridge :math:`\\ell_2=2/n` as in the paper, the
  linear DEO surrogate bounded by :math:`\\varepsilon` on the training set; exact convex program,
  returned with certified lower and upper bounds. ``eps=1e6`` is the unconstrained model.

Columns: test accuracy, DFP / DFN (absolute gaps of false-positive / false-negative rates between
the groups), fit time, and the certificate each answer carries.

Run:  python examples/fairlearn_adult.py [--quick]   (needs the ``peers`` extra for Fairlearn)
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import drflmodel as dm

QUICK_TRAIN, QUICK_TEST = 2000, 2000
LAPTOP_TRAIN = 6000      # the default of examples/fair_vfl_adult.py
DEO_EPS = (0.01, 0.05)


def _arrays(vfed):
    """Features without the intercept column (every model fits its own), labels in {0, 1},
    group names."""
    names = [n for block in vfed.feature_names for n in block]
    keep = np.array([n != "intercept" for n in names])
    group = np.where(vfed.in_a, "female", "male")
    return vfed.X[:, keep], (vfed.y > 0).astype(int), group


def _scores(y_true01, pred01, group):
    y, p = 2.0 * y_true01 - 1.0, 2.0 * np.asarray(pred01) - 1.0
    a, b = group == "female", group == "male"
    return {"accuracy": float(np.mean(y == p)), "dfp": dm.metrics.dfp(y, p, a, b),
            "dfn": dm.metrics.dfn(y, p, a, b)}


def main(quick: bool = False, seed: int = 0, verbose: bool = True) -> dict:
    from fairlearn.reductions import EqualizedOdds, ExponentiatedGradient, TruePositiveRateParity
    from sklearn.linear_model import LogisticRegression

    from drflmodel.sklearn import DEOClassifier

    train = dm.datasets.adult(n_parties=6, active=(0,), split="train",
                              n_samples=QUICK_TRAIN if quick else LAPTOP_TRAIN, seed=seed)
    test = dm.datasets.adult(n_parties=6, active=(0,), split="test",
                             n_samples=QUICK_TEST if quick else None, seed=seed)
    X, y, g = _arrays(train)
    Xt, yt, gt = _arrays(test)
    l2 = 2.0 / len(y)
    models = [("LogisticRegression()", lambda: LogisticRegression(), {}),
              ("EG(LR, EqualizedOdds)", lambda: ExponentiatedGradient(LogisticRegression(), EqualizedOdds()),
               {"sensitive_features": g}),
              ("EG(LR, TPRParity)", lambda: ExponentiatedGradient(LogisticRegression(), TruePositiveRateParity()),
               {"sensitive_features": g}),
              ("DEOClassifier(eps=1e6)", lambda: DEOClassifier(eps=1e6, l2=l2), {"sensitive_features": g})]
    models += [(f"DEOClassifier(eps={e:g})", (lambda e=e: DEOClassifier(eps=e, l2=l2)), {"sensitive_features": g})
               for e in DEO_EPS]
    head = f"{'model':<26}{'test acc':>9}{'DFP':>7}{'DFN':>7}{'fit s':>8}  certificate"
    if verbose:
        print(f"Adult (a8a): train {len(y)} rows, test {len(yt)} rows, {X.shape[1]} features; "
              f"groups female/male; l2 = 2/n = {l2:.3g} for DEOClassifier\n")
        print(head)
        print("-" * (len(head) + 30))
    rows = []
    for name, make, fit_kw in models:
        model = make()
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(X, y, **fit_kw)
        seconds = time.perf_counter() - t0
        pred = model.predict(Xt, random_state=0) if hasattr(model, "best_gap_") else model.predict(Xt)
        r = {"model": name, **_scores(yt, pred, gt), "seconds": seconds,
             "warnings": sorted({type(w.message).__name__ for w in caught})}
        if isinstance(model, DEOClassifier):
            r.update(certificate=f"{model.status_}, rel. gap {model.relative_gap_:.1e}", certified=True,
                     lower_bound=model.lower_bound_, upper_bound=model.upper_bound_,
                     train_deo_surrogate=model.solution_.info["metrics"]["deo_surrogate"])
        elif hasattr(model, "best_gap_"):
            r.update(certificate=f"none (best_gap_ {model.best_gap_:.1e}; randomized)", certified=False)
        else:
            r.update(certificate="none (lbfgs stopping rule)", certified=False)
        rows.append(r)
        if verbose:
            note = f"  [{', '.join(r['warnings'])}]" if r["warnings"] else ""
            print(f"{name:<26}{100 * r['accuracy']:>8.2f}%{r['dfp']:>7.3f}{r['dfn']:>7.3f}{seconds:>8.2f}  "
                  f"{r['certificate']}{note}", flush=True)
    return {"n_train": len(y), "n_test": len(yt), "l2": l2, "rows": rows}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2,000 training and 2,000 test rows")
    main(quick=ap.parse_args().quick)
