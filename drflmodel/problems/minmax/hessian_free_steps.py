r"""The two step algorithms of the Hessian-free route (:mod:`.hessian_free`), each certifying at
every iterate through a :class:`Certifier` and stopping at the first iterate whose certificate
closes.

* :class:`LBFGSRun` -- SciPy's L-BFGS-B (unbounded) on the smooth composition
  :math:`\Phi_\tau=\sigma_\tau\circ f` (D. C. Liu and J. Nocedal 1989, "On the limited memory BFGS
  method for large scale optimization", Mathematical Programming 45): one forward and one backward
  pass per evaluation. For a smooth or fixed :math:`\sigma_\Lambda` (:math:`\tau=0`), and as a
  stage of the smoothing continuation otherwise.
* :class:`QuasiNewtonSQPRun` -- SQP with a limited-memory quasi-Newton Lagrangian Hessian, for the
  sets whose :math:`\sigma_\Lambda` is not smooth (simplex, CVaR, HCVaR, balls). At :math:`\theta_k`
  with client values :math:`f`, gradients :math:`G` (:math:`n\times P`) and :math:`B^{-1}\approx
  (\sum_i\lambda_i\nabla^2f_i)^{-1}` (the two-loop recursion; J. Nocedal and S. Wright, *Numerical
  Optimization*, 2nd ed., Algorithm 7.4), the weight problem in :math:`n` variables

  .. math:: \max_{\lambda\in\Lambda}\ \lambda^\top f-\tfrac12\lambda^\top GB^{-1}G^\top\lambda-\psi(\lambda)

  (the dual of :math:`\min_\Delta\sigma_\Lambda(f+G\Delta)+\frac12\Delta^\top B\Delta`, compiled once;
  :class:`~.lagrangian_sqp.WeightStepModel`), the step :math:`\Delta=-B^{-1}G^\top\lambda_{k+1}`, Armijo
  on the exact :math:`\Phi` with the model's predicted decrease (float32 steps: at most
  :data:`LBFGSRun.FLOAT32_STALL` halvings, then the float64 steps go on), and the pair
  :math:`(s,y)=(\theta_{k+1}-\theta_k,\ (G_{k+1}-G_k)^\top\lambda_{k+1})` -- the quasi-Newton form of
  the classical SQP step whose exact-Hessian version is :mod:`.lagrangian_sqp`. Each iteration: one
  forward pass and one client-by-client backward pass, plus the small weight problem.

**Diagonal preconditioning** (``scaling``, :math:`D=\mathrm{diag}(\delta)>0`). Both algorithms run in
the variables :math:`z=D^{-1}\theta`: L-BFGS minimizes :math:`\Phi_\tau(Dz)`, whose gradient is
:math:`D\nabla\Phi_\tau(\theta)`; the SQP's quasi-Newton matrix starts from
:math:`B_0^{-1}=\gamma D^2` -- the same iterates as BFGS in :math:`z` from :math:`\gamma I`
(:math:`s_z=D^{-1}s`, :math:`y_z=Dy`, :math:`s_z^\top y_z=s^\top y`). Only the steps see :math:`z`:
every evaluation and every certificate is taken at :math:`\theta=Dz`, in the original variables, so
the bound is the one of the unscaled problem (nothing maps back). With columns of very different
scales the Hessian's diagonal spans as many orders of magnitude squared; the Jacobi choice
:math:`\delta_k^{-2}\approx` its diagonal (:func:`~.hessian_free.diagonal_scaling`) removes that
spread, so L-BFGS needs about the iterations of standardized columns.
"""

from __future__ import annotations

import time

import numpy as np

from ...sets import feasible_weights
from ...solution import relative_gap

__all__ = ["Evaluation", "Certifier", "LBFGSRun", "QuasiNewtonSQPRun", "InverseLBFGS"]


