r"""The objective at a given model from secure sums only: what private grading asks per round.

Grading a run needs, at each round's model :math:`\theta_r`, the distance to the oracle's
:math:`\hat\theta` (the server holds both) and the objective :math:`\Phi(\theta_r)`. On the routes
whose objective at a model is **one** secure sum it is read from that sum, with its carried error:

* fixed weights / ERM (:mod:`.fixed_weight`): :math:`\sum_i\lambda_if_i(\theta_r)`, one sum of the
  clients' weighted values (and gradients -- the same query as the solve's);
* the KL penalty (:mod:`.kl`): :math:`p(\theta_r)+\eta+\tau\log(S/n)`, one sum of the clients'
  :math:`e^{(\tilde f_i-\eta)/\tau}` terms.

CVaR's and :math:`\chi^2`'s objective at a model is a minimum over the dual's :math:`\eta` -- a
search of secure sums per round, each at a new level, releasing the loss distribution near it at
every round's model -- so private grading refuses them by name. The server learns, per graded
round, what the route's solve learns at one model (its ``server_learns``), nothing else.
"""

from __future__ import annotations

import numpy as np

from ...errors import InvalidParameterError
from .fixed_weight import _Server
from .kl import _KLServer
from .solve import private_route

__all__ = ["PrivateObjective", "GRADED_ROUTES"]

#: private routes whose objective at a model is one secure sum (private grading supports these)
GRADED_ROUTES = ("fixed_weight", "kl")


class PrivateObjective:
    """``objective(theta)`` of ``problem`` from one secure sum on ``channel`` (a
    :class:`~.secure_sum.SumOnlyChannel` whose clients are ``route_clients(problem)``), at the
    guard's ``min_contributors``. ``errors`` keeps, per evaluated model (its bytes), the carried
    bound on :math:`|\\text{value}-\\Phi(\\theta)|` (quantization and the clients' floating point)."""

    def __init__(self, problem, channel, min_contributors: int = 2, eta: float | None = None):
        route, arg = private_route(problem)
        if route not in GRADED_ROUTES:
            raise InvalidParameterError(
                f"private grading needs the objective at each round's model from one secure sum: the {route} route's "
                f"objective is a minimum over its dual's eta (a search of sums per round, each releasing the loss "
                f"distribution near its level); graded privately: ERM / fixed weights and KLPenalty")
        self.route, self.channel = route, channel
        channel.min_contributors = int(min_contributors)
        if route == "kl":
            self._server = _KLServer(problem, channel, float(problem.weights.tau))
            if eta is None:
                self._server.start()
            else:
                self._server.eta = float(eta)
        else:
            self._server = _Server(problem, channel, arg)
        self.errors: dict[bytes, float] = {}
        self.evaluations = 0

    def __call__(self, theta) -> float:
        theta = np.asarray(theta, float)
        self.evaluations += 1
        if self.route == "kl":
            s, eta = self._server.terms(theta)
            value, _ = self._server.value_gradient(theta, s, eta)
            err = self._server.tau * float(np.log1p(s.error[0] / (s.value[0] - s.error[0])))
        else:
            s = self._server.value_gradient(theta)
            value, err = float(s.value[0]), float(s.error[0])
        self.errors[theta.tobytes()] = err
        return float(value)
