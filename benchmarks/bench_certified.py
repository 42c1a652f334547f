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

Set ``OPENBLAS_NUM_THREADS=1`` on a shared machine. Not collected by pytest.
Run: ``python benchmarks/bench_certified.py [--quick] [--cases dro/logistic/chi2,...]``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import pathlib
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import cvxpy as cp
import numpy as np

import drflmodel as dm
from _plain import solve_as_a_user
from drflmodel.objectives import ClientObjectives

warnings.filterwarnings("ignore", message="Solution may be inaccurate")
L2, RHO, ALPHA, N_CLIENTS, DEO_EPS = 1e-3, 0.1, 0.2, 20, 0.02
PERFORMANCE_PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "performance.md"
MARKERS = ("<!-- bench_certified:start -->", "<!-- bench_certified:end -->")


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
    row = {"case": name, "N": N, "d": d, "P": prob.dim, "route": sol.info.get("method"), "certified": t_cert,
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


def update_docs(table: str, command: str) -> None:
    text = PERFORMANCE_PAGE.read_text()
    start, end = text.index(MARKERS[0]), text.index(MARKERS[1])
    body = f"{MARKERS[0]}\n`{command}`:\n\n{table}\n"
    PERFORMANCE_PAGE.write_text(text[:start] + body + text[end:])


def parse_sizes(text: str) -> list[tuple[int, int]]:
    """``"1000000x20,10000x200"`` -> ``[(1000000, 20), (10000, 200)]``."""
    try:
        return [(int(n), int(d)) for n, d in (item.split("x") for item in text.split(","))]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sizes takes rows x features pairs such as 1000000x20,10000x200; got {text!r}")


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
    args = ap.parse_args()
    limit = 60.0 if args.quick else args.plain_limit
    rows = []
    for name in args.cases.split(","):
        sizes = args.sizes or [(N, d) for N, d in CASES[name].sizes if not args.quick or (N <= 10_000 and d == 10)]
        for N, d in sizes:
            row = run_case(name, N, d, limit, args.plain_max)
            rows.append(row)
            print(markdown([row]).splitlines()[-1], flush=True)
    table = markdown(rows)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(table + "\n")
    if args.update_docs:
        import sys

        update_docs(table, "python benchmarks/bench_certified.py " + " ".join(sys.argv[1:]).replace(" --update-docs", ""))
    print()
    print(table)


if __name__ == "__main__":
    main()
