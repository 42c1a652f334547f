"""drflmodel: exact, certified CVXPY oracles and verified distributed solvers for fair and
distributionally robust federated learning.

Submodules are imported lazily (PEP 562) so that ``import drflmodel`` stays fast; no logic runs
at import time. The problem classes are those of the family registry
(:data:`drflmodel.problems.registry.FAMILIES`).
"""

from __future__ import annotations

from ._lazy import lazy_attributes as _lazy_attributes
from .problems.registry import FAMILIES as _FAMILIES

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
    # problems: one per registered family
    **{f.cls: (f.module, f.cls) for f in _FAMILIES.values()},
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

__getattr__, __dir__ = _lazy_attributes("drflmodel", _LAZY, _SUBMODULES, also=["__version__"])
