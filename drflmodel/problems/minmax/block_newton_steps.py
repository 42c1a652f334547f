r"""The steps of the ``block_newton`` route (:mod:`.block_newton`): an SQP whose Lagrangian Hessian
is modelled from **exact Hessian-vector products** that arrive with each evaluation.

Every evaluation at :math:`\theta_k` returns, with the client values :math:`f_i` and gradients
:math:`\nabla f_i`, the products :math:`\nabla^2f_i(\theta_k)v_j` for :math:`q` directions
:math:`v_1,\dots,v_q` the server chose before asking (on a federated server: one exchange of
:math:`(q+1)P+1` floats per client). The server keeps the last ``memory`` pairs
:math:`(v,\ w=\sum_i\lambda_i\nabla^2f_i\,v)` -- these products, combined with the point's weights,
and the secant pair :math:`(s_k,\ y_k=(G_{k+1}-G_k)^\top\lambda)` of each step, in the order they
arrived -- and models the inverse Hessian of the Lagrangian by the limited-memory BFGS recursion
over them (J. Nocedal and S. Wright, *Numerical Optimization*, 2nd ed., Algorithm 7.4), in the
preconditioned variables :math:`z=D^{-1}\theta` (:math:`D` the route's Jacobi scaling,
:func:`~.hessian_free.diagonal_scaling`). A product pair meets the quasi-Newton condition exactly
at the point it was asked (:math:`w=Hv`, no secant approximation), and each evaluation adds
:math:`q+1` pairs instead of L-BFGS's one; a pair without positive curvature is skipped, so the
model stays positive definite.

**The intercepts' block exactly.** Where the evaluations carry the bound terms (in process, and on a
federated server whose answers have room for them, the ``ride`` of
:class:`~drflmodel.client_oracle.remote_points.RemoteMatrixFree`), each brings the exact Hessian of :math:`\sum_i\lambda_if_i` in the :math:`K`
intercepts (the clients' intercept Hessians combined; :func:`intercept_block`). The recursion's
:math:`B_0` uses it on those coordinates (its exact inverse there, :math:`\gamma I` elsewhere: a
two-loop recursion from any positive definite :math:`B_0` is still the limited-memory BFGS matrix of
the pairs). The unpenalized intercepts are the model's worst-scaled coordinates (only the data term
curves them, and little where the rows are well classified), and the certificate needs them near
their partial minimum. Its eigenvalues are floored at :data:`BLOCK_FLOOR` times the scalar curvature
:math:`1/\gamma`: a class with few rows, its probabilities near 0 after a long step, can give the block an
eigenvalue near 0 and the model an intercept step without bound (on 2,000 rows of a :math:`512\times200`
head, :math:`P=102{,}600`, the route's predicted decrease reached :math:`10^{6}` for an objective of 3,
the line search halved 26 times, and the route stopped uncertified). Measured on digits (20 clients, :math:`\ell_2=10^{-3}`): 39 / 36 evaluations
(ERM / :math:`\chi^2`) at ``gap_tol = 1e-6`` -> 34 / 32, and 55 / 53 -> 49 / 47 at 1e-10. (The exact
diagonal of the Hessian as :math:`B_0`, or a block per feature column
:math:`\sum_i\lambda_i\overline{x_{ik}^2}\,\nabla^2_{bb}f_i`, tried as prototypes, needed 4-8x more.)

**Which directions.** The next evaluation's directions extend the kept ones the way a block Krylov
method does: the latest weighted gradient and the latest products, each with its component in the
span of the kept directions removed (Gram-Schmidt in :math:`z`), so each product brings curvature
along a direction not seen yet. Measured on scikit-learn's digits (softmax, :math:`P=650`, 20
clients, ``gap_tol = 1e-6``, 45 pairs kept): 41-43 evaluations with :math:`q=2` for ERM and
:math:`\chi^2`, against 59-70 for the same recursion with secant pairs alone, and 60 without the
orthogonalization (150 pairs: 36-39); a Rayleigh-Ritz model on the kept directions (tried first)
needed more evaluations than either.

**Step** (as :class:`~.hessian_free_steps.QuasiNewtonSQPRun`, with this :math:`B`): the weight
problem :math:`\max_{\lambda\in\Lambda}\lambda^\top f-\frac12\lambda^\top GB^{-1}G^\top\lambda-\psi(\lambda)`,
:math:`\Delta=-B^{-1}G^\top\lambda`, Armijo on the exact :math:`\Phi` with the model's predicted
decrease. The certificate is the route's, at every iterate, independent of the model.

**Only accepted points' products, and a fresh model after a rejected step.** A trial point the line search rejects is dropped with its
products and intercept block (:meth:`SubspaceModel.hold`): they are exact, but at a point the step
overshot to, whose curvature can be far from the iterate's. With fewer rows than parameters the
softmax saturates along a long step, the products there see little more than the ridge, the model
then predicts a still longer step, and the line search rejects again. For the same reason a step
the line search had to shorten shows the kept pairs describe curvature the iterate has left: the
model then restarts from the accepted point's products and the step's secant pair (the
limited-memory method's restart, Nocedal and Wright, Section 7.2). Measured (``LocalChannel``,
``gap_tol = 1e-6``, ERM): on 2,000 rows of a :math:`512\times200` head (:math:`P=102{,}600`, 20
clients) the route stopped uncertified after 333 exchanges; on 120 rows of a :math:`100\times30` head
(5 clients, :math:`P=2{,}929`) 290 exchanges -> 97 with the rejected products dropped -> 51 with the
restart -> 37 with the intercept block floored (:data:`BLOCK_FLOOR`; the ``hessian_free`` route 65); the
2,000-row head certifies in 50 (``hessian_free`` 83); on digits no step is shortened and the counts are
unchanged.
"""

