"""drflmodel: exact, certified CVXPY oracles and verified distributed solvers for fair and
distributionally robust federated learning.

Submodules are imported lazily (PEP 562) so that ``import drflmodel`` stays fast; no logic runs
at import time.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    # data model
    "Client": ("drflmodel.data", "Client"),
    "Federation": ("drflmodel.data", "Federation"),
    "VerticalFederation": ("drflmodel.data", "VerticalFederation"),
    # results and errors
    "Solution": ("drflmodel.solution", "Solution"),
    "InvalidDataError": ("drflmodel.errors", "InvalidDataError"),
    "InvalidParameterError": ("drflmodel.errors", "InvalidParameterError"),
    "NotConvexError": ("drflmodel.errors", "NotConvexError"),
    "SolverError": ("drflmodel.errors", "SolverError"),
    "ClientObjectives": ("drflmodel.objectives", "ClientObjectives"),
    # problems
    "FederatedDRO": ("drflmodel.problems.minmax.dro", "FederatedDRO"),
    "FairnessAwareFL": ("drflmodel.problems.minmax.fafl", "FairnessAwareFL"),
    "WassersteinDRFL": ("drflmodel.problems.wasserstein.problem", "WassersteinDRFL"),
    "RelativeFairness": ("drflmodel.problems.relative", "RelativeFairness"),
    "DEOConstrained": ("drflmodel.problems.deo", "DEOConstrained"),
    # verification
    "verify": ("drflmodel.verification", "verify"),
    "verify_iterates": ("drflmodel.verification", "verify_iterates"),
    "Verifier": ("drflmodel.verification", "Verifier"),
    "Report": ("drflmodel.verification", "Report"),
    # scikit-learn models -> the objective their federated training minimizes
    "from_sklearn": ("drflmodel._from_sklearn", "from_sklearn"),
    # where a federated strategy lands, certified, and whether a run landed there
    "fixed_point": ("drflmodel.landing", "fixed_point"),
    "conformance": ("drflmodel.landing", "conformance"),
}
_SUBMODULES = {"data", "datasets", "losses", "sets", "metrics", "solution", "errors", "objectives",
               "problems", "solvers", "plots", "cli", "landing", "instances"}

__all__ = sorted(list(_LAZY) + list(_SUBMODULES) + ["__version__"])


def __getattr__(name: str):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        value = importlib.import_module(f"drflmodel.{name}")
        globals()[name] = value
        return value
    raise AttributeError(f"module 'drflmodel' has no attribute {name!r}")


def __dir__():
    return __all__
