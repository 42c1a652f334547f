"""One benchmark a reader can trust (issue 23 item 5): per family x loss x route, the certified
solve against the **plain model** -- the same problem written by hand in CVXPY, no parameters, no
certificate, Clarabel with CVXPY's defaults then ECOS, as a user would -- in one process tree.

For every case and size it prints the certified time (``Problem.solve()``, end to end, the route
``method="auto"`` picks unless the case names one), the route, the status and relative gap, the
time in **data passes** (the certified time divided by the time of one fused numpy pass that
computes every client's loss, gradient and -- for smooth losses -- Hessian at one point,
``ClientObjectives.evaluate``), the plain model's time (build + compile + solve, in a subprocess
stopped at ``--plain-limit`` seconds: then reported as "> limit" and the ratio as an upper bound)
and the ratio certified / plain.

Sizes: rows N in {1k, 10k, 100k, 1M} and features d in {10, 50, 200} where the case defines them
(the plain model is run up to ``--plain-max`` rows x features). ``--quick`` (for CI-like checks):
N in {1k, 10k}, d = 10, a short plain limit. ``--markdown FILE`` also writes the table to FILE;
``--update-docs`` replaces the table of the documentation's Performance page (``docs/performance.md``)
between the markers
``<!-- bench_certified:start -->`` and ``<!-- bench_certified:end -->``.

**Scale rows** (``--scale``; issue 30): the certified solve against what a user runs instead, on
synthetic linear-head features (``dm.datasets.gaussian_mixture``: class means of norm 2, unit noise,
20 Dirichlet clients, alpha = 0.5) and scikit-learn's digits (20 Dirichlet clients, alpha = 0.1), all
with ``l2 = 1e-3`` and the intercept unpenalized, at P = 51 (10k x 50 and 100k x 50, binary), 650
(digits), 2,010 (20k x 200 x 10), 5,130 (50k x 512 x 10) and 51,300 (50k x 512 x 100):

* ``erm``: one client holding the pooled rows (``Simplex(1)``) against scikit-learn's
  ``LogisticRegression`` (lbfgs, newton-cg, newton-cholesky; ``tol=1e-8``; ``C = 1/(l2 N)``, the
  same objective); the ratio is against the fastest of them;
* ``chi2``: ``FederatedDRO`` with ``ChiSquare(20, 0.1)`` against SciPy's L-BFGS-B on the smooth dual
  in (theta, eta) (``benchmarks/_scale_baselines.py``: plain numpy losses, the tolerances of
  scikit-learn's lbfgs);
* ``cvar``: ``CVaR(20, 0.2)`` against L-BFGS-B on the softplus-smoothed dual (mu = 1e-4);
* ``fafl``: ``FairnessAwareFL(alpha=0.5)`` (levels below a client's share raised to it) against the
  same L-BFGS-B with the caps p_i / alpha_i.

``1Mx20`` (1,000,000 rows, 19 features and the intercept, 20 clients) is the large-N shape.

The certified time includes building the problem (``FederatedDRO(...)``) and ``solve()``. Each row
runs ``--repeats`` times, the certified solve and its baselines interleaved in this one process
(one BLAS thread: set ``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1``); medians are reported. The
baseline's own objective (evaluated exactly by drflmodel) is placed relative to the certified
interval [L, U]: a negative "below L" would falsify the certificate (it is reported, never hidden).
``--peak-memory`` adds one untimed run per row under ``tracemalloc`` (numpy's allocations from the
problem's construction to the answer, i.e. beyond the data). ``--scale-rows erm,chi2`` and
``--scale-shapes 10kx50,digits`` select rows; ``--gap-tol`` sets the certified gap (default 1e-6,
"optimal"; scikit-learn's ``tol=1e-8`` is a gradient tolerance, which usually lands closer to the
optimum: the last column says by how much); ``--markdown FILE`` writes the table.

**Every size** (issue 41): the shapes ``240x15`` (4 clients; CVaR at level 1/4) and ``2kx20`` join
the scale shapes, so ``--scale`` runs ``prob.solve()`` as a user calls it (``method="auto"``,
construction included) from a 240-row table up; ``--default-tol-baseline`` also times
``LogisticRegression``'s lbfgs at its default ``tol=1e-4`` (what ``LogisticRegression().fit`` runs;
reported, not in the ratio). ``--calibrate`` prints each route's measured seconds next to its
:meth:`Route.cost` estimate and the route ``auto`` ranks first (the data of
``drflmodel/problems/engine/cost.py``).

Set ``OPENBLAS_NUM_THREADS=1`` on a shared machine. Not collected by pytest.
Run: ``python benchmarks/bench_certified.py [--quick] [--cases dro/logistic/chi2,...]`` or
``python benchmarks/bench_certified.py --scale [--scale-shapes ...] [--scale-rows ...]`` or
``python benchmarks/bench_certified.py --calibrate [--scale-shapes ...]``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import pathlib
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import drflmodel as dm
from _plain import solve_as_a_user
from _scale_baselines import chi2_dual_lbfgs, cvar_smoothed_lbfgs, fafl_smoothed_lbfgs, sklearn_erm
from drflmodel._lazy import LazyModule
from drflmodel.objectives import ClientObjectives

cp = LazyModule("cvxpy")     # imported at the first CVXPY model: the scale and grid rows run none

warnings.filterwarnings("ignore", message="Solution may be inaccurate")
L2, RHO, ALPHA, N_CLIENTS, DEO_EPS = 1e-3, 0.1, 0.2, 20, 0.02
PERFORMANCE_PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "performance.md"
MARKERS = ("<!-- bench_certified:start -->", "<!-- bench_certified:end -->")
SCALE_MARKERS = ("<!-- bench_scale:start -->", "<!-- bench_scale:end -->")


# ------------------------------------------------------------------------------------ data
def vertical(N: int, d: int, seed: int = 0):
    return dm.datasets.synthetic_vertical(n_samples=N, dim=d, n_parties=3, group_shift=1.5, seed=seed)


def classification(N: int, d: int, seed: int = 0):
    return dm.datasets.synthetic_classification(n_clients=N_CLIENTS, dim=d, samples=N // N_CLIENTS, seed=seed)


def regression(N: int, d: int, seed: int = 0):
    return dm.datasets.synthetic_regression(n_clients=N_CLIENTS, dim=d, samples=N // N_CLIENTS, noise=0.1,
                                            seed=seed)


def multiclass(N: int, d: int, seed: int = 0):
    return dm.datasets.synthetic_multiclass(n_clients=N_CLIENTS, dim=d - 1, n_classes=10,
                                            samples=N // N_CLIENTS, noise=2.0, seed=seed)


# ------------------------------------------------------------------------------------ plain models
#: the losses of the cases (pinball at tau = 0.3, epsilon-insensitive at eps = 0.1)
LOSSES = {"logistic": dm.losses.Logistic, "squared": dm.losses.Squared, "hinge": dm.losses.Hinge,
          "multinomial": dm.losses.Multinomial, "pinball": lambda: dm.losses.Pinball(0.3),
          "epsilon_insensitive": lambda: dm.losses.EpsilonInsensitive(0.1)}


def _loss_expr(name: str, X, y, W):
    if name == "logistic":
        return cp.sum(cp.logistic(-cp.multiply(y, X @ W)))
    if name == "squared":
        return cp.sum_squares(X @ W - y)
    if name == "hinge":
        return cp.sum(cp.pos(1 - cp.multiply(y, X @ W)))
    if name == "pinball":
        r = X @ W - y
        return cp.sum(cp.maximum(-0.3 * r, 0.7 * r))
    if name == "epsilon_insensitive":
        return cp.sum(cp.pos(cp.abs(X @ W - y) - 0.1))
    if name == "multinomial":
        K = W.shape[1]
        S = X @ W
        return cp.sum(cp.log_sum_exp(S, axis=1) - cp.sum(cp.multiply(np.eye(K)[y.astype(int)], S), axis=1))
    raise ValueError(name)


def plain_minmax(fed, loss: str, weights: str) -> cp.Problem:
    """chi-square through its one-scalar dual nu + rho/2 + sum_i (f_i - nu)_+^2 / (2 n rho); CVaR and
    FAFL's HCVaR through eta + sum_i c_i (f_i - eta)_+ (c_i = 1/(alpha n), resp. p_i/alpha)."""
    W = cp.Variable((fed.dim, fed.n_classes)) if loss == "multinomial" else cp.Variable(fed.dim)
    s = cp.Variable()
    f = cp.hstack([_loss_expr(loss, c.X, c.y, W) / c.size + 0.5 * L2 * cp.sum_squares(W) for c in fed.clients])
    n = fed.n_clients
    if weights == "chi2":
        objective = s + RHO / 2 + cp.sum_squares(cp.pos(f - s)) / (2 * n * RHO)
    elif weights == "cvar":
        objective = s + cp.sum(cp.pos(f - s)) / (ALPHA * n)
    else:                                                    # FAFL, alpha = 0.5 for every client
        objective = s + (fed.proportions / 0.5) @ cp.pos(f - s)
    return cp.Problem(cp.Minimize(objective))