from __future__ import annotations

import numpy as np

from .hessian_free_steps import QuasiNewtonSQPRun

__all__ = ["SubspaceModel", "BlockNewtonRun", "products_at", "intercept_block"]

#: the intercept block's eigenvalues are floored at this fraction of the scalar curvature 1/gamma of
#: B0 elsewhere, so no intercept step is more than 1/BLOCK_FLOOR times the step the scalar model
#: takes (module docstring). Measured (ERM, gap 1e-6): the 2,000-row 512 x 200 head 50 exchanges at 0.01, 70 at
#: 0.1, 102 without the block, uncertified without a floor; digits 38 / 36 at 0.01 and 0.1, 45 / 40 at 1)
BLOCK_FLOOR = 0.01


def products_at(mf, theta, directions):
    """``(point, products)``: the point of ``mf`` at ``theta`` (values and gradients) and, for the
    ``(q, P)`` ``directions``, every client's :math:`\\nabla^2f_i(\\theta)v_j` (ridge included), shape
    ``(n, q, P)`` -- on a federated server one exchange (``mf.at_with_products``), in process one
    pass plus two per direction."""
    both = getattr(mf, "at_with_products", None)
    if both is not None:
        return both(theta, directions)
    point = mf.at(theta)
    if directions is None or len(directions) == 0:
        return point, np.zeros((mf.n, 0, mf.dim))
    return point, np.stack([point.client_hvps(v) for v in directions], axis=1)


