"""The :class:`Problem` base class shared by every formulation family (DESIGN.md §1, §3).

``Problem.build()`` is a *reduction* from the formulation to a ``cvxpy.Problem`` (cached);
``Problem.solve()`` runs an open conic solver, then *inverts* the answer into a
:class:`~drflmodel.solution.Solution` whose status comes from an independent certificate:

* upper bound :math:`U` = the exact robust objective at the returned :math:`\\theta`, computed in
  numpy by :meth:`Problem.objective` (no CVXPY);
* lower bound :math:`L` = a dual argument supplied by the subclass in :meth:`Problem._certify`.

If the certificate does not close (relative gap above ``gap_tol``) the next solver in
:meth:`Problem.solver_order` is tried; the best answer is returned with an honest status, and
``"failed"`` if none passed (DESIGN.md §4.1).

Solver tolerances (documented, DESIGN.md §4.7): Clarabel and ECOS run with absolute/relative
gap and feasibility tolerances of 1e-9; SCS (first-order, used as the last resort and for
comparisons) with ``eps_abs = eps_rel = 1e-7`` and up to 200,000 iterations.
"""

from __future__ import annotations

import time
import warnings
from typing import Iterable

import numpy as np
import cvxpy as cp

from .._frames import SweepResult
from .._progress import progress_iter
from .._validation import check_real
from ..errors import InvalidParameterError, SolverError
from ..objectives import ClientObjectives, minibatch_indices
from ..solution import DEFAULT_GAP_TOL, Solution, relative_gap

__all__ = ["Problem", "ClientView", "SOLVER_OPTIONS", "installed_solvers"]

