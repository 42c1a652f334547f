r"""A fast certified route for piecewise-linear losses (hinge, pinball, :math:`\varepsilon`-insensitive):
smoothing, an exact active-set finish and a numpy Lagrangian certificate
(``solve(method="active_set")``; the client-weight min-max family, :class:`~drflmodel.problems.minmax.dro.WeightedMinMax`).

Problem: :math:`\min_\theta\Phi(\theta)`, :math:`\Phi=\sigma_\Lambda(f(\theta))`,
:math:`f_i(\theta)=\frac1{N_i}\sum_jL(z_{ij})+\frac12\sum_pd_p\theta_p^2` with :math:`L=\max_k(a_kz+b_k)`
(:mod:`.pieces`) and every coordinate penalized (:math:`d=\ell_2\omega>0`).

1. **Smoothing.** The loss is replaced by its Moreau envelope :math:`L_\mu` (a smooth minorant,
   :class:`~.pieces.MoreauEnvelope`) and the smoothed problem is solved by the Lagrangian-Hessian
   SQP steps of :mod:`.lagrangian_sqp` (one fused data pass per step, an :math:`n`-variable weight
   step), for a decreasing sequence of :math:`\mu` until few rows lie in the curved bands. This only
   locates the solution: nothing of it enters the certificate.
2. **Active set.** Rows far from every kink keep the piece active there; the others (the *kink
   rows* :math:`\mathcal K`) keep the whole max. Replacing a row's max by one piece lowers the loss,
   so the **reduced problem**

   .. math::

       \min_{\theta}\ \sigma_\Lambda(t),\quad t_i=c_i+g_i^\top\theta
       +\tfrac1{N_i}\textstyle\sum_{j\in\mathcal K_i}\max_k(a_kz_{ij}+b_k)+\tfrac12\sum_pd_p\theta_p^2 ,

   (:math:`c_i+g_i^\top\theta` the fixed rows' pieces, summed in one numpy pass) has optimal value
   :math:`\le\min\Phi`, and a reduced minimizer at which every fixed row's piece is active is a
   minimizer of :math:`\Phi`. The reduced problem has :math:`P+n+|\mathcal K|` variables whatever
   :math:`N`; it is solved with Clarabel (through CVXPY, the weight set's own support expression);
   rows whose piece is not active at its solution join :math:`\mathcal K` and it is solved again
   (:math:`\mathcal K` only grows, so the loop ends).
3. **Certificate** (independent of both solvers). :math:`U=\Phi(\hat\theta)` in numpy;
   :math:`L=` the Lagrangian bound of :func:`~.pieces.piecewise_dual_bound` at the reduced
   problem's multipliers -- :math:`\lambda` (projected onto :math:`\Lambda`) and, per kink row, the
   multipliers of its pieces normalized to the simplex; one-hot on the fixed piece elsewhere --
   minus :math:`\psi(\lambda)`. Valid for any multipliers; tight at the reduced problem's optimum.

Applies to piecewise-linear losses with :math:`\ell_2>0` on every coordinate (an unpenalized
intercept leaves the bound unbounded below: the conic route applies). ``method="auto"`` tries it
first for those losses and falls back to the conic route when it does not certify.
"""

from __future__ import annotations

import time

from ..._lazy import LazyModule

cp = LazyModule("cvxpy")     # imported on first use: a route that runs no CVXPY model never loads it
import numpy as np
import scipy.sparse as sp

from ... import _float64_products as fp

from ..._validation import check_int, check_real
from ...objectives import ClientObjectives
from ...sets import feasible_weights
from ...solution import status_from_gap
from ..._solver_sequence import default_solver, failure_reason, solve_with_fallback
from ..engine.queries import ROWS
from .lagrangian_sqp import _Point, weight_step_model
from .pieces import MoreauEnvelope, Pieces, SampleTable, piecewise_dual_bound
from ..engine.route import Route

__all__ = ["ActiveSetRoute", "CERTIFICATE"]

CERTIFICATE = "Lagrangian bound at piece multipliers (active set)"

#: rows from which the smoothed stage warm-starts on a 5% subsample
WARM_START_ROWS = 100_000