class SubspaceModel:
    r"""The kept pairs (``memory`` of them, in the variables :math:`z=D^{-1}\theta` of the scaling
    ``scaling``, ``None``: the identity) and the model of the module docstring: :math:`B^{-1}` by the
    limited-memory BFGS recursion over the pairs in the order they arrived, from
    :math:`B_0^{-1}=I/\gamma_0` (``gamma0``: the curvature scale before any pair), and the
    orthonormal basis of the kept directions the next directions are orthogonalized against."""

    def __init__(self, memory: int, scaling, gamma0: float):
        self.memory = int(memory)
        self.scaling = None if scaling is None else np.asarray(scaling, float)
        self.gamma0 = float(gamma0)
        self.pairs: list = []                   # (v_z, w_z)
        self._basis = self._inverse = None
        self.block = None                       # (idx, H): exact curvature on a few coordinates
        self._held = None                       # a trial point's pairs and block, until accepted
        self._rejected = False                  # a trial point was rejected since the last accepted one

    def _to_z(self, v, w):
        if self.scaling is None:
            return np.asarray(v, float), np.asarray(w, float)
        return np.asarray(v, float) / self.scaling, np.asarray(w, float) * self.scaling

    def add(self, v, w) -> None:
        """Keep the pair :math:`(v, w\approx Hv)` (``theta``-space), dropping the oldest beyond
        ``memory``; a pair without positive curvature (round-off, a non-finite product) is skipped."""
        vz, wz = self._to_z(v, w)
        if not (np.all(np.isfinite(vz)) and np.all(np.isfinite(wz))):
            return
        vw, vv, ww = float(vz @ wz), float(vz @ vz), float(wz @ wz)
        if not (vv > 0 and vw > 1e-12 * np.sqrt(vv * ww)):
            return
        self.pairs = (self.pairs + [(vz, wz)])[-self.memory:]
        self._basis = self._inverse = None

    def basis(self) -> np.ndarray | None:
        """An orthonormal basis of the kept directions (``(P, r)``, in :math:`z`), or ``None``."""
        if self._basis is None and self.pairs:
            V = np.stack([p[0] / np.linalg.norm(p[0]) for p in self.pairs], axis=1)
            s, U = np.linalg.eigh(V.T @ V)
            keep = s > 1e-10 * s[-1]
            self._basis = V @ (U[:, keep] / np.sqrt(s[keep]))
        return self._basis

    def set_block(self, idx, H) -> None:
        """The exact curvature of the coordinates ``idx`` (``theta``-space, ``(k, k)`` SPD: the intercepts'
        Hessian at the latest point) for :math:`B_0` on them (module docstring); ``None`` drops it."""
        self.block = None if idx is None else (np.asarray(idx), np.asarray(H, float))
        self._inverse = None

    def apply_inverse(self, X) -> np.ndarray:
        r""":math:`B^{-1}X` for ``X`` of shape ``(P,)`` or ``(P, m)`` (``theta``-space): the two-loop recursion
        (Nocedal and Wright, Algorithm 7.4) over the pairs in :math:`z`, from :math:`B_0^{-1}=\gamma I`
        (:math:`\gamma=v^\top w/w^\top w` of the latest pair, :math:`1/\gamma_0` before any) with, when a
        block is set (:meth:`set_block`), that block's inverse on its coordinates, its eigenvalues
        floored at :data:`BLOCK_FLOOR` :math:`/\gamma` (module docstring)."""
        X = np.asarray(X, float)
        D = np.ones(X.shape[0]) if self.scaling is None else self.scaling
        Dm = D if X.ndim == 1 else D[:, None]
        if self._inverse is None:                    # (rho, v, w) per pair, gamma, the block's factor
            rhos = [(1.0 / float(vz @ wz), vz, wz) for vz, wz in self.pairs]
            gamma = 1.0 / self.gamma0
            if self.pairs:
                vz, wz = self.pairs[-1]
                gamma = float(vz @ wz) / float(wz @ wz)
            factor = None
            if self.block is not None:                # B0 on the block: its eigenvalues, floored (docstring)
                idx, H = self.block
                ev, U = np.linalg.eigh(D[idx][:, None] * H * D[idx][None, :])
                if np.all(np.isfinite(ev)) and ev[0] > 0:
                    factor = (idx, U, 1.0 / np.maximum(ev, BLOCK_FLOOR / gamma))
            self._inverse = (rhos, gamma, factor)
        rhos, gamma, factor = self._inverse
        Q = Dm * X
        alphas = []
        for rho, vz, wz in reversed(rhos):
            a = rho * (vz @ Q)
            Q = Q - np.multiply.outer(wz, a)
            alphas.append(a)
        R = gamma * Q
        if factor is not None:
            idx, U, inverse = factor
            R[idx] = U @ (inverse.reshape(-1, *[1] * (Q.ndim - 1)) * (U.T @ Q[idx]))
        for (rho, vz, wz), a in zip(rhos, reversed(alphas)):
            b = rho * (wz @ R)
            R = R + np.multiply.outer(vz, a - b)
        return Dm * R

    def apply(self, X) -> np.ndarray:
        """:meth:`apply_inverse` (the interface of :class:`~.hessian_free_steps.InverseLBFGS`)."""
        return self.apply_inverse(X)

    def hold(self, pairs, block) -> None:
        """Hold an evaluated point's product ``pairs`` (``[(v, w)]``) and intercept ``block`` (``(idx, H)``,
        :meth:`set_block`) until the line search accepts the point (:meth:`update`); the next held
        point replaces them, so a rejected trial point's are dropped (module docstring)."""
        self._rejected = self._rejected or self._held is not None
        self._held = (list(pairs), block)

    def accept(self) -> None:
        """Keep the held pairs and block (:meth:`hold`); when the line search rejected a trial point
        before this one, first drop every kept pair (module docstring: the model had overshot)."""
        held, self._held = self._held, None
        if self._rejected:
            self.pairs, self._basis, self._inverse, self._rejected = [], None, None, False
        if held is not None:
            for v, w in held[0]:
                self.add(v, w)
            self.set_block(*held[1])

    def update(self, s, y) -> None:
        """The accepted point's held pairs (:meth:`accept`), then :meth:`add` of the step's secant pair
        (the interface of :class:`~.hessian_free_steps.InverseLBFGS`)."""
        self.accept()
        self.add(s, y)

    def directions(self, gradient, q: int) -> np.ndarray:
        """The next evaluation's ``q`` directions (``theta``-space, ``(q', P)`` with ``q' <= q``): the
        gradient and the latest products, each with its component in the kept directions' span removed
        (module docstring), of unit length in :math:`z`."""
        Q = self.basis()
        candidates = [self._to_z(gradient, gradient)[1]] + [w for _, w in reversed(self.pairs)]
        chosen = []
        for c in candidates:
            if len(chosen) >= q:
                break
            r = np.array(c, float)
            size = float(np.linalg.norm(r))
            if not size > 0:
                continue
            for _ in range(2):                              # Gram-Schmidt, reorthogonalized once
                if Q is not None:
                    r -= Q @ (Q.T @ r)
                for b in chosen:
                    r -= (b @ r) * b
            rn = float(np.linalg.norm(r))
            if rn > 1e-6 * size:
                chosen.append(r / rn)
        if not chosen:
            return np.zeros((0, np.size(gradient)))
        out = np.array(chosen)
        return out if self.scaling is None else out * self.scaling[None, :]