def plain_vertex_socp(fed, phi: float = 0.1) -> cp.Problem:
    """Relative fairness with A = B = the simplex: min t s.t. t >= lambda_v^T f(theta) at every vertex
    point lambda_v = (e_i - phi e_j) / (1 - phi) (the vertex SOCP), each a quad_form of the aggregated
    matrix (PSD here; psd_wrap skips CVXPY's own eigenvalue check)."""
    n, d = fed.n_clients, fed.dim
    Q = np.array([c.X.T @ c.X / c.size + 0.5 * L2 * np.eye(d) for c in fed.clients])
    r = np.array([c.X.T @ c.y / c.size for c in fed.clients])
    c0 = np.array([c.y @ c.y / c.size for c in fed.clients])
    theta, t = cp.Variable(d), cp.Variable()
    cons = []
    for i in range(n):
        for j in range(n):
            lam = -phi * np.eye(n)[j]
            lam[i] += 1.0
            lam /= 1.0 - phi
            P = np.einsum("i,ijk->jk", lam, Q)
            cons.append(cp.quad_form(theta, cp.psd_wrap(0.5 * (P + P.T))) - 2 * (lam @ r) @ theta + lam @ c0 <= t)
    return cp.Problem(cp.Minimize(t), cons)


def plain_deo(vf, eps: float = DEO_EPS) -> cp.Problem:
    """DEO with the linear fairness loss: the mean logistic loss plus the ridge, |D(theta)| <= eps with
    D = -(u_a - u_b)^T theta / 2 (u_s the mean row of group s's favourable-label rows)."""
    theta = cp.Variable(vf.dim)
    X, y = vf.X, vf.y
    u = X[vf.N_a].mean(axis=0) - X[vf.N_b].mean(axis=0)
    objective = cp.sum(cp.logistic(-cp.multiply(y, X @ theta))) / X.shape[0] + 0.5 * L2 * cp.sum_squares(theta)
    return cp.Problem(cp.Minimize(objective), [cp.abs(0.5 * (u @ theta)) <= eps])


