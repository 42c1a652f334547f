"""DRFL under the paper's test-noise protocols on breast cancer (DRFL paper §6.1, Figure 3).

Reproduces, with the exact certified CVXPY oracles, the experiment of Bai, Wong, Qiao & Ho,
"Distributionally Robust Federated Learning: An ADMM Algorithm" (spec ``drfl-admm`` §8.1-§8.2):
linear SVMs (hinge loss, no ridge, no intercept -- the paper's models have none) trained five
ways, then evaluated on test sets with growing Gaussian attribute noise.

Data. The paper used UCI "Breast Cancer Wisconsin (Original)" (683 complete rows, 9 clinical
attributes, LIBSVM-scaled). That file is not bundled; this script uses scikit-learn's **Wisconsin
Diagnostic** set instead (569 rows, 30 features, ``y=+1`` benign), loaded unscaled through
``drflmodel.datasets.breast_cancer(n_clients=1, partition="iid", standardize=False,
add_intercept=False)``. Preparation, for data seed *s* (``rng = numpy.random.default_rng(s)``,
draws in this order):

1. scale every feature to [-1, 1] by min-max over **all 569 rows** (as LIBSVM's ``svm-scale``
   does for its "scaled" files): :math:`x' = 2(x-\\min)/(\\max-\\min)-1`;
2. a random 60% / 40% train/test split (``rng.permutation``; 341 train rows);
3. the training rows split uniformly at random into S = 3 clients (``rng.permutation`` then
   ``numpy.array_split``: 114/114/113 rows); the test rows are pooled (accuracy is reported on the
   whole test set);
4. Gaussian attribute noise N(0.5, 0.5²) added to every feature of **client 1's** training rows
   (spec §8.1, breast-cancer values); labels are never noised.

Models (spec §5, ``drflmodel.problems.wasserstein``), all with the hinge loss and the ℓ1 transport
cost on features (dual norm ℓ∞) with label cost κ, support **unbounded** (errata item 15: noisy
training points leave [-1,1]^n, so Prop. 6.3's box would not contain them):

* **DRFL** -- ``WassersteinDRFL(radius=ρ, kappa=κ, norm=1, weights=LpBall(q̂, θ, p=2))``;
* **AFL** -- ``wasserstein.afl`` (ρ = 0, the same ball Q; errata item 17);
* **DRFA** -- ``wasserstein.drfa`` (ρ = 0, Q = simplex);
* **WAFL** -- ``wasserstein.wafl`` (exact-dual WAFL, one ball of radius ρ around the pooled
  empirical distribution, same κ; errata item 16 -- not Nguyen et al.'s approximate algorithm);
* **ERM** -- ``wasserstein.erm`` (standard FL, weights 1/S).

Hyper-parameters, chosen **a priori** from the paper's grids (no cross-validation, and not tuned
on the test noise): ρ = 1e-2 (every client), κ = 0.5, θ = 0.1, p = 2, q̂_s = N_s/N (spec errata
item 18 defaults). The full run also prints DRFL at other ρ of the grid so the dependence on this
choice is visible.

Test noise (spec §8.1, Figure 3): Gaussian noise added to every feature of every test row, in
three protocols with Figure 3's fixed values -- (1) SD = 2, increasing mean; (2) mean = 0,
increasing SD; (3) mean = 2 × SD. The paper gives no x-axis values; the levels below are ours.
One noise draw per (data seed, protocol, level) from ``default_rng((s, protocol, level))``,
shared by the five models (common random numbers). Accuracy is mean ± sd over the data seeds
(each seed re-draws the split, client 1's training noise and the test noise).

Scale caveat: the noise is per feature, so with 30 features (the paper's set has 9) the same
levels move :math:`x^\top w` much more; at Figure 3's fixed values (SD = 2) every model is close to
chance here, and the comparison is most informative at the small levels.

The paper has **no numbers** for this experiment (Figures only, spec §8.2); its stated
conclusion is printed next to ours.

Run: ``python examples/drfl_noise.py`` (well under a minute) or ``--quick``.
``main(quick=False)`` returns the results as a dict.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import drflmodel as dm
from drflmodel.problems import wasserstein as W

MODELS = ("DRFL", "AFL", "DRFA", "WAFL", "ERM")
RHO, KAPPA, THETA, P_NORM = 1e-2, 0.5, 0.1, 2
TRAIN_NOISE = (0.5, 0.5)           # mean, SD on client 1's training features (breast cancer)
PAPER_CONCLUSION = ("DRFL 'achieves a higher accuracy compared with other approaches in most cases', "
                    "'performs well in the presence of noise, even at high levels' and 'outperforms "
                    "other models in high-noise environments in most cases' (no numbers: Figure 3 "
                    "is an image, spec §8.2)")
#: protocol -> (description, list of (mean, sd) levels, x-axis label, x values)
_SD_FIXED, _MEAN_FIXED, _RATIO = 2.0, 0.0, 2.0
_AXIS = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
_AXIS3 = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
PROTOCOLS = {
    "1": (f"fixed SD = {_SD_FIXED:g}, increasing mean", [(m, _SD_FIXED) for m in _AXIS], "mean", _AXIS),
    "2": (f"fixed mean = {_MEAN_FIXED:g}, increasing SD", [(_MEAN_FIXED, s) for s in _AXIS], "SD", _AXIS),
    "3": (f"mean = {_RATIO:g} x SD", [(_RATIO * s, s) for s in _AXIS3], "SD", _AXIS3),
}
FULL = {"seeds": tuple(range(10)), "rho_sweep": (1e-4, 1e-3, 1e-2, 5e-2, 5e-1)}
QUICK = {"seeds": (0, 1, 2), "rho_sweep": ()}


def load_scaled():
    """``(X, y)``: all 569 rows, features min-max scaled to [-1, 1] over all rows, y in {-1,+1}."""
    fed = dm.datasets.breast_cancer(n_clients=1, partition="iid", standardize=False,
                                    add_intercept=False)
    X, y = fed.clients[0].X, fed.clients[0].y
    lo, hi = X.min(axis=0), X.max(axis=0)
    return 2.0 * (X - lo) / (hi - lo) - 1.0, y


def make_data(seed: int, n_clients: int = 3, train_fraction: float = 0.6):
    """``(train federation, X_test, y_test)`` for data seed ``seed`` (module docstring)."""
    X, y = load_scaled()
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(y))
    n_train = int(round(train_fraction * len(y)))
    tr, te = perm[:n_train], perm[n_train:]
    parts = np.array_split(rng.permutation(tr), n_clients)
    Xs, ys = [], []
    for k, rows in enumerate(parts):
        Xk = X[rows].copy()
        if k == 0:
            Xk = Xk + rng.normal(TRAIN_NOISE[0], TRAIN_NOISE[1], size=Xk.shape)
        Xs.append(Xk)
        ys.append(y[rows])
    train = dm.Federation.from_arrays(Xs, ys, names=[f"client{k + 1}" for k in range(n_clients)],
                                      task="classification")
    return train, X[te], y[te]


def build_problems(train, rho: float = RHO, kappa: float = KAPPA, theta: float = THETA,
                   p: float = P_NORM) -> dict:
    """The five oracles of the module docstring on ``train``."""
    loss = dm.losses.Hinge()
    q_hat = np.asarray(train.proportions, float)
    ball = dm.sets.LpBall(q_hat, theta, p)
    return {
        "DRFL": dm.WassersteinDRFL(train, loss, radius=rho, kappa=kappa, norm=1, weights=ball),
        "AFL": W.afl(train, loss, dm.sets.LpBall(q_hat, theta, p)),
        "DRFA": W.drfa(train, loss),
        "WAFL": W.wafl(train, loss, radius=rho, kappa=kappa, norm=1),
        "ERM": W.erm(train, loss),
    }


def accuracy(theta, X, y) -> float:
    """Accuracy (%) of ``sign(x^T theta)`` (ties -> +1)."""
    return 100.0 * float(np.mean(dm.metrics.predict_sign(X @ theta) == y))


def noisy_accuracies(thetas: dict, X_te, y_te, seed: int) -> dict:
    """``{protocol: {model: array of accuracies per level}}`` with one shared noise draw per level."""
    out = {}
    for key, (_, levels, _, _) in PROTOCOLS.items():
        acc = {m: np.empty(len(levels)) for m in thetas}
        for j, (mean, sd) in enumerate(levels):
            rng = np.random.default_rng((seed, int(key), j))
            Xn = X_te + rng.normal(mean, sd, size=X_te.shape)
            for m, th in thetas.items():
                acc[m][j] = accuracy(th, Xn, y_te)
        out[key] = acc
    return out


def run_seed(seed: int) -> dict:
    train, X_te, y_te = make_data(seed)
    models = {}
    for name, prob in build_problems(train).items():
        t0 = time.perf_counter()
        sol = prob.solve()
        models[name] = {"status": sol.status, "relative_gap": sol.relative_gap, "value": sol.value,
                        "lower_bound": sol.lower_bound, "theta": np.asarray(sol.theta, float),
                        "seconds": time.perf_counter() - t0}
    thetas = {m: r["theta"] for m, r in models.items()}
    return {"seed": seed, "sizes": train.sizes.tolist(), "models": models,
            "accuracy": noisy_accuracies(thetas, X_te, y_te, seed)}


def rho_sweep(seeds, rhos) -> dict:
    """DRFL's accuracy per protocol/level at other radii (same seeds and noise draws)."""
    acc = {r: {k: [] for k in PROTOCOLS} for r in rhos}
    status = {r: [] for r in rhos}
    norm = {r: [] for r in rhos}
    for s in seeds:
        train, X_te, y_te = make_data(s)
        prob = build_problems(train)["DRFL"]
        for r in rhos:
            prob.set_parameter("radius", r)
            sol = prob.solve()
            status[r].append(sol.status)
            norm[r].append(float(np.abs(sol.theta).max()))
            a = noisy_accuracies({"DRFL": sol.theta}, X_te, y_te, s)
            for k in PROTOCOLS:
                acc[r][k].append(a[k]["DRFL"])
    return {r: {"status": status[r], "theta_inf": norm[r], **{k: np.array(acc[r][k]) for k in PROTOCOLS}}
            for r in rhos}