def intercept_block(mf, point, lam) -> tuple:
    r"""``(idx, H)``: the intercepts' coordinates and the exact Hessian of :math:`\sum_i\lambda_if_i` in
    them at ``point`` (:math:`K\times K`: the clients' intercept Hessians of the bound terms, combined,
    plus the ridge on them; for an unpenalized softmax intercept the invariant direction
    :math:`\mathbf 1` is given the block's largest curvature, as the bound does), or ``(None, None)``
    when the model has no intercept column or its Hessian would cost an exchange (on a federated
    server whose evaluations do not carry the bound terms)."""
    j0 = mf.layout.intercept_column
    if j0 is None or not getattr(mf, "ride", True):
        return None, None
    from ...losses import Multinomial

    K, d = int(mf.n_outputs), int(mf.n_features)
    idx = j0 + d * np.arange(K)
    hess = point.intercept_terms(idx)[2]
    H = np.tensordot(lam, hess, axes=(0, 0)).reshape(K, K)
    penalty = np.asarray(mf.penalty_diagonal, float)[idx] * float(np.sum(lam))
    H = H + np.diag(penalty)
    if isinstance(mf.loss, Multinomial) and not np.any(penalty > 0):
        H = H + np.full((K, K), float(np.abs(H).max()) / K)
    return idx, H


class BlockNewtonRun(QuasiNewtonSQPRun):
    """The SQP of the module docstring for the weight set ``W`` with the compiled weight problem
    ``model``, ``q`` directions per evaluation and ``memory`` kept pairs: the loop of
    :class:`~.hessian_free_steps.QuasiNewtonSQPRun` with :class:`SubspaceModel` as its inverse
    Hessian, and each evaluation asking the products along the directions chosen from the latest
    point's gradient, both combined with the latest step's weights (:meth:`_combining_weights`)."""

    def __init__(self, mf, W, certifier, q: int, memory: int, model, scaling=None):
        super().__init__(mf, W, certifier, memory, model, scaling=scaling)
        self.q, self.products = int(q), 0
        self._model = self._gradient = None

    def _point(self, theta):
        """The point at ``theta`` (one evaluation) with the products along the directions chosen from
        the latest point's gradient; its pairs (combined with the point's worst-case weights)
        and intercept block are held by the model until the line search accepts the point
        (:meth:`SubspaceModel.hold`)."""
        self.evaluations += 1
        directions = None
        if self._model is not None and self._gradient is not None and self.q > 0:
            directions = self._model.directions(self._gradient, self.q)
        point, products = products_at(self.mf, theta, directions)
        value, lam = self._combining_weights(point.values)
        lam = np.asarray(lam, float)
        gradient = point.gradients().T @ lam
        if self._model is not None:
            pairs = [(directions[j], lam @ products[:, j, :]) for j in range(products.shape[1])]
            self._model.hold(pairs, intercept_block(self.mf, point, lam))
        self.products += products.shape[1]
        self._gradient = gradient
        return point, float(value)

    def _initial_inverse(self, point) -> SubspaceModel:
        """The model before any pair: :math:`B_0^{-1}` as :class:`~.hessian_free_steps.QuasiNewtonSQPRun`'s."""
        first = super()._initial_inverse(point)
        self._model = SubspaceModel(self.memory, self.scaling, 1.0 / first.gamma)
        return self._model

    def _combining_weights(self, values) -> tuple:
        r"""``(value, lam)``: :math:`\Phi=\max_{\lambda\in\Lambda}\lambda^\top f-\psi(\lambda)` at the
        clients' ``values`` and the weights the point's products, intercept block and gradient are
        combined with: the latest step's (the weight problem's answer, the multipliers of the SQP's
        Lagrangian :math:`\sum_i\lambda_if_i`, whose Hessian the model approximates; Nocedal and
        Wright, *Numerical Optimization*, section 18.1), the point's worst-case weights before the
        first step. On a polyhedral set (CVaR, the whole simplex of agnostic federated learning) the
        worst case is a vertex -- one client for the simplex -- far from the optimal weights, and
        its curvature made the model wrong: 1,000 x 50 rows, 20 clients, simplex 55 -> 21 exchanges;
        digits (:math:`P=650`) CVaR 106 -> 51, simplex uncertified after about 300 -> 53."""
        value, lam = self.W.worst_case(values)[:2]
        return float(value), (lam if self.weights is None else self.weights)