def _deo(fairness_loss: str):
    return lambda vf: dm.DEOConstrained(vf, dm.losses.Logistic(), eps=DEO_EPS, fairness_loss=fairness_loss, l2=L2)


def _relative(fed):
    n = fed.n_clients
    return dm.RelativeFairness(fed, dm.losses.Squared(), A=dm.sets.Simplex(n), B=dm.sets.Simplex(n), phi=0.1, l2=L2)


# ------------------------------------------------------------------------------------ cases
@dataclass
class Case:
    """A benchmark case: how to build the data, the certified problem and the plain model."""

    data: Callable
    problem: Callable               # fed -> drflmodel problem
    plain: Callable | None          # fed -> cp.Problem (None: no convex model to write by hand)
    loss: str
    sizes: list = field(default_factory=lambda: [(1_000, 10), (10_000, 10), (100_000, 10), (1_000_000, 10),
                                                 (10_000, 50), (10_000, 200), (100_000, 50)])
    method: str = "auto"


def _dro(loss_name, set_name):
    loss = LOSSES[loss_name]()

    def build(fed):
        W = dm.sets.ChiSquare(fed.n_clients, RHO) if set_name == "chi2" else dm.sets.CVaR(fed.n_clients, ALPHA)
        return dm.FederatedDRO(fed, loss, W, l2=L2)
    return build


#: the non-smooth cases: rows x features (the active-set route's target is 100k x 10)
NONSMOOTH_SIZES = [(1_000, 10), (10_000, 10), (100_000, 10), (1_000_000, 10), (10_000, 50)]

