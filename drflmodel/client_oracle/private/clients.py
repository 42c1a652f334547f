r"""The client side of private mode: each client computes, on its own rows only, its term of a sum
the server asked for, already multiplied by its own weight :math:`\lambda_i`; the server receives
the sum through a :class:`~.secure_sum.SumOnlyChannel` and never this vector.

Queries (``contribution(query, **params)``; ``weights`` is ``("size", N)`` for
:math:`\lambda_i=N_i/N` -- ERM, with :math:`N` itself a secure sum -- or ``("public", lam)`` for a
public vector, of which client *i* reads its own entry):

* ``"size"``: :math:`N_i`.
* ``"value_gradient"`` (``theta``): :math:`\lambda_i\,(f_i(\theta),\nabla f_i(\theta))`.
* ``"bound_terms"`` (``theta``, ``intercept_column``): :math:`\lambda_i` times the four magnitudes of
  the floating-point allowance (:meth:`~drflmodel.matrix_free.RowPoint.allowance_terms`) and the
  mean norm of the rows without the intercept column.
* ``"intercept_terms"`` (``theta``, ``idx``): :math:`\lambda_i` times the mean data loss, its
  gradient and Hessian in the :math:`K` intercepts (:meth:`~drflmodel.matrix_free.RowPoint.intercept_terms`).
* ``"intercept_values"`` (``theta``, ``idx``, ``b``): :math:`\lambda_i` times the mean data loss with
  the intercepts set to ``b``.
* ``"cvar_eta"`` / ``"cvar_gradient"`` (``theta``, ``eta``, ``t``): the smoothed CVaR terms of
  :mod:`.cvar` (:meth:`PrivateClient.cvar_contribution`), unweighted; ``"cvar_value"`` /
  ``"cvar_descent"``: the same without the terms only the clients at the kink hold
  (:meth:`PrivateClient.cvar_descent`); ``"cvar_levels"`` (``eta`` an array): those at many levels
  (:meth:`PrivateClient.cvar_levels`); ``"chi_square_eta"`` /
  ``"chi_square_gradient"`` (``theta``, ``eta``): the :math:`\chi^2` dual's
  (:meth:`PrivateClient.chi_square_contribution`).
* ``"weight"`` (``weights``): :math:`\lambda_i` itself -- with ``("cvar_sigma", [c, t, eta, *theta_w])``
  the client's own CVaR weight :math:`\lambda_i=c\,\sigma((\tilde f_i(\theta_w)-\eta')/t)`
  (:meth:`PrivateClient.cvar_weight`), which no one else knows; the fixed-weight queries accept the
  same ``weights``.
"""

from __future__ import annotations

import numpy as np

from ...errors import InvalidParameterError
from ...matrix_free import MatrixFreeObjectives

__all__ = ["PrivateClient", "private_clients", "SIGMA_CUT"]

#: below this slope :math:`\sigma_i` a client sends its kink-free CVaR terms as exact zeros
#: (:meth:`PrivateClient.cvar_descent`; far above the guard's floor, far below the descent's accuracy)
SIGMA_CUT = 1e-9
#: below this :math:`\sigma_i` a client's CVaR weight is 0 (:meth:`PrivateClient.cvar_weight`; any
#: weights in the set give a lower bound)
WEIGHT_CUT = 1e-6


