r"""The local route's machinery for relative fairness: the convex--concave procedure and the
lower bounds that can certify its answer.

For :math:`\varphi>0` and non-quadratic losses the problem is a DC program with no known exact
reformulation. :class:`LocalSearch` (mixed into :class:`~.problem.RelativeFairness`) provides

* :meth:`~LocalSearch.local_search` -- the multi-start convex--concave procedure (majorize--minimize;
  each step a convex problem with :math:`\varphi` in ``cp.Parameter`` s);
* :meth:`~LocalSearch.kelley_bound` -- weak duality over the nonnegative part of
  :math:`\Lambda_\varphi`, maximized by Kelley's cutting planes;
* :meth:`~LocalSearch.strong_convexity_bound` -- the Lemma-8 bound where Prop 10 holds;
* :meth:`~LocalSearch.lower_bounds` -- every valid bound at a point, and the best.

Subproblems run on Clarabel at the documented tolerances (SCS if Clarabel fails); the user's
``solver`` applies to the exact routes, not to these.
"""

from __future__ import annotations

import numpy as np
import cvxpy as cp

from ..._solver_sequence import INFEASIBLE_STATUSES, SOLVER_DEFAULTS, solve_with_fallback

__all__ = ["LocalSearch"]


class LocalSearch:
    """Convex--concave local search and its lower bounds (a mixin of
    :class:`~.problem.RelativeFairness`; see the module docstring)."""

    def _build_ccp(self):
        if self._ccp_cache is None:
            n, d = self.n_clients, self.dim
            theta = cp.Variable(d, name="theta")
            const = cp.Parameter(n, name="lin_const")
            J = cp.Parameter((n, d), name="lin_jac")
            p1 = cp.Parameter(nonneg=True, name="p1")
            p2 = cp.Parameter(nonneg=True, name="p2")
            f = cp.hstack(self.objectives.expressions(theta))
            lin = cp.Variable(n, name="lin_f")              # the linearized losses (keeps DPP)
            tA, tB = cp.Variable(name="sigma_A"), cp.Variable(name="sigma_B")
            obj = p1 * tA + p2 * tB
            cons = [lin == const + J @ theta, self.A.support_expr(f) <= tA, self.B.support_expr(-lin) <= tB]
            if self.box is not None:
                cons += [theta >= self.box[0], theta <= self.box[1]]
            self._ccp_cache = (cp.Problem(cp.Minimize(obj), cons), theta, const, J, p1, p2)
        return self._ccp_cache

    def convex_concave(self, theta0, max_iter: int = 50, tol: float = 1e-10):
        r"""Convex--concave procedure (majorize--minimize) from ``theta0``.

        :math:`-\varphi F_{B,\min}(\theta)=\varphi\max_{b}(-b^\top f(\theta))` and each
        :math:`-b^\top f` is concave, so replacing :math:`f` by its linearization
        :math:`\tilde f_k(\theta)=f(\theta_k)+J_k(\theta-\theta_k)` inside :math:`F_{B,\min}` gives a
        convex majorizer :math:`G_k(\theta)=\frac{1}{1-\varphi}[\sigma_A(f(\theta))+\varphi\sigma_B(-\tilde f_k(\theta))]
        \ge g(\theta)` with equality at :math:`\theta_k`; minimizing it cannot increase :math:`g`.
        Returns ``(theta, g(theta), iterations)``.
        """
        prob, theta, const, J, p1, p2 = self._build_ccp()
        p1.value = 1.0 / (1.0 - self.phi)
        p2.value = self.phi / (1.0 - self.phi)
        th = self.feasible_point(theta0)
        g = self.objective(th)
        it = 0
        for it in range(1, max_iter + 1):
            fk = self.client_losses(th)
            Jk = self.objectives.gradients(th)
            const.value = fk - Jk @ th
            J.value = Jk
            if solve_with_fallback(prob) is None or theta.value is None:
                break
            new = self.feasible_point(theta.value)
            gn = self.objective(new)
            if gn < g:
                improved = g - gn
                th, g = new, gn
                if improved <= tol * max(1.0, abs(g)):
                    break
            else:
                break
            if self.phi == 0:   # the majorizer is exact: one step is the global minimum
                break
        return th, g, it

    def _starts(self, n_starts: int, seed, base: np.ndarray) -> list[np.ndarray]:
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        starts = [base]
        for _ in range(n_starts - 1):
            if self.box is not None:
                starts.append(rng.uniform(self.box[0], self.box[1]))
            else:
                scale = max(1.0, float(np.linalg.norm(base)))
                starts.append(base + scale * rng.normal(size=self.dim) / np.sqrt(self.dim))
        return starts

    def local_search(self, n_starts: int = 3, max_iter: int = 50, seed=0, starts=None):
        r"""Multi-start convex--concave procedure. The first start is the minimizer of the convex
        :math:`\varphi=0` surrogate :math:`\sigma_A(f(\theta))` over :math:`\Theta`; the others are
        seeded random points (uniform in the box, or Gaussian around the first start). Returns
        ``(theta, value, runs)`` with one record per start."""
        if starts is None:
            base = self._phi0_point()
            starts = self._starts(n_starts, seed, base)
        runs = []
        best = (None, float("inf"))
        for s in starts:
            th, g, it = self.convex_concave(s, max_iter=max_iter)
            runs.append({"start": np.asarray(s, float), "theta": th, "value": g, "iterations": it})
            if g < best[1]:
                best = (th, g)
        return best[0], best[1], runs

    def _phi0_point(self) -> np.ndarray:
        prob, theta, const, J, p1, p2 = self._build_ccp()
        p1.value, p2.value = 1.0, 0.0
        const.value = np.zeros(self.n_clients)
        J.value = np.zeros((self.n_clients, self.dim))
        if solve_with_fallback(prob) is None or theta.value is None:
            return np.zeros(self.dim) if self.box is None else 0.5 * (self.box[0] + self.box[1])
        return self.feasible_point(theta.value)

    # ---- lower bounds for the local route --------------------------------------------------
    def _weighted_min(self, lam: np.ndarray):
        r"""``(value, theta)``: :math:`\min_{\theta\in\Theta}\lambda^\top f(\theta)` for :math:`\lambda\ge0`
        (convex, DCP), the optimal value reported by Clarabel at the documented tight tolerances
        (the project's convention for "fix the weights and minimize", as in FederatedDRO);
        ``(-inf, None)`` if unbounded or unsolved. For smooth losses the value is made
        solver-independent by :meth:`_convex_min_bound` where that applies."""
        if self._wmin is None:
            theta = cp.Variable(self.dim, name="theta_w")
            lp = cp.Parameter(self.n_clients, nonneg=True, name="lam_w")
            f = cp.hstack(self.objectives.expressions(theta))
            cons = [] if self.box is None else [theta >= self.box[0], theta <= self.box[1]]
            self._wmin = (cp.Problem(cp.Minimize(lp @ f), cons), theta, lp)
        prob, theta, lp = self._wmin
        lp.value = np.maximum(lam, 0.0)
        if solve_with_fallback(prob) is not None:
            th = self.feasible_point(theta.value)
            rig = self._convex_min_bound(lam, th)
            return (float(prob.value) if rig is None else rig), th
        return float("-inf"), None          # no solver answered, or the minimum is unbounded

    def _convex_min_bound(self, lam, theta):
        r"""A numpy lower bound of :math:`\min_{\Theta}h`, :math:`h=\lambda^\top f` (:math:`\lambda\ge0`,
        smooth losses), at a point :math:`\hat\theta`: with :math:`s=\nabla h(\hat\theta)` and
        :math:`\mu=\sum_i\lambda_i\mu_i`, :math:`h(\theta)\ge h(\hat\theta)+s^\top(\theta-\hat\theta)
        +\frac\mu2\|\theta-\hat\theta\|^2`, minimized in closed form over the box (Frank--Wolfe when
        :math:`\mu=0`) or over :math:`\mathbb R^d` (needs :math:`\mu>0`). ``None`` if not applicable."""
        if not np.isfinite(self.loss.smoothness):
            return None
        lam = np.maximum(np.asarray(lam, float), 0.0)
        mu = float(lam @ self.objectives.strong_convexity())
        h = float(lam @ self.client_losses(theta))
        s = lam @ self.objectives.gradients(theta)
        if self.box is not None:
            lo, hi = self.box[0] - theta, self.box[1] - theta
            t = np.where(s > 0, lo, hi) if mu <= 0 else np.clip(-s / mu, lo, hi)
            return h + float(s @ t) + 0.5 * max(mu, 0.0) * float(t @ t)
        if mu > 0:
            return h - float(s @ s) / (2 * mu)
        return None

    def kelley_bound(self, cuts, max_iter: int = 15, tol: float = 1e-7) -> dict:
        r"""Weak duality over the **nonnegative part** :math:`\Lambda^+=\Lambda_\varphi\cap\mathbb R^n_{\ge0}`:
        for every :math:`\lambda\in\Lambda^+`, :math:`D(\lambda)=\min_{\theta\in\Theta}\lambda^\top f(\theta)
        \le\min_\theta\max_{\Lambda^+}\le\min_\theta\max_{\Lambda_\varphi}` (a convex problem, since
        :math:`\lambda\ge0`). :math:`D` is maximized by Kelley's cutting planes
        (:math:`D(\lambda)\le\lambda^\top f(\theta_j)` for every evaluated :math:`\theta_j`; each
        master problem is an LP over :math:`(a,b)\in A\times B`). ``cuts`` are initial loss
        vectors :math:`f(\theta_j)`. Returns ``{"value", "lam", "iterations", "model_gap"}``; value
        :math:`-\infty` if :math:`\Lambda^+` is empty."""
        n, phi = self.n_clients, self.phi
        a, b, s = cp.Variable(n), cp.Variable(n), cp.Variable()
        lam = (a - phi * b) / (1 - phi)
        base = self.A.constraints(a) + self.B.constraints(b) + [lam >= 0]
        cuts = [np.asarray(c_, float) for c_ in cuts]
        best, best_lam, it, model = float("-inf"), None, 0, float("inf")
        for it in range(1, max_iter + 1):
            F = np.array(cuts)
            prob = cp.Problem(cp.Maximize(s), base + [s <= F @ lam])
            answered = solve_with_fallback(prob, tolerances=SOLVER_DEFAULTS) is not None
            if prob.status in INFEASIBLE_STATUSES:
                return {"value": float("-inf"), "lam": None, "iterations": it, "model_gap": None,
                        "note": "Lambda_phi has no nonnegative element"}
            if not answered:
                break
            model = float(prob.value)
            # project a, b onto A, B: lam is then exactly in Lambda_phi; the LP kept lam >= 0, so
            # any negative entry left is solver round-off (clipped, at most ~1e-9)
            av = self.A.project(np.asarray(a.value, float))
            bv = self.B.project(np.asarray(b.value, float))
            lv = (av - phi * bv) / (1 - phi)
            if lv.min() < -1e-8:
                break
            val, th = self._weighted_min(lv)
            if val > best:
                best, best_lam = val, lv
            if th is None:
                break
            cuts.append(self.client_losses(th))
            if model - best <= tol * max(1.0, abs(best)):
                break
        return {"value": best, "lam": best_lam, "iterations": it,
                "model_gap": (model - best) if np.isfinite(best) else None}

    def strong_convexity_bound(self, theta) -> dict | None:
        r"""Valid when Prop 10 holds strictly (smooth losses): every :math:`\lambda^\top f` with
        :math:`\lambda\in\Lambda_\varphi` is :math:`\mu`-strongly convex,
        :math:`\mu=m_f-\frac{M_f-m_f}2(\|\Lambda_\varphi\|_1-1)>0` (Lemma 8), so for any
        :math:`\lambda\in\Lambda_\varphi`

        .. math:: \min_\Theta g\ \ge\ \min_{\theta\in\Theta}\lambda^\top f(\theta)\ \ge\
           \lambda^\top f(\hat\theta)+\min_{\theta\in\Theta}\big[s^\top(\theta-\hat\theta)+\tfrac\mu2\|\theta-\hat\theta\|^2\big],
           \quad s=\textstyle\sum_i\lambda_i\nabla f_i(\hat\theta),

        (closed form per coordinate on a box). :math:`\lambda` maximizes the unconstrained version
        :math:`\lambda^\top f(\hat\theta)-\|s\|^2/(2\mu)` over :math:`A\times B` (a concave QP).
        Returns ``None`` when the condition fails."""
        m, M = self.curvature_constants()
        if not np.isfinite(M):
            return None
        mu = m - (M - m) * (self.norm1() - 1) / 2
        if not mu > 0:
            return None
        theta = np.asarray(theta, float)
        fv = self.client_losses(theta)
        G = self.objectives.gradients(theta)
        n, phi = self.n_clients, self.phi
        a, b = cp.Variable(n), cp.Variable(n)
        lam = (a - phi * b) / (1 - phi)
        prob = cp.Problem(cp.Maximize(fv @ lam - cp.sum_squares(G.T @ lam) / (2 * mu)),
                          self.A.constraints(a) + self.B.constraints(b))
        if solve_with_fallback(prob, tolerances=SOLVER_DEFAULTS) is None:
            return None
        av = self.A.project(np.asarray(a.value, float))
        bv = self.B.project(np.asarray(b.value, float))
        lv = (av - phi * bv) / (1 - phi)
        s = lv @ G
        if self.box is None:
            val = float(lv @ fv - s @ s / (2 * mu))
        else:
            t = np.clip(-s / mu, self.box[0] - theta, self.box[1] - theta)
            val = float(lv @ fv + s @ t + 0.5 * mu * t @ t)
        return {"value": val, "lam": lv, "mu": mu}

    def lower_bounds(self, theta, cuts=()) -> dict:
        """All valid lower bounds available at ``theta`` (see :meth:`kelley_bound` and
        :meth:`strong_convexity_bound`); ``"best"`` is the largest with its method."""
        out = {}
        kb = self.kelley_bound([self.client_losses(theta), *cuts])
        out["weak_duality_nonnegative_part"] = kb
        sc = self.strong_convexity_bound(theta)
        if sc is not None:
            out["strong_convexity_prop10"] = sc
        name, best = max(((k, v["value"]) for k, v in out.items()), key=lambda kv: kv[1])
        out["best"] = {"method": name, "value": best}
        return out