class Evaluation:
    """One evaluation at :math:`\\theta`: the row pass (a :class:`~drflmodel.matrix_free.RowPoint`),
    the client values, the weights :math:`\\lambda` whose weighted gradient was taken, that gradient
    :math:`\\sum_i\\lambda_i\\nabla f_i`, the value the steps minimize (:math:`\\Phi_\\tau`, or the
    step model's) and ``upper``, :math:`\\Phi(\\theta)` when the steps computed it (``None``
    otherwise; read by the cheap estimate of when to attempt a certificate, never by the certificate)."""

    __slots__ = ("theta", "point", "values", "lam", "gradient", "smoothed", "upper")

    def __init__(self, theta, point, lam, gradient, smoothed, upper=None):
        self.theta, self.point, self.values = theta, point, point.values
        self.lam, self.gradient, self.smoothed, self.upper = lam, gradient, smoothed, upper

    @classmethod
    def of_support(cls, mf, support, theta) -> "Evaluation":
        """:math:`\\Phi_\\tau` at ``theta`` (one forward, one backward pass)."""
        point = mf.at(theta)
        smoothed, lam = support(point.values)
        return cls(theta, point, lam, point.weighted_gradient(lam), smoothed,
                   upper=smoothed if support.tau == 0 else None)          # sigma_0 = sigma: Phi itself


class Certifier:
    """The certificate at iterates (``certify(evaluation, force)`` returns a dict with ``lower``,
    ``upper``, ... or ``None``), the best one met, and the time spent on it.

    The run is done (:attr:`closed`) once the best relative gap is at most ``tol`` (default
    ``gap_tol``: the first certified iterate), or at most ``gap_tol`` and not halved over the last
    :data:`STALL` certificates (a floor: the floating-point allowance of the bound grows with the
    number of rows).

    **When to attempt** (``optimistic``: a cheap estimate of an evaluation's relative gap, no pass
    over the rows; ``None``: every iterate is offered to ``certify``). An attempt is made only where
    the estimate leaves :data:`ATTEMPT_FRACTION` of the gap still to reach -- ``gap_tol`` until a
    certificate within it is met, then the best gap (an attempt that cannot halve it counts as one
    not halved, so the :data:`STALL` floor ends the run as before). ``attempts`` and ``skipped``
    count both. With the estimate, the run also ends once the best gap is within ``gap_tol`` and
    within ``1/FLOOR_FRACTION`` of its certificate's ``floor`` (the relative gap its floating-point
    allowances alone leave, when it reports one) while ``tol`` lies below that floor: ``tol`` is out
    of reach and no later certificate improves much. Only when the bound is computed changes, never
    the bound."""

    STALL = 5
    #: an attempt is made once the optimistic gap is this fraction of the gap it has to reach (as the
    #: block route's :data:`~.block_newton.ATTEMPT_FRACTION`)
    ATTEMPT_FRACTION = 0.5
    #: the run ends at the allowances' floor once the best gap is within 1/FLOOR_FRACTION of it
    FLOOR_FRACTION = 0.8

    def __init__(self, certify, gap_tol: float, tol: float | None = None, optimistic=None):
        self._certify, self.gap_tol = certify, gap_tol
        self.tol = gap_tol if tol is None else min(tol, gap_tol)
        self.best, self.seconds, self._since_halved = None, 0.0, 0
        self.last = None                     # the last evaluation offered (a plan's last certificate)
        self._optimistic, self.attempts, self.skipped = optimistic, 0, 0

    @property
    def closed(self) -> bool:
        if self.best is None:
            return False
        gap, floor = self.best[0], self.best[1].get("floor")
        at_floor = (self._optimistic is not None and floor is not None and floor > self.tol
                    and floor >= self.FLOOR_FRACTION * gap)
        return gap <= self.tol or (gap <= self.gap_tol and (self._since_halved >= self.STALL or at_floor))

    def _skip(self, ev: Evaluation) -> bool:
        """Whether the cheap estimate says an attempt at ``ev`` cannot reach its goal (class docstring)."""
        if self._optimistic is None:
            return False
        met = self.best is not None and self.best[0] <= self.gap_tol
        goal = self.best[0] if met else self.gap_tol
        if self._optimistic(ev) <= self.ATTEMPT_FRACTION * goal:
            return False
        self.skipped += 1
        if met:
            self._since_halved += 1
        return True

    def check(self, ev: Evaluation, record: dict, force: bool = False) -> bool:
        """Certify at ``ev``; record the gap in ``record``; ``True`` once the run is done."""
        self.last = ev
        t0 = time.perf_counter()
        if not force and self._skip(ev):
            self.seconds += time.perf_counter() - t0
            return self.closed
        self.attempts += 1
        cert = self._certify(ev, force)
        self.seconds += time.perf_counter() - t0
        if cert is not None:
            gap = relative_gap(cert["lower"], cert["upper"])
            record["relative_gap"] = gap
            self._since_halved += 1
            if self.best is None or gap < 0.5 * self.best[0]:
                self._since_halved = 0
            if self.best is None or gap < self.best[0]:
                self.best = (gap, cert)
        return self.closed


