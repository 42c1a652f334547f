"""The formulation families, each described once.

Every place that lists the families reads :data:`FAMILIES`: the lazy names of ``drflmodel`` and
``drflmodel.problems``, the TOML configuration (``[problem] family``, its weight-set keys, the table
sources' horizontal/vertical keys), the command line's help, the federated solve's
:data:`drflmodel.client_oracle.SUPPORTED`, the Flower deployment's light client path and the
scikit-learn estimators. Adding a family is one :class:`Family` line here and its folder.

This module imports nothing heavy (no CVXPY, no problem class): an entry names its class by module
and name, and :meth:`Family.load` imports it when asked.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..errors import InvalidParameterError

__all__ = ["Family", "FAMILIES", "family", "register", "unregister", "by_class"]

@dataclass(frozen=True)
class Family:
    """One formulation family.

    Attributes
    ----------
    name : the family's name: ``[problem] family`` in a TOML file, the class's ``family``
        attribute, reports.
    cls : the class's name, exported by ``drflmodel`` and ``drflmodel.problems``.
    module : the module that defines the class.
    weight_keys : the constructor's weight-set arguments; each is also a ``[problem]`` key of a
        TOML file (a table ``{ name = ..., <options> }``, default ``simplex``).
    weight_sets : the weight-set names those keys accept (:func:`drflmodel.sets.from_name`);
        ``None`` (the default): every one of :data:`drflmodel.sets.WEIGHT_SET_NAMES`
        (:meth:`weight_set_names`).
    vertical : the family's data is a :class:`~drflmodel.data.VerticalFederation` (parties hold
        feature blocks) rather than a :class:`~drflmodel.data.Federation` (clients hold rows).
    light_client : a client of a deployed run computes the plain :math:`f_i` of
        :class:`~drflmodel.objectives.ClientObjectives` (no oracle, no CVXPY in its process).
    federated : what the federated solve does for this family, shown in
        :data:`drflmodel.client_oracle.SUPPORTED` when the class has a federated solve (a route
        whose ``needs`` hold no row, ``federated_routes()``, or its own ``federated_oracle``; the
        class decides, this text only describes).
    estimators : the :mod:`drflmodel.sklearn` estimators over this family.
    summary : one line: the formulation and its paper.
    """

    name: str
    cls: str
    module: str
    weight_keys: tuple[str, ...] = ()
    weight_sets: tuple[str, ...] | None = None
    vertical: bool = False
    light_client: bool = False
    federated: str = ""
    estimators: tuple[str, ...] = ()
    summary: str = ""

    def load(self) -> type:
        """The family's problem class (imported now)."""
        return getattr(importlib.import_module(self.module), self.cls)

    def weight_set_names(self) -> tuple[str, ...]:
        """The weight-set names the family's weight-set keys accept (none without such a key)."""
        if not self.weight_keys:
            return ()
        if self.weight_sets is not None:
            return tuple(self.weight_sets)
        from ..sets import WEIGHT_SET_NAMES

        return tuple(WEIGHT_SET_NAMES)


_P = "drflmodel.problems"

#: the families, in the order documentation and help list them
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("dro", "FederatedDRO", f"{_P}.minmax.dro", weight_keys=("weights",), light_client=True,
           federated="every weight set; smooth losses by SQP, the squared loss from sufficient statistics, "
                     "non-smooth losses by a level bundle method",
           estimators=("FederatedDROClassifier", "FederatedDRORegressor"),
           summary="federated DRO over client weights (Scaff-PD; AFL, CVaR, chi-square, q-FFL, ...)"),
    Family("fafl", "FairnessAwareFL", f"{_P}.minmax.fafl", light_client=True,
           federated="as FederatedDRO (its weight set is HCVaR)",
           estimators=("FairnessAwareClassifier",),
           summary="fairness-aware FL: HCVaR of the client losses (FedFair / rFedFair)"),
    Family("wasserstein", "WassersteinDRFL", f"{_P}.wasserstein.problem", weight_keys=("weights",),
           federated="its own oracle, problems.wasserstein.federated.federated_solve: each client answers for "
                     "its own ball, consensus ADMM and a dual-decomposition certificate (unbounded support)",
           estimators=("WassersteinDRClassifier", "WassersteinDRRegressor"),
           summary="Wasserstein DRFL: a transport ball around each client's empirical distribution"),
    Family("relative", "RelativeFairness", f"{_P}.relative.problem", weight_keys=("A", "B"), light_client=True,
           estimators=("RelativeFairRegressor",),
           summary="relative fairness over an integrated weight set (A, B, phi)"),
    Family("deo", "DEOConstrained", f"{_P}.deo.problem", vertical=True, estimators=("DEOClassifier",),
           summary="vertical FL with a difference-of-equal-opportunity constraint"),
)}


def family(name: str) -> Family:
    """The :class:`Family` named ``name``; an unknown name raises
    :class:`~drflmodel.errors.InvalidParameterError` listing the families."""
    if name not in FAMILIES:
        raise InvalidParameterError(f"family must be one of {', '.join(FAMILIES)}; got {name!r}")
    return FAMILIES[name]


def by_class(cls_name: str) -> Family | None:
    """The family whose class is named ``cls_name`` (``None`` if none is)."""
    return next((f for f in FAMILIES.values() if f.cls == cls_name), None)


def register(entry: Family) -> None:
    """Add a family (tests and extensions; the built-in ones are the literal above). Its class name
    must be new: the lazy names of ``drflmodel`` are keyed by it."""
    if not isinstance(entry, Family):
        raise InvalidParameterError(f"entry must be a Family; got {type(entry).__name__}")
    if entry.name in FAMILIES or by_class(entry.cls) is not None:
        raise InvalidParameterError(f"a family named {entry.name!r} or with class {entry.cls!r} is registered")
    FAMILIES[entry.name] = entry


def unregister(name: str) -> None:
    """Remove a family added by :func:`register`."""
    family(name)
    del FAMILIES[name]