class PrivateClient:
    """Client ``index`` of a federation, holding only its own objective (module docstring)."""

    def __init__(self, index: int, objectives, cap_ratio: float = 1.0):
        self.index = int(index)
        #: :math:`r_i=c_i/\bar c\in(0,1]`: this client's own cap :math:`c_i` over the largest
        #: :math:`\bar c=\max_jc_j` (FAFL's per-client caps :math:`p_i/\alpha_i`, public); the CVaR
        #: terms and weights are multiplied by it, so the server's :math:`\bar c\sum_i(\cdot)` is
        #: :math:`\sum_ic_i(\cdot)`. 1 for ``CVaR(n, alpha)`` (one common cap; multiplying by 1 is exact).
        self.cap_ratio = float(cap_ratio)
        if not 0.0 < self.cap_ratio <= 1.0:
            raise InvalidParameterError(f"cap_ratio must be in (0, 1]; got {cap_ratio!r}")
        self._mf = MatrixFreeObjectives(objectives.restricted(index))
        self.size = int(self._mf.sizes[0])
        self._point = None
        self._weights = {}

    def max_row_norm(self) -> float:
        r""":math:`\max_j\|x_{ij}\|` over this client's rows (for the DP route's public bound check)."""
        return float(self._mf.row_norms().max())

    def _weight(self, weights) -> float:
        kind, arg = weights
        if kind == "size":
            return self.size / float(arg)
        if kind == "public":
            return float(np.asarray(arg, float)[self.index])
        if kind == "cvar_sigma":
            return self.cvar_weight(np.asarray(arg, float))
        raise InvalidParameterError(f"weights must be ('size', N), ('public', lam) or ('cvar_sigma', [c, t, eta, "
                                    f"*theta]); got {kind!r}")

    def cvar_weight(self, arg: np.ndarray) -> float:
        r"""This client's own CVaR weight at the public ``arg`` :math:`=(c,t,\eta',\theta_w)`:
        :math:`\lambda_i=c\,(\sigma(z_i/t)-\kappa)_+/(1-\kappa)`, :math:`z_i=\tilde f_i(\theta_w)-\eta'`,
        :math:`\kappa=` :data:`WEIGHT_CUT` (with per-client caps :math:`c` is :math:`\bar c` and the
        weight :math:`c\,r_i(\cdots)\le c_i`, :attr:`cap_ratio`): exactly 0 for the clients far below the level (their
        terms would be below the guard's floor in some entries and not in others), continuous and
        falling in :math:`\eta'`, and :math:`0\le\lambda_i\le c`. The same float every time it
        is asked (cached per ``arg``): the secure sum of the weights (query ``"weight"``) and the
        weighted sums use the very same numbers."""
        from scipy.special import expit

        key = arg.tobytes()
        if key not in self._weights:
            c, t, eta, theta_w = float(arg[0]), float(arg[1]), float(arg[2]), arg[3:]
            point = self._mf.at(theta_w)
            z = float(point.values[0] - point.penalty) - eta
            sig = float(expit(z / t)) if z > -self.margin(point, t) else 0.0
            top = c * self.cap_ratio                              # c_i (<= it: cap_ratios in private_clients)
            lam = top * max(sig - WEIGHT_CUT, 0.0) / (1.0 - WEIGHT_CUT)   # continuous, monotone in eta
            self._weights = {key: min(max(lam, 0.0), top)}        # one weight vector at a time
        return self._weights[key]

    def _at(self, theta):
        theta = np.asarray(theta, float)
        if self._point is None or not np.array_equal(self._point.theta, theta):
            self._point = self._mf.at(theta)
        return self._point

    def contribution(self, query: str, weights=None, theta=None, idx=None, b=None,
                     intercept_column=None, eta=None, t=None, kind=None, drop=None) -> np.ndarray:
        """This client's vector for ``query`` (module docstring); ``drop``: entries it sends as 0
        (public; the guard's retry of :mod:`.cvar` after a withheld sum: the entries a few clients
        alone would hold)."""
        v = self._contribution(query, weights, theta, idx, b, intercept_column, eta, t, kind)
        if drop is not None and len(drop):
            v = np.array(v, float)
            v[np.asarray(drop, int)] = 0.0
        return v

    def _contribution(self, query, weights, theta, idx, b, intercept_column, eta, t, kind) -> np.ndarray:
        if query == "size":
            return np.array([float(self.size)])
        if query == "dual_allowances":
            return self.dual_allowances(theta, float(weights))
        if query == "dual_count":
            return self.dual_count(theta, np.asarray(eta, float), None if t is None else float(t), str(kind))
        if query == "cvar_levels":
            return self.cvar_levels(theta, np.asarray(eta, float), float(t))
        if query in ("cvar_value", "cvar_descent"):
            return self.cvar_descent(theta, float(eta), float(t), query == "cvar_descent")
        if query in ("cvar_eta", "cvar_gradient"):
            return self.cvar_contribution(theta, float(eta), float(t), query == "cvar_gradient")
        if query in ("chi_square_eta", "chi_square_gradient"):
            return self.chi_square_contribution(theta, float(eta), query == "chi_square_gradient")
        lam = self._weight(weights)
        if query == "weight":
            return np.array([lam])
        point = self._at(theta)
        if query == "value_gradient":
            return lam * np.concatenate([point.values, point.gradients()[0]])
        if query == "bound_terms":
            norms = (self._mf.feature_norm_means(intercept_column) if intercept_column is not None
                     else np.zeros(1))
            return lam * np.concatenate([point.allowance_terms()[0], norms])
        if query == "intercept_terms":
            values, grads, hess = point.intercept_terms(np.asarray(idx))
            return lam * np.concatenate([values, grads[0], hess[0].ravel()])
        if query == "intercept_values":
            return lam * point.intercept_values(np.asarray(idx), np.asarray(b, float))
        raise InvalidParameterError(f"query must be one of 'size', 'value_gradient', 'bound_terms', "
                                    f"'intercept_terms', 'intercept_values'; got {query!r}")

    def chi_square_contribution(self, theta, eta: float, gradient: bool) -> np.ndarray:
        r"""The :math:`\chi^2` dual terms of :mod:`.cvar` (:math:`h(z)=z_+^2/2`), in the layout of
        :meth:`cvar_contribution`: :math:`z_+^2/2`, :math:`z_+`, 0 (:math:`|z|` never sent), :math:`z_+`,
        :math:`\mathbf 1[z>0]`, then 0, or, with ``gradient``, :math:`\|\nabla\tilde f_i\|`, 0, 0 and
        :math:`z_+\nabla\tilde f_i`."""
        point = self._at(theta)
        z = float(point.values[0] - point.penalty) - eta
        zp = max(z, 0.0)
        head = [0.5 * zp * zp, zp, 0.0, zp, float(z > 0)]          # |z| not sent (module .cvar)
        if not gradient:
            return np.array(head + [0.0])
        g = point.gradients()[0] - self._mf.penalty_diagonal * point.theta
        return np.concatenate([head, [float(np.linalg.norm(g)), 0.0, 0.0], zp * g])

    def dual_allowances(self, theta, weight: float) -> np.ndarray:
        r"""``weight`` times this client's floating-point allowances on its value :math:`a_i`
        (:meth:`value_allowance`) and on its gradient (the gradient allowance of
        :mod:`drflmodel.problems.minmax.hessian_free_bound` with :math:`m=N_i+d+16`), each rounded
        **up** to a power of 256. The dual routes of :mod:`.cvar` sum these instead of the magnitudes
        (``"bound_terms"``): those contain the client's loss, and their sum over all clients, with the
        dual's sums over the clients above :math:`\eta`, would give the sum over the clients below it;
        a power of 256 tells the server only the order of magnitude of the allowance."""
        point = self._at(theta)
        _, xr, x2, _ = point.allowance_terms()[0]
        m = self.size + self._mf.n_features + 16
        u = np.finfo(float).eps / 2
        gamma = m * u / (1 - m * u)
        theta = point.theta
        ridge = float(np.linalg.norm(self._mf.penalty_diagonal * theta))
        grad = gamma * (xr + self._mf.loss.smoothness * np.linalg.norm(theta) * x2 + ridge) * (1 + 1e-6)
        out = weight * np.array([self.value_allowance(point), grad])
        with np.errstate(divide="ignore"):
            k = np.ceil(np.log2(np.where(out > 0, out, 1.0)) / 8)
        up = np.where(out > 0, 2.0 ** (8 * k), 0.0)
        return np.where(up < out, up * 256, up)

    def margin(self, point, t) -> float:
        r"""CVaR's margin :math:`m_i=40t+2a_i` around :math:`\eta'` (:math:`a_i` =
        :meth:`value_allowance`): below :math:`-m_i` this client sends 0 for its softplus,
        :math:`\sigma` and :math:`\sigma\nabla\tilde f_i` terms (exact ones are below :math:`te^{-40}`,
        :math:`e^{-40}`), beyond :math:`\pm m_i` 0 for :math:`\sigma'` and :math:`m_i`."""
        return 40.0 * t + 2.0 * self.value_allowance(point)

    def dual_count(self, theta, eta: np.ndarray, t, kind: str) -> np.ndarray:
        r"""Two flags at each level of ``eta`` (flattened, level by level), :math:`z_i=\tilde
        f_i(\theta)-\eta'` as computed: CVaR :math:`\mathbf 1[z_i>-m_i]` (its softplus, :math:`\sigma`
        and gradient terms are nonzero) and :math:`\mathbf 1[z_i\ge m_i]` (its :math:`\sigma'` terms are
        zero; :meth:`margin`); :math:`\chi^2` :math:`\mathbf 1[z_i>0]` twice (its terms are nonzero).
        The guard of :mod:`.cvar` reads them before any dual sum at these levels is asked."""
        point = self._at(theta)
        z = float(point.values[0] - point.penalty) - np.atleast_1d(eta)
        if kind == "cvar":
            m = self.margin(point, t)
            flags = [z > -m, z >= m]
        else:
            flags = [z > 0, z > 0]
        return np.stack(flags, axis=1).astype(float).ravel()

    def cvar_contribution(self, theta, eta: float, t: float, gradient: bool) -> np.ndarray:
        r"""The smoothed CVaR terms of :mod:`.cvar` at :math:`(\theta,\eta')`, :math:`z=\tilde f_i-\eta'`
        with :math:`\tilde f_i=f_i-p(\theta)` (the data loss): :math:`t\log(1+e^{z/t})`, 0, 0 (the
        places of :math:`z_+` and :math:`|z|`, never sent: their sums would hold the clients just
        above or below :math:`\eta` alone), :math:`\sigma=\sigma(z/t)`, :math:`\sigma'=\sigma(1-\sigma)/t`, then without ``gradient``
        :math:`m_i=a_i\sigma'e^{a_i/t}` (:math:`a_i` = :meth:`value_allowance`), with it
        :math:`\|\nabla\tilde f_i\|`, :math:`m_i`, :math:`m_i\|\nabla\tilde f_i\|` and :math:`\sigma\nabla\tilde f_i`."""
        from scipy.special import expit

        point = self._at(theta)
        z = float(point.values[0] - point.penalty) - eta
        a, m = self.value_allowance(point), self.margin(point, t)
        up, band = z > -m, abs(z) < m              # outside them the terms are sent as exact zeros
        sig = float(expit(z / t)) if up else 0.0
        slope = sig * (1.0 - sig) / t if band else 0.0
        moved = a * slope * float(np.exp(min(a / t, 700.0))) * (1 + 1e-6)   # bounds |d sigma| (module .cvar)
        soft = t * float(np.logaddexp(0.0, z / t)) if up else 0.0
        r = self.cap_ratio                   # c_i / c-bar: every term the server multiplies by c-bar
        head = [r * soft, 0.0, 0.0, r * sig, r * slope]                      # z_+, |z| not sent
        if not gradient:
            return np.array(head + [r * moved])
        g = point.gradients()[0] - self._mf.penalty_diagonal * point.theta
        gnorm = float(np.linalg.norm(g))
        return np.concatenate([head, [gnorm, r * moved, r * moved * gnorm], (r * sig) * g])

    def cvar_descent(self, theta, eta: float, t: float, gradient: bool) -> np.ndarray:
        r"""The smoothed CVaR terms every client above :math:`\eta'-m_i` holds, none that only the
        clients at the kink hold (:math:`\sigma'`, :math:`m_i`: with two clients tied at the level,
        one alone would hold them): :math:`t\log(1+e^{z/t})`, :math:`\sigma(z/t)` and, with
        ``gradient``, :math:`\sigma\nabla\tilde f_i`; all exact zeros where :math:`\sigma<`
        :data:`SIGMA_CUT` (:math:`s_t(z)\le2t\,\sigma` there)."""
        from scipy.special import expit

        point = self._at(theta)
        z = float(point.values[0] - point.penalty) - eta
        sig = float(expit(z / t))          # below SIGMA_CUT: z < -20 t, inside the margin's -40 t
        if not sig >= SIGMA_CUT:
            return np.zeros(2 + (self._mf.penalty_diagonal.size if gradient else 0))
        r = self.cap_ratio                   # c_i / c-bar (1 for CVaR: exact)
        head = [r * (t * float(np.logaddexp(0.0, z / t))), r * sig]
        if not gradient:
            return np.array(head)
        g = point.gradients()[0] - self._mf.penalty_diagonal * point.theta
        return np.concatenate([head, (r * sig) * g])

    def cvar_levels(self, theta, etas: np.ndarray, t: float) -> np.ndarray:
        r""":meth:`cvar_descent`'s softplus and :math:`\sigma` terms at each level of ``etas``
        (level by level): one secure sum gives the dual's slope on a grid of levels."""
        from scipy.special import expit

        point = self._at(theta)
        z = float(point.values[0] - point.penalty) - np.atleast_1d(etas)
        sig = expit(z / t)
        soft = t * np.logaddexp(0.0, z / t)
        keep = sig >= SIGMA_CUT
        r = self.cap_ratio
        return np.stack([np.where(keep, r * soft, 0.0), np.where(keep, r * sig, 0.0)], axis=1).ravel()

    def value_allowance(self, point) -> float:
        """A bound :math:`a_i` on the floating-point error of this client's :math:`f_i` at ``point``
        (the value allowance of :mod:`drflmodel.problems.minmax.hessian_free_bound`, with
        :math:`m=N_i+d+16`)."""
        loss_size, xr, _, score_size = point.allowance_terms()[0]
        m = self.size + self._mf.n_features + 16
        u = np.finfo(float).eps / 2
        gamma = m * u / (1 - m * u)
        return float(gamma * (loss_size + xr * np.linalg.norm(point.theta) + score_size + point.penalty) * (1 + 1e-6))


def cap_ratios(caps) -> np.ndarray:
    r"""The clients' :attr:`PrivateClient.cap_ratio` for per-client caps :math:`c_i` (FAFL's
    :math:`p_i/\alpha_i`): :math:`r_i=c_i/\bar c`, :math:`\bar c=\max_jc_j`, each rounded down (by one
    ulp where needed) so that the computed :math:`\bar c\,r_i\le c_i`: the clients' weights stay
    inside the set."""
    caps = np.asarray(caps, float)
    top = float(caps.max())
    r = caps / top
    over = top * r > caps
    r[over] = np.nextafter(r[over], 0.0)
    return r


def private_clients(problem, caps=None) -> list:
    r"""One :class:`PrivateClient` per client of ``problem`` (a horizontal problem: its
    ``objectives``), each holding its own rows only; with ``caps`` (per-client caps :math:`c_i`,
    public), client *i* holds its own ratio :math:`c_i/\max_jc_j` (:func:`cap_ratios`)."""
    ratios = np.ones(problem.n_clients) if caps is None else cap_ratios(caps)
    return [PrivateClient(i, problem.objectives, cap_ratio=ratios[i]) for i in range(problem.n_clients)]