def _band_target(P: int, n: int, N: int) -> int:
    r"""How many rows the kink set may hold before the smoothing stops:
    :math:`\min(\max(10(P+n), 1000),\ \max(2(P+n), 2\cdot10^7/P^2))`. The reduced problem's
    interior-point iterations cost about :math:`|\mathcal K|P^2` (a dense block) and each smaller
    :math:`\mu` a few data passes; the constants balance the two on the benchmark instances
    (``benchmarks/bench_certified.py``: :math:`P` = 10, 50, 200)."""
    return int(min(max(10 * (P + n), 1000), max(2 * (P + n), 2e7 / P ** 2)))

#: the reduced problem is small: solve it tightly (its multipliers are the certificate's)
_REDUCED_TOLERANCES = {"CLARABEL": {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12,
                                    "tol_ktratio": 1e-9, "max_iter": 500}}


class ReducedProblem:
    """The reduced problem of the module docstring for one kink set (built per round)."""

    def __init__(self, problem, table: SampleTable, pieces: Pieces, fixed: np.ndarray, kink_rows: np.ndarray):
        n, P = problem.n_clients, problem.dim
        a, b = pieces.slopes[fixed], pieces.intercepts[fixed]
        w = table.weight.copy()
        w[kink_rows] = 0.0
        self.c = table.client_sums(w * (a * table.offset + b))
        self.g = table.client_gradients(w * a * table.sign)
        self.theta = cp.Variable(P, name="theta")
        self.t = cp.Variable(n, name="t")
        q = cp.Variable(name="ridge")
        support, extra = problem.support_expression(self.t)
        rhs = self.c + self.g @ self.theta + q
        self.piece_constraints = []
        cons = [q >= 0.5 * cp.sum_squares(cp.multiply(np.sqrt(problem.objectives.penalty_diagonal), self.theta))]
        if kink_rows.size:
            # the scores once (one dense |K| x P block), then each piece is diagonal in them
            u = cp.Variable(kink_rows.size, name="kink_scores")
            e = cp.Variable(kink_rows.size, name="kink_losses")
            wK, sK, rK = table.weight[kink_rows], table.sign[kink_rows], table.offset[kink_rows]
            cons.append(u == fp.as_float64(table.X[kink_rows]) @ self.theta)
            for ak, bk in zip(pieces.slopes, pieces.intercepts):
                piece = wK * (ak * rK + bk) + (cp.multiply(wK * ak * sK, u) if ak != 0 else 0.0)
                self.piece_constraints.append(e >= piece)
            members = sp.csr_matrix((np.ones(kink_rows.size), (table.client[kink_rows], np.arange(kink_rows.size))),
                                    shape=(n, kink_rows.size))
            rhs = rhs + members @ e
        self.epigraph = self.t >= rhs
        self.problem = cp.Problem(cp.Minimize(support), [self.epigraph, *cons, *self.piece_constraints, *extra])

    def solve(self):
        """``(theta, raw weights, piece multipliers (|K|, pieces), model value, solver)``."""
        attempts = []
        solver = solve_with_fallback(self.problem, tolerances=_REDUCED_TOLERANCES, attempts=attempts)
        if solver is None:
            raise ArithmeticError(f"reduced problem: {failure_reason(attempts)}")
        nu = (np.column_stack([np.maximum(np.asarray(c.dual_value, float).reshape(-1), 0.0)
                               for c in self.piece_constraints]) if self.piece_constraints else None)
        lam = np.asarray(self.epigraph.dual_value, float).reshape(-1)
        return (np.asarray(self.theta.value, float), lam, nu, float(self.problem.value), solver)


