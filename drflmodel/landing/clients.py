r"""The faulty client named: each client's returned model against its own round map.

Where a run records what each client returned (:class:`drflmodel.flower.Recorder` keeps it per
round; a simulator run or a user's harness can pass it as ``client_models``), the whole-run bounds
are not the only test: a client of FedAvg / FedProx with full-batch local steps is deterministic --
from the model :math:`\theta^{r-1}` it received it must return :math:`u_{i,J}(\theta^{r-1})`
(:mod:`drflmodel.landing.contraction`), up to the rounding of its own arithmetic. With the rounding
model of :mod:`drflmodel.landing.arithmetic` (no server average: :math:`c=4(J+2)`), a returned model
:math:`\tilde u_i` with

.. math:: \|\tilde u_i-u_{i,J}(\theta^{r-1})\|>4(J+2)\,u\max(1,\|\theta^{r-1}\|,\|\tilde u_i\|)

cannot come from the claimed local steps: that client is named ("client 3 is not running FedProx
..."), whatever the other clients did. When the returned model instead matches the local steps
without the proximal term, the report says "its updates ignore mu". Minibatch clients are not
deterministic; they are not graded here.
"""

from __future__ import annotations

import numpy as np

from .contraction import local_iterates

__all__ = ["client_faults", "describe", "MAX_ROUNDS_CHECKED"]

#: rounds whose replies are recomputed (evenly spread over the run, the first and last included)
MAX_ROUNDS_CHECKED = 24


def client_faults(problem, fp, thetas, client_models, u: float, strategy: str) -> list[dict]:
    """Per faulty client: ``{"client", "round", "distance", "allowance", "matches"}`` (module
    docstring); ``thetas`` are the global models ``(R+1, P)``, ``client_models`` ``(R+1, n, P)``
    with row ``r`` the replies of round ``r`` (NaN where none)."""
    models = np.asarray(client_models, float)
    J, eta, mu = fp.config["local_steps"], fp.config["step_size"], fp.config.get("mu") or 0.0
    replied = np.flatnonzero(np.any(np.all(np.isfinite(models), axis=2), axis=1))
    replied = replied[(replied >= 1) & (replied < min(len(thetas), len(models)))]
    if replied.size == 0:
        return []
    pick = replied[np.unique(np.linspace(0, replied.size - 1, min(MAX_ROUNDS_CHECKED, replied.size)).astype(int))]
    faults: dict[int, dict] = {}
    c = 4.0 * (int(J) + 2)
    for r in pick:
        start = np.asarray(thetas[r - 1], float)
        expected = local_iterates(problem.objectives, start, J, eta, mu)
        for i in np.flatnonzero(np.all(np.isfinite(models[r]), axis=1)):
            got = models[r, i]
            dist = float(np.linalg.norm(got - expected[i]))
            allowance = c * u * max(1.0, float(np.linalg.norm(start)), float(np.linalg.norm(got)))
            if dist > allowance and int(i) not in faults:
                faults[int(i)] = {"client": int(i), "round": int(r), "distance": dist, "allowance": allowance,
                                  "matches": _matches(problem, start, got, i, J, eta, mu, allowance)}
    return [faults[i] for i in sorted(faults)]


def _matches(problem, start, got, i, J, eta, mu, allowance) -> str | None:
    if mu > 0:
        plain = local_iterates(problem.objectives, start, J, eta, 0.0)[i]
        if np.linalg.norm(got - plain) <= allowance:
            return "its updates ignore mu (they are FedAvg's local steps)"
    return None


def describe(fault: dict, strategy: str) -> str:
    """One sentence naming the client."""
    text = (f"client {fault['client']} is not running {strategy}: in round {fault['round']} its returned model is "
            f"{fault['distance']:.3e} from {strategy}'s full-batch local steps from the model it received "
            f"(rounding allowance {fault['allowance']:.1e})")
    return text + (f"; {fault['matches']}" if fault.get("matches") else
                   " (if its clients use minibatches, pass batch_size=)")