class _LineSearchStalled(Exception):
    """A float32 run's line search met the rounding of its values (:data:`LBFGSRun.FLOAT32_STALL`)."""


class LBFGSRun:
    """SciPy's L-BFGS-B on :math:`\\Phi_\\tau` (module docstring); ``stage_done(evaluation)`` ends a
    smoothing stage early (``None``: run until the certificate closes or the iterations end).

    **float32 steps** (evaluations whose points are not ``exact``: float32 products). Near the
    optimum the float32 rounding of the values is larger than the decrease a step can make, and
    L-BFGS-B's line search then spends tens of evaluations per iteration (measured on a 20,000 x 128
    x 20 softmax head: 16-97 in each of the last four iterations, 162 of the run's 190). The run
    ends once one iteration has taken more than :data:`FLOAT32_STALL` evaluations, at its last
    accepted iterate (``stalled``); the route goes on from there with float64 steps (the handover
    of :func:`~.hessian_free._step_objectives`). Float64 steps are never cut."""

    #: evaluations one iteration of float32 steps may take before the run hands over to float64
    #: steps (a float64 iteration takes 1-3)
    FLOAT32_STALL = 6

    def __init__(self, mf, support, certifier: Certifier, memory: int, stage_done=None, scaling=None):
        self.mf, self.support, self.certifier = mf, support, certifier
        self.memory, self.stage_done = memory, stage_done
        self.scaling = np.ones(mf.dim) if scaling is None else np.asarray(scaling, float)
        self.cache, self.history, self.evaluations, self.last = [], [], 0, None
        self.stalled, self._limit, self._at_iterate = False, None, 0

    def evaluate(self, theta) -> Evaluation:
        for ev in self.cache:
            if np.array_equal(ev.theta, theta):
                return ev
        ev = Evaluation.of_support(self.mf, self.support, np.array(theta, float))
        self.evaluations += 1
        self.cache = [ev] + self.cache[:1]
        return ev

    def _fun(self, z):
        ev = self.evaluate(self.scaling * z)
        if self._limit is not None and self.evaluations - self._at_iterate > self._limit:
            raise _LineSearchStalled
        return ev.smoothed, self.scaling * ev.gradient

    def _callback(self, intermediate_result):
        self.last = ev = self.evaluate(self.scaling * intermediate_result.x)
        self._at_iterate = self.evaluations
        record = {"iteration": len(self.history) + 1, "value": ev.smoothed, "tau": self.support.tau}
        self.history.append(record)
        if self.certifier.check(ev, record) or (self.stage_done is not None and self.stage_done(ev)):
            raise StopIteration

    def minimize(self, theta, max_iterations: int) -> np.ndarray:
        from scipy.optimize import minimize

        self.last = self.evaluate(theta)
        self._at_iterate = self.evaluations
        self._limit = None if getattr(self.last.point, "exact", True) else self.FLOAT32_STALL
        if max_iterations > 0 and not self.certifier.check(self.last, {}):     # the start may be certified
            try:
                result = minimize(self._fun, theta / self.scaling, jac=True, method="L-BFGS-B",
                                  callback=self._callback,
                                  options={"maxcor": self.memory, "maxiter": max_iterations,
                                           "maxfun": 4 * max_iterations, "gtol": 0.0, "ftol": 0.0, "maxls": 50})
                theta = self.scaling * np.asarray(result.x, float)
            except _LineSearchStalled:                # float32 rounding: float64 steps go on from here
                self.stalled, theta = True, self.last.theta
        if self.certifier.best is None:               # no iterate passed the cheap test: bound the last
            self.certifier.check(self.last, {}, force=True)
        return theta