CASES = {
    "dro/logistic/chi2": Case(classification, _dro("logistic", "chi2"),
                              lambda f: plain_minmax(f, "logistic", "chi2"), "logistic"),
    "dro/logistic/cvar": Case(classification, _dro("logistic", "cvar"),
                              lambda f: plain_minmax(f, "logistic", "cvar"), "logistic"),
    "dro/squared/chi2": Case(regression, _dro("squared", "chi2"), lambda f: plain_minmax(f, "squared", "chi2"),
                             "squared"),
    "dro/squared/cvar": Case(regression, _dro("squared", "cvar"), lambda f: plain_minmax(f, "squared", "cvar"),
                             "squared"),
    "dro/hinge/cvar": Case(classification, _dro("hinge", "cvar"), lambda f: plain_minmax(f, "hinge", "cvar"),
                           "hinge", sizes=NONSMOOTH_SIZES),
    "dro/hinge/chi2": Case(classification, _dro("hinge", "chi2"), lambda f: plain_minmax(f, "hinge", "chi2"),
                           "hinge", sizes=NONSMOOTH_SIZES),
    "dro/pinball/cvar": Case(regression, _dro("pinball", "cvar"), lambda f: plain_minmax(f, "pinball", "cvar"),
                             "pinball", sizes=NONSMOOTH_SIZES),
    "dro/epsilon_insensitive/chi2": Case(regression, _dro("epsilon_insensitive", "chi2"),
                                         lambda f: plain_minmax(f, "epsilon_insensitive", "chi2"),
                                         "epsilon_insensitive", sizes=NONSMOOTH_SIZES),
    "fafl/hinge": Case(classification, lambda fed: dm.FairnessAwareFL(fed, dm.losses.Hinge(), alpha=0.5, l2=L2),
                       lambda f: plain_minmax(f, "hinge", "fafl"), "hinge", sizes=NONSMOOTH_SIZES),
    "fafl/logistic": Case(classification,
                          lambda fed: dm.FairnessAwareFL(fed, dm.losses.Logistic(), alpha=0.5, l2=L2),
                          lambda f: plain_minmax(f, "logistic", "fafl"), "logistic"),
    "relative/squared/R1": Case(regression, _relative, plain_vertex_socp, "squared",
                                sizes=[(1_000, 10), (10_000, 10), (100_000, 10), (10_000, 50)]),
    "deo/logistic/linear": Case(vertical, _deo("linear"), plain_deo, "logistic",
                                sizes=[(1_000, 10), (10_000, 10), (100_000, 10), (1_000_000, 10), (10_000, 50)]),
    # a difference-of-convex constraint: no hand-written convex model exists; time and gap only
    "deo/logistic/same": Case(vertical, _deo("same"), None, "logistic", sizes=[(1_000, 10), (10_000, 10)]),
    "dro/multinomial/chi2": Case(multiclass, _dro("multinomial", "chi2"),
                                 lambda f: plain_minmax(f, "multinomial", "chi2"), "multinomial",
                                 sizes=[(1_000, 10), (10_000, 10), (100_000, 50)]),
}


# ------------------------------------------------------------------------------------ measuring
def pass_seconds(fed, loss_name: str, repeats: int = 3) -> float:
    """One fused pass: every client's value and gradient (and Hessian for smooth losses); on a
    vertical federation, the loss, gradient and Hessian of the pooled rows."""
    loss = LOSSES[loss_name]()
    smooth = np.isfinite(loss.smoothness)
    if isinstance(fed, dm.VerticalFederation):
        X, y = fed.X, fed.y
        theta = np.zeros(X.shape[1])

        def one_pass():
            z = X @ theta
            loss.value(z, y), X.T @ loss.derivative(z, y)
            if smooth:
                (X * loss.second_derivative(z, y)[:, None]).T @ X
    else:
        obj = ClientObjectives(fed, loss, l2=L2)
        theta, lam = np.zeros(obj.dim), np.full(obj.n, 1.0 / obj.n)

        def one_pass():
            obj.evaluate(theta, lam, hessian=smooth)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        one_pass()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def _plain_worker(case_name, N, d, queue):
    case = CASES[case_name]
    t0 = time.perf_counter()
    prob = case.plain(case.data(N, d))
    value, used = solve_as_a_user(prob)
    queue.put((value, time.perf_counter() - t0, used))


def plain_timed(case_name: str, N: int, d: int, limit: float):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_plain_worker, args=(case_name, N, d, queue))
    proc.start()
    proc.join(limit)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        return float("nan"), limit, "not finished"
    return queue.get()