class ActiveSetRoute(Route):
    """Smoothing, an exact active-set finish and the numpy Lagrangian certificate (module
    docstring). Options: ``max_rounds`` (active-set rounds, default 30), ``max_kink_rows`` (the
    largest kink set before the route gives up, default 20,000) and ``tol`` (the relative gap at
    which it stops, default 1e-10; it also stops once the gap is within ``gap_tol`` and every
    fixed row's piece is active)."""

    name = "active_set"
    options = {"max_rounds": 30, "max_kink_rows": 20_000, "tol": 1e-10}
    needs = frozenset({ROWS})          # every row's score and pieces (a federated server takes 'level_bundle')
    uses_solver = False
    may_fall_back = True

    def applies(self, structure) -> str | None:
        if not structure.piecewise_linear:
            return (f"the loss {structure.loss!r} is not piecewise linear (the route keeps each row's affine "
                    f"pieces); smooth losses take method='sqp'")
        if not structure.ridge_covers_all:
            return ("its Lagrangian bound needs every coordinate penalized (l2 > 0 and penalize_intercept=True): "
                    "along an unpenalized direction the piecewise-linear minorant is unbounded below; "
                    "use method='conic'")
        return None

    def complete_options(self, given) -> dict:
        opts = super().complete_options(given)
        opts["max_rounds"] = check_int(opts["max_rounds"], "max_rounds", low=1)
        opts["max_kink_rows"] = check_int(opts["max_kink_rows"], "max_kink_rows", low=1)
        opts["tol"] = check_real(opts["tol"], "tol", low=0.0, low_open=True)
        return opts

    def solve(self, problem, request):
        started = time.perf_counter()
        opts = request.options
        timing = {"smoothing": 0.0, "reduced_build": 0.0, "reduced_solve": 0.0, "numpy": 0.0,
                  "certificate": 0.0}
        pieces = Pieces.of(problem.loss)
        table = SampleTable(problem.objectives)
        t0 = time.perf_counter()
        if table.rows <= _band_target(problem.dim, problem.n_clients, table.rows):
            # few rows: every row is a kink row and the reduced problem is the problem itself
            theta, smoothing = np.zeros(problem.dim), {"band": np.inf, "skipped": "every row is a kink row"}
        else:
            theta, smoothing = _smoothed_minimizer(problem, pieces, table, request)
        timing["smoothing"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        z = table.arguments(theta)
        fixed = pieces.active(z)
        kink = table.valid & (pieces.kink_distance(z) <= smoothing["band"])
        timing["numpy"] += time.perf_counter() - t0
        best, history = None, []
        for k in range(1, opts["max_rounds"] + 1):
            rows = np.flatnonzero(kink)
            record = {"round": k, "kink_rows": int(rows.size)}
            history.append(record)
            if rows.size > opts["max_kink_rows"]:
                record["error"] = f"{rows.size} kink rows > max_kink_rows = {opts['max_kink_rows']}"
                break
            t0 = time.perf_counter()
            reduced = ReducedProblem(problem, table, pieces, fixed, rows)
            timing["reduced_build"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            try:
                theta, lam_raw, nu, model_value, solver = reduced.solve()
            except ArithmeticError as exc:
                record["error"] = str(exc)[:200]
                break
            timing["reduced_solve"] += time.perf_counter() - t0
            record["model_value"] = model_value
            t0 = time.perf_counter()
            z = table.arguments(theta)
            violated = table.valid & ~kink & _violated(pieces, z, fixed)
            timing["numpy"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            sol = _certify(problem, table, pieces, theta, lam_raw, nu, fixed, rows, z, model_value, solver)
            timing["certificate"] += time.perf_counter() - t0
            record.update(violated=int(violated.sum()), relative_gap=sol.relative_gap)
            if best is None or sol.relative_gap < best.relative_gap:
                best = sol
            gap = sol.relative_gap
            if gap <= opts["tol"] or (gap <= request.gap_tol and not violated.any()):
                break
            if not violated.any():
                record["error"] = "no violated row left but the gap did not close (reduced solve accuracy)"
                break
            kink |= violated
        if best is None:
            return problem.failed_solution([{"method": self.name, "history": history}])
        best.duals = problem.answer_duals(best.duals["epigraph"], best.theta)
        best.status = status_from_gap(best.lower_bound, best.upper_bound, request.gap_tol)
        best.info.update({"rounds": len(history), "history": history, "gap_tol": request.gap_tol,
                          "smoothing": smoothing,
                          "time_split": {**timing, "total": time.perf_counter() - started}})
        return best


def _violated(pieces: Pieces, z: np.ndarray, fixed: np.ndarray) -> np.ndarray:
    """Rows whose fixed piece is not active at ``z`` (another piece larger by more than round-off)."""
    values = pieces.values(z)
    own = np.take_along_axis(values, fixed[None, :], axis=0)[0]
    top = values.max(axis=0)
    return top - own > 1e-12 * (1.0 + np.abs(top))


def _certify(problem, table, pieces, theta, lam_raw, nu, fixed, kink_rows, z, model_value, solver):
    """The certified Solution at the reduced problem's answer (module docstring, step 3)."""
    W = problem.weight_set
    lam, _ = feasible_weights(W, lam_raw)
    slope, intercept = pieces.slopes[fixed].copy(), pieces.intercepts[fixed].copy()
    if kink_rows.size:
        total = nu.sum(axis=1)
        # multipliers normalized to the simplex over the pieces; where they vanish (the client's
        # weight is 0) any piece is valid: the active one
        active = pieces.active(z[kink_rows])
        mix = np.where(total[:, None] > 0, nu / np.where(total > 0, total, 1.0)[:, None],
                       np.eye(pieces.count)[active])
        slope[kink_rows] = mix @ pieces.slopes
        intercept[kink_rows] = mix @ pieces.intercepts
    bound = piecewise_dual_bound(table, W, lam, slope, intercept)
    fixed_min = {"value": bound["value"], "solver_value": bound["value"], "numpy_bound": bound["value"],
                 "theta": bound["theta"], "solver": "numpy-dual", "status": "optimal", "iterations": 0,
                 "bound_kind": "piecewise Lagrangian"}
    values, grads, _ = problem.objectives.evaluate(theta, hessian=False)
    sol = problem.certify_at(theta, lam, f"active-set ({solver})", model_value, {"epigraph": lam_raw},
                             fixed=fixed_min, evaluated=(values, grads))
    sol.certificate = CERTIFICATE
    sol.info["bound_allowance"] = bound["allowance"]
    return sol


def _smoothed_minimizer(problem, pieces: Pieces, table: SampleTable, request):
    r"""Step 1 of the module docstring: the minimizer of the problem with the loss replaced by its
    Moreau envelope, for decreasing :math:`\mu` (each SQP run warm-started from the last) until
    the rows within ``band`` :math:`=2\mu\max_k|a_k|` of a kink are few (at most
    :func:`_band_target`) or :math:`\mu` reaches :math:`10^{-6}\mu_0`.
    :math:`\mu_0` is a tenth of the median distance of the arguments to the nearest kink at
    :math:`\theta=0`; the next :math:`\mu` is scaled by ``target / (2 band rows)`` (the band's
    row count is about proportional to :math:`\mu`), at least by 1/1000 and at most by 1/2.
    Intermediate runs stop at a looser tolerance. Returns ``(theta, info)``."""
    W = problem.weight_set
    solver = default_solver()
    model = weight_step_model(problem, solver)
    z0 = table.offset[table.valid]                       # the arguments at theta = 0
    scale = float(np.median(pieces.kink_distance(z0))) if pieces.kinks.size else 1.0
    scale = scale if np.isfinite(scale) and scale > 0 else 1.0
    target = _band_target(problem.dim, problem.n_clients, table.rows)
    slope_max = float(np.max(np.abs(pieces.slopes)))
    theta = np.zeros(problem.dim)
    lam = None
    mu, history = 0.1 * scale, []
    seed = request.seed if isinstance(request.seed, int) else 0
    while True:
        obj = ClientObjectives(problem.federation, MoreauEnvelope(problem.loss, mu), problem.l2,
                               problem.penalize_intercept)
        if not history and table.rows >= WARM_START_ROWS:
            sub = obj.subsample(0.05, minimum=4 * problem.dim, seed=seed)
            theta, lam, _ = _sqp(sub, W, model, theta, lam, rtol=1e-6)
        theta, lam, steps = _sqp(obj, W, model, theta, lam, rtol=1e-6)
        band = 2.0 * mu * slope_max
        count = int(np.sum(table.valid & (pieces.kink_distance(table.arguments(theta)) <= band)))
        history.append({"mu": mu, "steps": steps, "band_rows": count})
        if count <= target or mu <= 1e-6 * scale:
            return theta, {"mu": mu, "band": band, "target": target, "history": history}
        mu *= min(0.5, max(1e-3, 0.9 * target / count))


def _sqp(obj, W, model, theta, lam, max_steps: int = 40, rtol: float = 1e-9):
    """Lagrangian-Hessian SQP steps (:mod:`.lagrangian_sqp`) on smooth objectives ``obj`` from
    ``theta`` until the predicted decrease is below ``rtol`` relative; returns ``(theta, lam, steps)``."""
    if lam is None:
        lam = feasible_weights(W, np.asarray(W.worst_case(obj.values(theta))[1], float))[0]
    point = _Point(obj, W, theta, lam)
    k = 0
    for k in range(1, max_steps + 1):
        if point.D.chol is None:
            break
        try:
            lam_new, delta, m_value = point.step(model)
        except (ArithmeticError, cp.error.SolverError):
            break
        predicted = max(point.value - m_value, 0.0)
        point, step = point.advance(delta, lam_new, predicted)
        if predicted <= rtol * max(1.0, abs(point.value)) or step < 1e-10:
            break
    return point.theta, point.lam, k