class InverseLBFGS:
    r"""A limited-memory BFGS approximation :math:`B^{-1}` of an inverse Hessian (the two-loop
    recursion, applied to several vectors at once), from :math:`B_0^{-1}=\gamma\,\mathrm{diag}(h_0)`
    (``diagonal`` :math:`h_0`, default 1; module docstring)."""

    def __init__(self, memory: int, gamma: float, diagonal=None):
        self.memory, self.gamma, self.pairs = memory, gamma, []
        self.diagonal = None if diagonal is None else np.asarray(diagonal, float)

    def update(self, s: np.ndarray, y: np.ndarray) -> None:
        sy = float(s @ y)
        h0y = y if self.diagonal is None else self.diagonal * y
        if sy <= 1e-12 * float(np.sqrt((s @ (s / (1.0 if self.diagonal is None else self.diagonal))) * (y @ h0y))):
            return                                   # no curvature information (round-off): skip
        self.pairs = (self.pairs + [(s, y, 1.0 / sy)])[-self.memory:]
        self.gamma = sy / float(y @ h0y)
        self._stacks = None

    #: from this many columns :meth:`apply` uses the compact form (four matrix products) instead of
    #: the two-loop recursion (two rank-one updates of the whole block per pair)
    COMPACT_COLUMNS = 4

    def apply(self, V: np.ndarray) -> np.ndarray:
        """:math:`B^{-1}V` for ``V`` of shape ``(P,)`` or ``(P, q)``."""
        if np.ndim(V) == 2 and np.shape(V)[1] >= self.COMPACT_COLUMNS and self.pairs:
            return self._apply_compact(np.asarray(V, float))
        return self._two_loop(V)

    def _apply_compact(self, V: np.ndarray) -> np.ndarray:
        r"""The same :math:`B^{-1}V` in the compact form of R. H. Byrd, J. Nocedal and R. B. Schnabel
        (1994), "Representations of quasi-Newton matrices and their use in limited memory methods",
        Mathematical Programming 63, eq. (3.1)--(3.2), with :math:`H_0=\gamma\,\mathrm{diag}(h_0)`:

        .. math::

            B^{-1}V=H_0V+S^\top T+H_0Y^\top E,\quad E=-R^{-1}SV,\quad
            T=R^{-\top}\big((D+YH_0Y^\top)R^{-1}SV-YH_0V\big),

        :math:`S,Y` the pairs as rows (oldest first), :math:`R` the upper triangle of :math:`SY^\top`,
        :math:`D` its diagonal: four products with the :math:`m\times P` blocks (BLAS-3) where the
        two-loop recursion makes :math:`4m` passes over the :math:`P\times q` block."""
        from scipy.linalg import solve_triangular

        S, Y = self._stacked()
        h0 = self.gamma * (np.ones(S.shape[1]) if self.diagonal is None else self.diagonal)
        Yh = Y * h0
        SY = S @ Y.T
        R = np.triu(SY)
        Vt = V.T                                                    # (q, P): the callers' G, row-major
        A = (Vt @ S.T).T                                            # S V, (m, q)
        E = -solve_triangular(R, A)                                 # -R^{-1} S V
        middle = (np.diag(np.diag(SY)) + Yh @ Y.T) @ (-E) - (Vt @ Yh.T).T
        T = solve_triangular(R, middle, trans="T")
        out = E.T @ Y                                               # (H0 (V + Y^T E) + S^T T)^T, in place
        out += Vt
        out *= h0
        out += T.T @ S
        return out.T

    def gram(self, G: np.ndarray) -> np.ndarray:
        r""":math:`GB^{-1}G^\top` (``G`` of shape ``(n, P)``; the SQP's weight problem) from the compact
        form of :meth:`_apply_compact` without forming :math:`B^{-1}G^\top`:
        :math:`GH_0G^\top+A^\top T+B^\top E` with :math:`A=SG^\top`, :math:`B=YH_0G^\top` and
        :math:`E,T` as there -- one symmetric rank-:math:`P` product (BLAS ``syrk``) and one
        :math:`2m\times n\times P` product."""
        from scipy.linalg import solve_triangular
        from scipy.linalg.blas import dsyrk

        h0 = self.gamma * (np.ones(G.shape[1]) if self.diagonal is None else self.diagonal)
        upper = dsyrk(1.0, (G * np.sqrt(h0)).T, trans=1)         # G H0 G^T, upper triangle
        out = np.triu(upper) + np.triu(upper, 1).T
        if self.pairs:
            S, Y = self._stacked()
            m = len(self.pairs)
            SYh = np.concatenate([S, Y * h0])
            AB = SYh @ G.T                                          # [S G^T; Y H0 G^T], one product
            A, B = AB[:m], AB[m:]
            SY = S @ Y.T
            R = np.triu(SY)
            E = -solve_triangular(R, A)
            T = solve_triangular(R, (np.diag(np.diag(SY)) + SYh[m:] @ Y.T) @ (-E) - B, trans="T")
            out += A.T @ T + B.T @ E
        return 0.5 * (out + out.T)

    def _stacked(self):
        """The pairs as two ``(m, P)`` blocks ``S``, ``Y`` (kept until the next :meth:`update`)."""
        if getattr(self, "_stacks", None) is None:
            self._stacks = (np.stack([p[0] for p in self.pairs]), np.stack([p[1] for p in self.pairs]))
        return self._stacks

    def _two_loop(self, V: np.ndarray) -> np.ndarray:
        """:meth:`apply` by the two-loop recursion."""
        Q = np.array(V, float)
        alphas = []
        for s, y, rho in reversed(self.pairs):
            a = rho * (s @ Q)
            Q -= np.multiply.outer(y, a)
            alphas.append(a)
        Q *= self.gamma if self.diagonal is None else (self.gamma * (self.diagonal if Q.ndim == 1
                                                                      else self.diagonal[:, None]))
        for (s, y, rho), a in zip(self.pairs, reversed(alphas)):
            b = rho * (y @ Q)
            Q += np.multiply.outer(s, a - b)
        return Q