def main(quick: bool = False) -> dict:
    cfg = QUICK if quick else FULL
    t_start = time.perf_counter()
    print("DRFL vs AFL, DRFA, WAFL, ERM under test noise (breast cancer, hinge loss, l1 transport, "
          "unbounded support)")
    print(f"rho = {RHO:g}, kappa = {KAPPA:g}, theta = {THETA:g}, p = {P_NORM}; client 1 trained on "
          f"N({TRAIN_NOISE[0]}, {TRAIN_NOISE[1]}^2)-noised features; data seeds {list(cfg['seeds'])}")
    print("data: scikit-learn's Wisconsin *Diagnostic* set (569 x 30), not the paper's UCI "
          "'Original' (683 x 9)\n")
    runs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)       # CVXPY "may be inaccurate" retries
        for s in cfg["seeds"]:
            runs.append(run_seed(s))
    statuses = {m: sorted({r["models"][m]["status"] for r in runs}) for m in MODELS}
    worst_gap = {m: max(r["models"][m]["relative_gap"] for r in runs) for m in MODELS}
    print("oracles: " + ", ".join(f"{m} {'/'.join(statuses[m])} (max rel. gap {worst_gap[m]:.1e})"
                                  for m in MODELS))
    summary = {}
    for key, (desc, levels, xlab, xs) in PROTOCOLS.items():
        stack = {m: np.array([r["accuracy"][key][m] for r in runs]) for m in MODELS}
        summary[key] = {m: (stack[m].mean(axis=0), stack[m].std(axis=0)) for m in MODELS}
        print(f"\nprotocol {key}: {desc} -- test accuracy %, mean ± sd over {len(runs)} seeds")
        print(f"{xlab:>6}" + "".join(f"{m:>13}" for m in MODELS) + "   best")
        for j, x in enumerate(xs):
            means = [summary[key][m][0][j] for m in MODELS]
            cells = "".join(f"{summary[key][m][0][j]:7.1f}±{summary[key][m][1][j]:4.1f}" .rjust(13)
                            for m in MODELS)
            best = MODELS[int(np.argmax(means))]
            print(f"{x:>6g}{cells}   {best}")
    # how often DRFL is (one of) the best, per protocol, on the mean curves
    wins = {}
    for key, (_, levels, _, _) in PROTOCOLS.items():
        M = np.array([summary[key][m][0] for m in MODELS])
        wins[key] = int(np.sum(M[0] >= M.max(axis=0) - 1e-9))
    print(f"\npaper's conclusion: {PAPER_CONCLUSION}")
    print("ours: DRFL has the highest mean accuracy at "
          + ", ".join(f"{wins[k]}/{len(PROTOCOLS[k][1])} levels of protocol {k}" for k in PROTOCOLS))
    sweep = {}
    if cfg["rho_sweep"]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            sweep = rho_sweep(cfg["seeds"], cfg["rho_sweep"])
        print("\nsensitivity: DRFL mean accuracy % at other radii rho (same seeds and noise); "
              "columns = the levels of each protocol")
        for key, (_, _, xlab, xs) in PROTOCOLS.items():
            print(f"protocol {key} ({xlab} = {', '.join(f'{x:g}' for x in xs)})")
            for r in cfg["rho_sweep"]:
                st = "/".join(sorted(set(sweep[r]["status"])))
                print(f"  rho={r:<7g}" + "".join(f"{v:7.1f}" for v in sweep[r][key].mean(axis=0))
                      + f"   [{st}; max |w|_inf {max(sweep[r]['theta_inf']):.1e}]")
        if any(st != "optimal" for r in cfg["rho_sweep"] for st in sweep[r]["status"]):
            print("note: the non-optimal statuses occur where the DRFL solution is w = 0 (all "
                  "clients' worst-case losses tie at 1); there the numpy upper bound of the "
                  "certificate, LpBall(p=2).worst_case, is inaccurate at (near-)ties -- a toolkit "
                  "issue reported, not a property of the model")
    seconds = time.perf_counter() - t_start
    print(f"\ntotal time {seconds:.1f} s")
    return {"config": {**cfg, "rho": RHO, "kappa": KAPPA, "theta": THETA, "p": P_NORM,
                       "train_noise": TRAIN_NOISE,
                       "protocols": {k: {"description": v[0], "levels": v[1]} for k, v in PROTOCOLS.items()}},
            "runs": runs, "summary": summary, "drfl_best_levels": wins, "rho_sweep": sweep,
            "paper": PAPER_CONCLUSION, "seconds": seconds}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 data seeds, no rho sweep")
    main(quick=parser.parse_args().quick)