def run_case(name: str, N: int, d: int, plain_limit: float, plain_max: int) -> dict:
    case = CASES[name]
    fed = case.data(N, d)
    t_pass = pass_seconds(fed, case.loss)
    prob = case.problem(fed)
    t0 = time.perf_counter()
    sol = prob.solve(method=case.method)
    t_cert = time.perf_counter() - t0
    row = {"case": name, "N": N, "d": d, "P": prob.dim, "route": " then ".join([a["method"] for a in sol.info.get("route_attempts", [])]
                                             + [sol.info.get("method")]), "certified": t_cert,
           "passes": t_cert / t_pass, "status": sol.status, "gap": sol.relative_gap, "U": sol.upper_bound}
    if case.plain is None:
        row["plain_note"] = "none (not convex)"
    elif N * prob.dim <= plain_max:
        v, t_plain, used = plain_timed(name, N, d, plain_limit)
        row.update(plain=t_plain, plain_used=used, ratio=t_cert / t_plain, bound=used == "not finished",
                   plain_minus_U=v - sol.upper_bound)
    return row


def markdown(rows) -> str:
    out = ["| case | N | d (P) | route | certified (s) | passes | status | gap | plain model (s) | certified / plain |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "plain" in r:
            plain = f"{'> ' if r['bound'] else ''}{r['plain']:.1f}"
            ratio = f"{'< ' if r['bound'] else ''}{r['ratio']:.3f}"
        else:
            plain, ratio = r.get("plain_note", "not run"), ""
        dp = f"{r['d']}" + (f" ({r['P']})" if r["P"] != r["d"] else "")
        out.append(f"| {r['case']} | {r['N']:,} | {dp} | {r['route']} | {r['certified']:.2f} | {r['passes']:.1f} | "
                   f"{r['status']} | {max(r['gap'], 0.0):.0e} | {plain} | {ratio} |")
    return "\n".join(out)


def update_docs(table: str, command: str, markers=MARKERS) -> None:
    text = PERFORMANCE_PAGE.read_text()
    start, end = text.index(markers[0]), text.index(markers[1])
    body = f"{markers[0]}\n`{command}`:\n\n{table}\n"
    PERFORMANCE_PAGE.write_text(text[:start] + body + text[end:])


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """``"1000000x20,10000x200"`` -> ``[(1000000, 20), (10000, 200)]``."""
    try:
        return [(int(n), int(d)) for n, d in (item.split("x") for item in text.split(","))]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sizes takes rows x features pairs such as 1000000x20,10000x200; got {text!r}")


# ------------------------------------------------------------------------------------ scale rows (issue 30)
#: name -> (rows, features, classes); "digits" is scikit-learn's digits (1,797 x 64 pixels, 10 classes)
SCALE_SHAPES = {"240x15": (240, 14, 2), "2kx20": (2_000, 19, 2), "10kx50": (10_000, 50, 2), "100kx50": (100_000, 50, 2), "digits": (1_797, 64, 10),
                "20kx200x10": (20_000, 200, 10), "50kx512x10": (50_000, 512, 10),
                "50kx512x100": (50_000, 512, 100), "1Mx20": (1_000_000, 19, 2)}
SCALE_ROWS = ("erm", "chi2", "cvar", "fafl")
#: the FAFL row's level (levels below a client's share p_i are raised to p_i: ``alpha_below_p="clip"``)
FAFL_ALPHA = 0.5
SKLEARN_SOLVERS = ("lbfgs", "newton-cg", "newton-cholesky")


#: shapes with fewer clients than N_CLIENTS (240 rows: 4 clients of at least 10 rows each)
SCALE_CLIENTS = {"240x15": 4}


def scale_federation(shape: str):
    """The federation of a scale shape (seeded; 20 clients unless :data:`SCALE_CLIENTS` says)."""
    if shape == "digits":
        return dm.datasets.digits(n_clients=N_CLIENTS, alpha=0.1, seed=0)
    N, d, K = SCALE_SHAPES[shape]
    return dm.datasets.gaussian_mixture(N, d, K, n_clients=SCALE_CLIENTS.get(shape, N_CLIENTS), alpha=0.5, seed=0)


def cvar_alpha(fed) -> float:
    """The CVaR level of the scale rows: ALPHA, raised to 1/n where n clients need it."""
    return max(ALPHA, 1.0 / fed.n_clients)


def _pooled(fed):
    """One client holding every row (ERM)."""
    X, y, _ = fed.pooled()
    if fed.task == "multiclass":
        return dm.Federation.from_arrays([X], [y], task="multiclass", classes=list(range(fed.n_classes)))
    return dm.Federation.from_arrays([X], [y], task=fed.task)


def _certified_problem(fed, row: str, pooled=None):
    loss = dm.losses.Multinomial() if fed.task == "multiclass" else dm.losses.Logistic()
    if row == "erm":
        return dm.FederatedDRO(pooled, loss, dm.sets.Simplex(1), l2=L2, penalize_intercept=False)
    if row == "fafl":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")            # the clip's note
            return dm.FairnessAwareFL(fed, loss, alpha=FAFL_ALPHA, l2=L2, penalize_intercept=False,
                                      alpha_below_p="clip")
    W = dm.sets.ChiSquare(fed.n_clients, RHO) if row == "chi2" else dm.sets.CVaR(fed.n_clients, cvar_alpha(fed))
    return dm.FederatedDRO(fed, loss, W, l2=L2, penalize_intercept=False)


#: the certified solve's relative gap tolerance on the scale rows (``--gap-tol``)
SCALE_GAP_TOL = [1e-6]
#: ``--default-tol-baseline``: also time scikit-learn's lbfgs at its default tol (1e-4), as
#: ``LogisticRegression().fit`` runs (reported, not counted in the ratio: it stops farther from the optimum)
DEFAULT_TOL_BASELINE = [False]


def _certified_once(fed, row: str, method: str, pooled=None):
    t0 = time.perf_counter()
    prob = _certified_problem(fed, row, pooled)
    sol = prob.solve(method=method, gap_tol=SCALE_GAP_TOL[0])
    return prob, sol, time.perf_counter() - t0


def _baselines_once(fed, row: str, prob, skip_cholesky_above: int) -> dict:
    """``{name: (seconds, iterations, exact objective of its answer)}``."""
    out = {}
    if row == "erm":
        for solver in SKLEARN_SOLVERS:
            if solver == "newton-cholesky" and prob.dim > skip_cholesky_above:
                continue
            model, seconds, it = sklearn_erm(fed, L2, solver)
            theta = prob.layout.from_sklearn(model.coef_, model.intercept_)
            out[f"sklearn {solver}"] = (seconds, it, prob.objective(theta))
        if DEFAULT_TOL_BASELINE[0]:       # what LogisticRegression().fit runs: lbfgs at its default tol
            model, seconds, it = sklearn_erm(fed, L2, "lbfgs", tol=1e-4)
            theta = prob.layout.from_sklearn(model.coef_, model.intercept_)
            out["sklearn lbfgs tol=1e-4"] = (seconds, it, prob.objective(theta))
    elif row == "chi2":
        theta, _, seconds, it = chi2_dual_lbfgs(fed, L2, RHO)
        out["L-BFGS-B chi2 dual"] = (seconds, it, prob.objective(theta))
    elif row == "fafl":
        theta, _, seconds, it = fafl_smoothed_lbfgs(fed, L2, FAFL_ALPHA)
        out["L-BFGS-B smoothed FAFL"] = (seconds, it, prob.objective(theta))
    else:
        theta, _, seconds, it = cvar_smoothed_lbfgs(fed, L2, cvar_alpha(fed))
        out["L-BFGS-B smoothed CVaR"] = (seconds, it, prob.objective(theta))
    return out


def _peak_bytes(fed, row: str, method: str, pooled=None) -> int:
    import tracemalloc

    tracemalloc.start()
    _certified_once(fed, row, method, pooled)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def run_scale_row(shape: str, row: str, repeats: int, method: str, skip_cholesky_above: int,
                  peak_memory: bool) -> dict:
    fed = scale_federation(shape)
    pooled = _pooled(fed) if row == "erm" else None    # the data, as scikit-learn receives them
    times, base = [], {}
    for _ in range(repeats):                       # interleaved: ours, then the baselines
        prob, sol, seconds = _certified_once(fed, row, method, pooled)
        times.append(seconds)
        for name, (t, it, value) in _baselines_once(fed, row, prob, skip_cholesky_above).items():
            base.setdefault(name, []).append((t, it, value))
    N = int(sum(fed.sizes))
    out = {"shape": shape, "row": row, "N": N, "d": fed.dim - 1, "K": fed.n_classes if fed.task == "multiclass" else 2,
           "P": prob.dim, "route": " then ".join([a["method"] for a in sol.info.get("route_attempts", [])]
                                             + [sol.info.get("method")]), "certified": float(np.median(times)), "status": sol.status,
           "gap": sol.relative_gap, "L": sol.lower_bound, "U": sol.upper_bound,
           "iterations": sol.info.get("iterations"), "baselines": {}}
    for name, runs in base.items():
        value = runs[-1][2]
        scale = max(1.0, abs(sol.upper_bound))
        out["baselines"][name] = {"seconds": float(np.median([r[0] for r in runs])), "iterations": runs[-1][1],
                                  "value": value, "above_L": (value - sol.lower_bound) / scale,
                                  "above_U": (value - sol.upper_bound) / scale}
    matched = [b for name, b in out["baselines"].items() if not name.endswith("tol=1e-4")]
    fastest = min(matched, key=lambda b: b["seconds"]) if matched else None
    out["ratio"] = out["certified"] / fastest["seconds"] if fastest else float("nan")
    if peak_memory:
        out["peak_bytes"] = _peak_bytes(fed, row, method, pooled)
    return out


def scale_markdown(rows) -> str:
    out = ["| row | N x d x K (P) | route | certified (s) | status | gap | baselines (s, iterations) | "
           "certified / fastest | baseline objective: above L, above U (relative) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        shape = f"{r['N']:,} x {r['d']} x {r['K']} ({r['P']:,})"
        base = "; ".join(f"{n} {b['seconds']:.3g} ({b['iterations']})" for n, b in r["baselines"].items())
        place = "; ".join(f"{b['above_L']:+.1e}, {b['above_U']:+.1e}" for b in r["baselines"].values())
        mem = f", peak {r['peak_bytes'] / 2**30:.2f} GiB" if "peak_bytes" in r else ""
        out.append(f"| {r['row']} | {shape} | {r['route']} | {r['certified']:.3g}{mem} | {r['status']} | "
                   f"{max(r['gap'], 0.0):.0e} | {base} | {r['ratio']:.2f} | {place} |")
    return "\n".join(out)


def _warm_up(method: str) -> None:
    """Import and first-call costs (CVXPY, SciPy, scikit-learn) paid once, outside the timings."""
    fed = dm.datasets.gaussian_mixture(400, 5, 3, n_clients=N_CLIENTS, alpha=5.0, seed=1)
    for row in SCALE_ROWS:
        prob, _, _ = _certified_once(fed, row, method, _pooled(fed))
        _baselines_once(fed, row, prob, 0)


def run_scale(args) -> None:
    shapes = args.scale_shapes.split(",")
    rows_wanted = args.scale_rows.split(",")
    for name in shapes:
        if name not in SCALE_SHAPES:
            raise SystemExit(f"unknown --scale-shapes entry {name!r}; valid: {', '.join(SCALE_SHAPES)}")
    for name in rows_wanted:
        if name not in SCALE_ROWS:
            raise SystemExit(f"unknown --scale-rows entry {name!r}; valid: {', '.join(SCALE_ROWS)}")
    _warm_up(args.method)
    rows = []
    for shape in shapes:
        for row in rows_wanted:
            r = run_scale_row(shape, row, args.repeats, args.method, args.cholesky_max_p, args.peak_memory)
            rows.append(r)
            print(scale_markdown([r]).splitlines()[-1], flush=True)
    emit(scale_markdown(rows), args, SCALE_MARKERS)


# ------------------------------------------------------------------------------------ calibration (issue 41)
CALIBRATION_ROUTES = ("hessian_free", "sqp", "conic")
#: largest N x P at which --calibrate runs the conic route (the model of every row)
CALIBRATION_CONIC_MAX = 100_000
#: largest P at which --calibrate runs the dense sqp route
CALIBRATION_SQP_MAX = 1_000


def run_calibration(args) -> None:
    """Each route's measured seconds (construction and ``solve(method=route)`` with the options
    ``auto`` gives it, median of ``--repeats``, interleaved) next to its :meth:`Route.cost`
    estimate, and the route ``auto`` ranks first -- the data the constants of
    ``drflmodel/problems/engine/cost.py`` were fitted to."""
    _warm_up("auto")
    print("| shape | row | N x P (n) | route | measured (s) | estimated (s) | status | auto's first |")
    print("|---|---|---|---|---|---|---|---|")
    for shape in args.scale_shapes.split(","):
        fed = scale_federation(shape)
        pooled = _pooled(fed)
        for row in args.scale_rows.split(","):
            prob = _certified_problem(fed, row, pooled)
            s = prob.structure
            routes = [r for r in prob.routes() if r.name in CALIBRATION_ROUTES
                      and r.applies(s) is None
                      and not (r.name == "conic" and s.size > CALIBRATION_CONIC_MAX)
                      and not (r.name == "sqp" and s.dim > CALIBRATION_SQP_MAX)]
            times, status = {r.name: [] for r in routes}, {}
            for _ in range(args.repeats):
                for r in routes:
                    t0 = time.perf_counter()
                    p = _certified_problem(fed, row, pooled)
                    sol = p.solve(method=r.name, **r.auto_options(p.structure))
                    times[r.name].append(time.perf_counter() - t0)
                    status[r.name] = sol.status
            first = prob.solve().info["route_choice"]["method"]
            for r in routes:
                est = r.cost(s)
                print(f"| {shape} | {row} | {s.rows:,} x {s.dim:,} ({s.n_clients}) | {r.name} | "
                      f"{float(np.median(times[r.name])):.3g} | {'-' if est is None else f'{est:.3g}'} | "
                      f"{status[r.name]} | {first} |", flush=True)


def emit(table: str, args, markers=MARKERS) -> None:
    """Print the table; write it to ``--markdown`` and, with ``--update-docs``, between
    ``markers`` of the Performance page, with the command that produced it."""
    import sys

    if args.markdown:
        pathlib.Path(args.markdown).write_text(table + "\n")
    if args.update_docs:
        update_docs(table, "python benchmarks/bench_certified.py " + " ".join(sys.argv[1:]).replace(" --update-docs", ""),
                    markers)
    print()
    print(table)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="N in {1k, 10k}, d = 10, plain limit 60 s")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    ap.add_argument("--plain-limit", type=float, default=300.0, help="seconds before the plain model is stopped")
    ap.add_argument("--plain-max", type=int, default=2_000_000, help="largest N x P at which the plain model runs")
    ap.add_argument("--markdown", help="also write the table to this file")
    ap.add_argument("--update-docs", action="store_true",
                    help="replace the table of docs/performance.md between the markers")
    ap.add_argument("--sizes", type=parse_sizes, help="rows x features to run instead of each case's own, e.g. 1000000x20,10000000x20")
    ap.add_argument("--scale", action="store_true", help="the scale rows (issue 30) instead of the cases")
    ap.add_argument("--scale-shapes", default=",".join(SCALE_SHAPES), help="comma-separated scale shapes")
    ap.add_argument("--scale-rows", default=",".join(SCALE_ROWS), help="comma-separated rows: erm, chi2, cvar")
    ap.add_argument("--repeats", type=int, default=3, help="scale rows: interleaved repeats (medians reported)")
    ap.add_argument("--method", default="auto", help="scale rows: the certified route (default auto)")
    ap.add_argument("--cholesky-max-p", type=int, default=2_100,
                    help="scale rows: largest P at which scikit-learn's newton-cholesky (a dense P x P Hessian) runs")
    ap.add_argument("--peak-memory", action="store_true", help="scale rows: one more untimed run under tracemalloc")
    ap.add_argument("--gap-tol", type=float, default=1e-6, help="scale rows: the certified solve's gap tolerance")
    ap.add_argument("--default-tol-baseline", action="store_true",
                    help="scale rows: also time LogisticRegression's lbfgs at its default tol=1e-4 (not in the ratio)")
    ap.add_argument("--calibrate", action="store_true",
                    help="each route's measured seconds next to its cost model's estimate (the scale shapes and rows)")
    args = ap.parse_args()
    if args.calibrate:
        run_calibration(args)
        return
    if args.scale:
        SCALE_GAP_TOL[0] = args.gap_tol
        DEFAULT_TOL_BASELINE[0] = args.default_tol_baseline
        run_scale(args)
        return
    limit = 60.0 if args.quick else args.plain_limit
    rows = []
    for name in args.cases.split(","):
        sizes = args.sizes or [(N, d) for N, d in CASES[name].sizes if not args.quick or (N <= 10_000 and d == 10)]
        for N, d in sizes:
            row = run_case(name, N, d, limit, args.plain_max)
            rows.append(row)
            print(markdown([row]).splitlines()[-1], flush=True)
    emit(markdown(rows), args)


if __name__ == "__main__":
    main()