class QuasiNewtonSQPRun:
    """The quasi-Newton SQP of the module docstring for the weight set ``W`` with the compiled
    weight problem ``model``."""

    def __init__(self, mf, W, certifier: Certifier, memory: int, model, scaling=None):
        self.mf, self.W, self.certifier, self.model = mf, W, certifier, model
        self.memory = memory
        self.scaling = None if scaling is None else np.asarray(scaling, float)
        self.history, self.evaluations = [], 0
        self.weights = None                      # the latest step's weights (the weight problem's answer)

    def _point(self, theta):
        self.evaluations += 1
        point = self.mf.at(theta)
        return point, float(self.W.worst_case(point.values)[0])

    def _initial_inverse(self, point) -> InverseLBFGS:
        """:math:`B_0^{-1}=I/L` with :math:`L` the smoothness of :math:`\\sum_i\\lambda_if_i` estimated
        from the rows' mean squared norm; with a ``scaling`` :math:`D`,
        :math:`B_0^{-1}=D^2/(\\Lambda d)` (:math:`\\Lambda=\\sum_i\\lambda_i`, :math:`d` features: the
        trace bound of :math:`D\\nabla^2 D` when :math:`D^{-2}` is the Jacobi estimate)."""
        mf = self.mf
        lam_sum = float(np.sum(self.W.worst_case(point.values)[1]))
        if self.scaling is not None:
            return InverseLBFGS(self.memory, 1.0 / max(lam_sum * mf.n_features, 1e-300), self.scaling ** 2)
        curvature = mf.loss.smoothness * mf.mean_squared_row_norm() + float(mf.penalty_diagonal.max())
        return InverseLBFGS(self.memory, 1.0 / max(lam_sum * curvature, 1e-300))

    def minimize(self, theta, max_iterations: int) -> np.ndarray:
        W = self.W
        point, value = self._point(theta)
        inverse = self._initial_inverse(point)
        limit = None if getattr(point, "exact", True) else LBFGSRun.FLOAT32_STALL   # as LBFGSRun's float32 steps
        for k in range(1, max_iterations + 1):
            G = point.gradients()
            gram = getattr(inverse, "gram", None)
            M = inverse.apply(G.T) if gram is None else None          # B^{-1} G^T, (P, n)
            record = {"iteration": k, "value": value}
            self.history.append(record)
            try:
                lam_raw, m_value = self.model.solve(point.values, G @ M if M is not None else gram(G))
            except ArithmeticError as exc:
                record["error"] = str(exc)[:200]
                break
            lam = feasible_weights(W, lam_raw)[0]
            self.weights = lam
            record["model_value"] = m_value
            weighted = G.T @ lam
            if self.certifier.check(Evaluation(theta, point, lam, weighted, m_value, upper=value), record):
                break
            delta = -(M @ lam) if M is not None else -inverse.apply(weighted)
            predicted = value - m_value
            if not predicted > 1e-15 * max(1.0, abs(value)):
                break                                  # the model sees no decrease left
            step, new, trials = 1.0, None, 0
            while step >= 1e-10:                       # Armijo on the exact objective
                candidate = self._point(theta + step * delta)
                if candidate[1] <= value - 1e-4 * step * predicted:
                    new = candidate
                    break
                step *= 0.5
                trials += 1
                if limit is not None and trials >= limit:
                    break                              # float32 rounding: float64 steps go on from theta
            record["step"] = step
            if new is None:
                break
            theta_new = theta + step * delta
            inverse.update(theta_new - theta, new[0].gradients().T @ lam - weighted)
            theta, (point, value) = theta_new, new
        return theta
