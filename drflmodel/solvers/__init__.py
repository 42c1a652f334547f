r"""Distributed solvers: simulated federations, vectorized across clients.

Every solver is ``Solver(**hyperparameters).run(problem, seed=0, callback=None) -> Trace``; the
common machinery (``Solver``, ``Trace``, ``ClientRuntime``, callbacks, communication accounting)
is documented in :mod:`drflmodel.solvers._base`. Names are imported lazily.

**Multi-class (softmax) problems.** Every horizontal algorithm runs on them unchanged: a model is
the class-major vector of :mod:`drflmodel.layout` (:math:`P=Kd` floats), and
:func:`drflmodel.verify` measures distances between class-centred representatives. The softmax
gradient's class rows sum to zero, so iterates started at the centred point stay centred. What the
algorithms need from the objective:

* step recipes from the smoothness :math:`L_{xx}` only (FedAvg, FedProx, SCAFFOLD, DRFA,
  Stochastic-AFL, q-FedAvg; Scaff-PD / Scaff-PD-IA with ``schedule="constant"``): unaffected;
* Scaff-PD's ``"sc-sc"``/``"sc-c"`` schedules need :math:`\mu_x>0`, i.e. ``l2 > 0`` on every
  coefficient: with ``penalize_intercept=False`` (scikit-learn's convention) :math:`\mu_x=0`, and
  they refuse, naming the intercept -- use ``schedule="constant"``. The softmax objective is then
  strongly convex only near its optimum on the identifiable parameters, so linear convergence is
  local, not the theorems' global rate; Scaff-PD-IA's schedules need Proposition 10 as well;
* rFedFair's ``step_size="theory"`` needs a global Lipschitz constant of each :math:`f_i`, which
  exists for ``l2 = 0`` (softmax: :math:`\sqrt2` times a client's mean row norm); otherwise pass
  ``lipschitz=`` or a step.

Measured in ``tests/solvers/test_multiclass_solvers.py`` (simulator) and
``tests/flower/test_multiclass_equivalence.py`` (Flower, equal to the simulator to 1e-10).
"""

from __future__ import annotations

import importlib
import importlib.util

_LAZY = {
    "Solver": ("drflmodel.solvers._base", "Solver"),
    "Trace": ("drflmodel.solvers._base", "Trace"),
    "RoundResult": ("drflmodel.solvers._base", "RoundResult"),
    "ClientRuntime": ("drflmodel.solvers._base", "ClientRuntime"),
    "client_generators": ("drflmodel.solvers._base", "client_generators"),
    "CommLedger": ("drflmodel.solvers._base", "CommLedger"),
    "RoundLog": ("drflmodel.solvers._base", "RoundLog"),
    "ScaffPD": ("drflmodel.solvers.scaffpd", "ScaffPD"),
    "ScaffPDIA": ("drflmodel.solvers.scaffpd_ia", "ScaffPDIA"),
    "FedAvg": ("drflmodel.solvers.baselines", "FedAvg"),
    "Scaffold": ("drflmodel.solvers.baselines", "Scaffold"),
    "FedProx": ("drflmodel.solvers.baselines", "FedProx"),
    "StochasticAFL": ("drflmodel.solvers.baselines", "StochasticAFL"),
    "DRFA": ("drflmodel.solvers.baselines", "DRFA"),
    "QFedAvg": ("drflmodel.solvers.baselines", "QFedAvg"),
    "RFedFair": ("drflmodel.solvers.rfedfair", "RFedFair"),
    "ADLPMM": ("drflmodel.solvers.adlpmm", "ADLPMM"),
    "FairVFL": ("drflmodel.solvers.fairvfl", "FairVFL"),
    "FedBCD": ("drflmodel.solvers.fairvfl", "FedBCD"),
}
# only the solvers whose module is present
__all__ = sorted(k for k, (m, _) in _LAZY.items() if importlib.util.find_spec(m) is not None)


def __getattr__(name):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'drflmodel.solvers' has no attribute {name!r}")


def __dir__():
    return __all__