#: the documented tolerances per solver (DESIGN.md §4.7)
SOLVER_OPTIONS = {
    "CLARABEL": {"tol_gap_abs": 1e-9, "tol_gap_rel": 1e-9, "tol_feas": 1e-9, "max_iter": 500},
    "ECOS": {"abstol": 1e-9, "reltol": 1e-9, "feastol": 1e-9, "max_iters": 500},
    "SCS": {"eps_abs": 1e-7, "eps_rel": 1e-7, "max_iters": 200_000},
    "OSQP": {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iter": 200_000, "polish": True},
    "HIGHS": {},
}

_OK = (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
_INFEASIBLE = (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE)


def installed_solvers() -> list[str]:
    """The CVXPY solvers available in this environment."""
    return list(cp.installed_solvers())


class ClientView:
    """What client *i* may compute on its own data (DESIGN.md §1).

    Only client *i*'s rows are reachable from this object: its loss value, gradient, Hessian and
    seeded minibatch gradients of :math:`f_i(\\theta) = \\frac1{N_i}\\sum_j L + \\frac{\\ell_2}2\\|\\theta\\|^2`.
    """

    def __init__(self, problem: "Problem", index: int):
        fed = problem.federation
        if not (0 <= index < fed.n_clients):
            raise InvalidParameterError(f"client index must be in [0, {fed.n_clients - 1}]; got {index}")
        client = fed.clients[index]
        self.index = index
        self.name = client.name
        self._X, self._y = client.X, client.y
        self.loss = problem.loss
        self.l2 = problem.l2

    @property
    def size(self) -> int:
        return self._X.shape[0]

    def value(self, theta) -> float:
        """:math:`f_i(\\theta)`."""
        theta = np.asarray(theta, float)
        return float(np.mean(self.loss.value(self._X @ theta, self._y)) + 0.5 * self.l2 * theta @ theta)

    def gradient(self, theta) -> np.ndarray:
        """:math:`\\nabla f_i(\\theta)`."""
        theta = np.asarray(theta, float)
        return self._X.T @ self.loss.derivative(self._X @ theta, self._y) / self.size + self.l2 * theta

    def hessian(self, theta) -> np.ndarray:
        """:math:`\\nabla^2 f_i(\\theta)` (smooth losses)."""
        theta = np.asarray(theta, float)
        w = self.loss.second_derivative(self._X @ theta, self._y) / self.size
        return (self._X * w[:, None]).T @ self._X + self.l2 * np.eye(theta.size)

    def minibatch_gradient(self, theta, batch_size: int, seed=None) -> np.ndarray:
        """Unbiased gradient from ``batch_size`` rows drawn uniformly with replacement."""
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        idx = minibatch_indices(rng, self.size, batch_size)
        theta = np.asarray(theta, float)
        Xb, yb = self._X[idx], self._y[idx]
        return Xb.T @ self.loss.derivative(Xb @ theta, yb) / batch_size + self.l2 * theta


class Problem:
    """Base class of the exact oracles.

    Subclasses implement :meth:`_build` (return a ``cp.Problem``; keep handles to its variables),
    :meth:`objective` (exact robust objective in numpy) and :meth:`_certify` (turn the solved
    CVXPY problem into a :class:`Solution` with an independent lower bound). Constructors only
    store and validate parameters (scikit-learn style); nothing is built until :meth:`build`.
    """

    #: short family name used in reports
    family = "problem"

    def __init__(self, federation, loss, l2: float = 0.0):
        self.federation = federation
        self.loss = loss
        self.l2 = check_real(l2, "l2", low=0.0)
        self.objectives = ClientObjectives(federation, loss, self.l2)
        self._cp_problem: cp.Problem | None = None
        self._parameters: dict[str, cp.Parameter] = {}

    # ------------------------------------------------------------------ shape
    @property
    def n_clients(self) -> int:
        return self.federation.n_clients

    @property
    def dim(self) -> int:
        return self.federation.dim

    # ------------------------------------------------------------------ numpy side
    def client_losses(self, theta) -> np.ndarray:
        """:math:`(f_1(\\theta), \\dots, f_n(\\theta))` in numpy."""
        return self.objectives.values(np.asarray(theta, float))

    def objective(self, theta) -> float:
        """The exact robust objective at ``theta`` (numpy; no CVXPY)."""
        raise NotImplementedError

    def objective_for(self, solution: Solution):
        """The objective a ``solution`` certifies (a callable of :math:`\\theta`).

        Usually :meth:`objective`; a family whose oracle can also certify a *different* target
        (e.g. the smoothed FAFL objective rFedFair converges to) returns that target's function,
        so that :func:`drflmodel.verify` measures iterates against the right value.
        """
        return self.objective

    def client_view(self, i: int) -> ClientView:
        """What client *i* may compute on its own data."""
        return ClientView(self, i)

    # ------------------------------------------------------------------ CVXPY side
    def build(self) -> cp.Problem:
        """The cached CVXPY problem (built on first call)."""
        if self._cp_problem is None:
            self._cp_problem = self._build()
        return self._cp_problem

    def _build(self) -> cp.Problem:
        raise NotImplementedError

    def solver_order(self) -> list[str]:
        """Open solvers to try, in order, for this problem's cone types."""
        prob = self.build()
        dims = prob.size_metrics
        del dims  # size metrics are informative only; the cone types decide below
        has_sdp = (any(isinstance(c, cp.constraints.PSD) for c in prob.constraints)
                   or any(v.attributes.get("PSD") or v.attributes.get("NSD") for v in prob.variables()))
        order = ["CLARABEL", "SCS"] if has_sdp else ["CLARABEL", "ECOS", "SCS"]
        avail = set(installed_solvers())
        return [s for s in order if s in avail]

    def _certify(self, solver: str) -> Solution:
        """Turn the solved CVXPY problem into a certified :class:`Solution`."""
        raise NotImplementedError

    def solve(self, solver: str | None = None, gap_tol: float = DEFAULT_GAP_TOL,
              verbose: bool = False, **solver_options) -> Solution:
        """Solve and certify.

        Parameters
        ----------
        solver : a CVXPY solver name to use first (default: :meth:`solver_order`).
        gap_tol : relative certificate gap below which the status is ``"optimal"``.
        **solver_options : override the documented tolerances of :data:`SOLVER_OPTIONS`.

        Returns a :class:`Solution`; its ``info`` records every attempt.
        """
        gap_tol = check_real(gap_tol, "gap_tol", low=0.0)
        order = self.solver_order()
        if solver is not None:
            solver = solver.upper()
            order = [solver] + [s for s in order if s != solver]
        prob = self.build()
        attempts, best = [], None
        for name in order:
            opts = {**SOLVER_OPTIONS.get(name, {}), **(solver_options if name == order[0] else {})}
            t0 = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    # "Solution may be inaccurate" is recorded as cvxpy_status; the certificate decides
                    warnings.filterwarnings("ignore", message="Solution may be inaccurate")
                    prob.solve(solver=name, verbose=verbose, **opts)
            except (cp.error.SolverError, ValueError, ArithmeticError) as exc:
                attempts.append({"solver": name, "error": str(exc)[:200]})
                continue
            elapsed = time.perf_counter() - t0
            record = {"solver": name, "cvxpy_status": prob.status, "time": elapsed,
                      "cvxpy_value": prob.value}
            if prob.status in _INFEASIBLE:
                attempts.append(record)
                return self._infeasible_solution(name, attempts)
            if prob.status not in _OK:
                attempts.append(record)
                continue
            sol = self._certify(name)
            sol.status = self._status(sol, gap_tol)
            record.update(status=sol.status, relative_gap=sol.relative_gap)
            attempts.append(record)
            if best is None or _better(sol, best):
                best = sol
            if sol.status == "optimal" or sol.status == "local":
                break
        if best is None:
            return self._failed_solution(attempts)
        best.info.setdefault("solver", attempts[-1]["solver"] if attempts else None)
        best.info["attempts"] = attempts
        best.info["gap_tol"] = gap_tol
        best.problem = self
        return best

    def _status(self, sol: Solution, gap_tol: float) -> str:
        """Status from the certificate (subclasses with ``"local"`` answers override)."""
        if sol.status == "local":
            return "local"
        from ..solution import status_from_gap
        return status_from_gap(sol.lower_bound, sol.upper_bound, gap_tol)

    def _failed_solution(self, attempts) -> Solution:
        return Solution(theta=None, weights=None, client_losses=None, value=float("nan"),
                        lower_bound=float("-inf"), upper_bound=float("inf"), status="failed",
                        certificate="none", info={"attempts": attempts}, problem=self)

    def _infeasible_solution(self, solver, attempts) -> Solution:
        return Solution(theta=None, weights=None, client_losses=None, value=float("inf"),
                        lower_bound=float("inf"), upper_bound=float("inf"), status="infeasible",
                        certificate=f"{solver} infeasibility certificate",
                        info={"attempts": attempts, "solver": solver}, problem=self)

    # ------------------------------------------------------------------ sweeps
    @property
    def parameters(self) -> dict:
        """The CVXPY ``Parameter`` s a sweep may change without recompiling (DPP)."""
        self.build()
        return dict(self._parameters)

    def set_parameter(self, name: str, value) -> None:
        """Set a swept parameter on both the CVXPY and the numpy side."""
        raise InvalidParameterError(
            f"{type(self).__name__} has no sweepable parameter {name!r}; "
            f"available: {sorted(self.parameters)}")

    def sweep(self, param: str, values: Iterable, progress: bool | None = None,
              **solve_kwargs) -> SweepResult:
        """One certified :class:`Solution` per value of ``param`` (re-solves without rebuilding
        where the formulation is DPP), as a list with a ``table`` (:class:`SweepResult`);
        ``progress`` as in :meth:`Solver.run <drflmodel.solvers.Solver.run>`."""
        values = list(values)
        out = SweepResult(param, values)
        for v in progress_iter(values, f"sweep {param}", unit="solve", progress=progress):
            self.set_parameter(param, v)
            sol = self.solve(**solve_kwargs)
            sol.info[param] = v
            out.append(sol)
        return out

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(n_clients={self.n_clients}, dim={self.dim}, "
                f"loss={self.loss!r}, l2={self.l2})")


def _better(a: Solution, b: Solution) -> bool:
    """Prefer the smaller certified relative gap; a broken certificate (status ``"failed"``,
    e.g. L > U) never beats a valid one."""
    if (a.status == "failed") != (b.status == "failed"):
        return b.status == "failed"
    return relative_gap(a.lower_bound, a.upper_bound) < relative_gap(b.lower_bound, b.upper_bound)


def _raise_solver_error(attempts) -> None:  # pragma: no cover - helper for callers
    raise SolverError(f"no solver produced a certified answer: {attempts}")
