"""Distributed solvers: simulated federations, vectorized across clients.

Every solver is ``Solver(**hyperparameters).run(problem, seed=0, callback=None) -> Trace``; the
common machinery (``Solver``, ``Trace``, ``ClientRuntime``, callbacks, communication accounting)
is documented in :mod:`drflmodel.solvers._base`. Names are imported lazily.
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
