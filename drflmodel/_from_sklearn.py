r"""From a scikit-learn linear model to the objective its federated training minimizes:
:func:`from_sklearn`.

FedAvg-style training of a scikit-learn estimator (each client fits the estimator on its own rows,
the server averages the parameters weighted by the clients' numbers of examples -- Flower's
``FedAvg`` with ``num-examples``, as in Flower's scikit-learn quickstart) aims at the
**example-weighted average of the clients' own scikit-learn objectives**, each divided by the
client's number of rows :math:`N_i` so that it reads "mean loss + penalty":

.. math::

    F(\theta)=\sum_{i=1}^J\frac{N_i}N\Big(\frac1{N_i}\sum_{j}\ell(\theta;x_{ij},y_{ij})
      +\frac{\kappa}{N_i}\,\tfrac12\|w\|^2\Big)
    =\frac1N\sum_{ij}\ell+\frac{J\kappa}N\,\tfrac12\|w\|^2 ,

i.e. a :class:`~drflmodel.FederatedDRO` with the fixed weights :math:`p_i=N_i/N`
(``sets.HCVaR(p, 1)``) and a ridge :math:`\ell_2=J\kappa/N` -- **J times the pooled fit's** (one
client penalized by :math:`1/(2CN_i)\|w\|^2` means :math:`\ell_2=J/(CN)` overall). Per estimator
(:math:`w` excludes the intercept unless said otherwise):

=====================================  ==========================  ============================  ====================
estimator                              loss                        :math:`\ell_2`                intercept
=====================================  ==========================  ============================  ====================
``LogisticRegression`` (2 classes)     ``Logistic`` (classes_[1]    :math:`J/(CN)` (0 if           unpenalized
                                       = +1)                        ``C=inf``)                    (``liblinear``: penalized)
``LogisticRegression`` (K >= 3)        ``Multinomial``              :math:`J/(CN)`                 unpenalized
``Ridge``                              ``Squared`` (:math:`z^2`)    :math:`2J\alpha/N`             unpenalized
``LinearRegression``                   ``Squared``                  0                              --
``SGDClassifier(loss="log_loss")``     ``Logistic``                 :math:`\alpha`                 unpenalized
``SGDClassifier(loss="hinge")``        ``Hinge``                    :math:`\alpha`                 unpenalized
``LinearSVC(loss="hinge")``            ``Hinge``                    :math:`J/(CN)`                 penalized (``intercept_scaling=1``)
=====================================  ==========================  ============================  ====================

Anything else is refused by name -- other estimators, ``l1``/elastic-net penalties, class
weights, ``SGDClassifier``'s other losses, ``LinearSVC``'s default squared hinge (not in the loss
catalogue), one-vs-rest multi-class fits (``SGDClassifier``, ``LinearSVC``, ``liblinear``: K
separate objectives, not one), ``positive=True`` (a constraint) -- with the reason.

The **parameter map** (:class:`ParameterMap`) converts between the arrays a Flower app ships --
``[coef_, intercept_]`` (``[coef_]`` without an intercept), scikit-learn's shapes -- and
drflmodel's :math:`\theta` (:mod:`drflmodel.layout`: the intercept is the constant column 0,
class-major); every shape is checked exactly, nothing is reshaped or guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .data import Federation
from .errors import InvalidDataError, InvalidParameterError

__all__ = ["from_sklearn", "sklearn_site", "SklearnObjective", "ParameterMap", "SUPPORTED_ESTIMATORS"]

SUPPORTED_ESTIMATORS = ("LogisticRegression", "Ridge", "LinearRegression", "SGDClassifier", "LinearSVC")


class ParameterMap:
    """``[coef_, intercept_]`` (the order a Flower app ships them) <-> :math:`\\theta`.

    Attributes ``layout`` (:class:`~drflmodel.layout.ParameterLayout`), ``names`` and ``shapes``
    (the arrays expected, in order), ``regressor``."""

    def __init__(self, layout, regressor: bool, fit_intercept: bool):
        self.layout, self.regressor, self.fit_intercept = layout, bool(regressor), bool(fit_intercept)
        d_prime = layout.n_features - (1 if fit_intercept else 0)
        K = layout.n_outputs
        rows = 1 if K in (1, 2) else K
        coef = (d_prime,) if regressor else (rows, d_prime)
        self.names = ["coef_", "intercept_"] if fit_intercept else ["coef_"]
        self.shapes = [coef, () if regressor else (rows,)] if fit_intercept else [coef]

    def to_theta(self, arrays) -> np.ndarray:
        """:math:`\\theta` from the arrays ``[coef_, intercept_]`` (a list, Flower's ``ArrayRecord``,
        or a fitted scikit-learn estimator, whose ``coef_`` and ``intercept_`` are read); raises
        :class:`~drflmodel.errors.InvalidDataError` naming the array and both shapes on any
        mismatch, and for anything else."""
        if hasattr(arrays, "to_numpy_ndarrays"):
            arrays = arrays.to_numpy_ndarrays()
        elif hasattr(arrays, "get_params") and hasattr(arrays, "fit"):       # an estimator
            if not hasattr(arrays, "coef_"):
                raise InvalidDataError(f"{type(arrays).__name__} is not fitted (it has no coef_): fit it, or pass "
                                       f"the arrays [coef_, intercept_] of the model")
            arrays = [arrays.coef_, arrays.intercept_] if self.fit_intercept else [arrays.coef_]
        if isinstance(arrays, np.ndarray) or not hasattr(arrays, "__iter__"):
            raise InvalidDataError(f"to_theta takes the list of arrays [coef_, intercept_] (what a Flower client "
                                   f"ships), an ArrayRecord or a fitted estimator; got {type(arrays).__name__}")
        arrays = [np.asarray(a, float) for a in arrays]
        if len(arrays) != len(self.shapes):
            raise InvalidDataError(
                f"the model has {len(arrays)} array(s) of shapes {[a.shape for a in arrays]}; expected "
                f"{len(self.shapes)}: {', '.join(f'{n} {s}' for n, s in zip(self.names, self.shapes))}")
        for name, shape, a in zip(self.names, self.shapes, arrays):
            ok = a.shape == shape or (self.regressor and name == "intercept_" and a.shape == (1,))
            if not ok:
                raise InvalidDataError(f"{name} has shape {a.shape}; this model's {name} has shape {shape} "
                                       f"(refusing to reshape)")
        coef = arrays[0]
        intercept = np.atleast_1d(arrays[1]) if self.fit_intercept else None
        return self.layout.from_sklearn(coef, intercept)

    def to_arrays(self, theta) -> list[np.ndarray]:
        """The arrays of :math:`\\theta` in scikit-learn's shapes (the initial arrays of a run)."""
        coef, intercept = self.layout.to_sklearn(theta, regressor=self.regressor)
        if self.regressor:
            return [coef, np.asarray(intercept, float)] if self.fit_intercept else [coef]
        return [coef, intercept] if self.fit_intercept else [coef]

    def to_dict(self) -> dict:
        return {"names": self.names, "shapes": [list(s) for s in self.shapes], "regressor": self.regressor,
                "layout": self.layout.to_dict()}

    def __repr__(self) -> str:
        return f"ParameterMap({', '.join(f'{n}{s}' for n, s in zip(self.names, self.shapes))})"


@dataclass
class SklearnObjective:
    """The result of :func:`from_sklearn`: the ``problem`` (a drflmodel problem), the parameter
    map ``parameters``, the ``estimator``'s name and the objective in words (``description``).
    Unpacks as ``problem, parameters = dm.from_sklearn(...)``."""

    problem: object
    parameters: ParameterMap
    estimator: str
    description: str

    def __iter__(self):
        return iter((self.problem, self.parameters))

    def to_dict(self) -> dict:
        from .solution import jsonable

        prob = self.problem
        return jsonable({"estimator": self.estimator, "description": self.description,
                         "loss": prob.loss.to_dict(), "l2": prob.l2, "weights": prob.weights.to_dict(),
                         "penalize_intercept": prob.penalize_intercept, "parameters": self.parameters.to_dict()})


def _refuse(name: str, what: str) -> InvalidParameterError:
    return InvalidParameterError(f"from_sklearn: {name}({what}) does not map to a drflmodel objective")


def _ridge_only(est, name: str, C_name: str | None = None) -> bool:
    """``True`` if the estimator's penalty is l2, ``False`` if there is none; refuses the others."""
    params = est.get_params()
    penalty = params.get("penalty", "l2")
    l1_ratio = params.get("l1_ratio", 0.0)
    if penalty in ("l1", "elasticnet"):
        raise _refuse(name, f"penalty={penalty!r}") from None
    if l1_ratio not in (None, 0, 0.0) and (penalty == "elasticnet" or name == "LogisticRegression"):
        raise InvalidParameterError(f"from_sklearn: {name}(l1_ratio={l1_ratio!r}) adds an l1 penalty, which "
                                    "drflmodel's families cannot express (they have a ridge term only)")
    if penalty is None:
        return False
    if C_name is not None and np.isinf(float(params[C_name])):
        return False
    return True


def _spec(est, n_classes: int):
    """``(task, loss, kappa-rule, penalize_intercept, regressor)`` of a supported estimator, with
    ``kappa(J, N)`` the drflmodel ``l2``."""
    from . import losses

    name = type(est).__name__
    params = est.get_params()
    if params.get("class_weight") not in (None,):
        raise _refuse(name, f"class_weight={params['class_weight']!r}")
    if params.get("positive"):
        raise InvalidParameterError(f"from_sklearn: {name}(positive=True) constrains the coefficients, "
                                    "which drflmodel's families cannot express")
    binary = n_classes == 2
    if name == "LogisticRegression":
        ridge = _ridge_only(est, name, "C")
        C = float(params["C"])
        liblinear = params.get("solver") == "liblinear"
        if liblinear and not binary:
            raise InvalidParameterError(
                "from_sklearn: LogisticRegression(solver='liblinear') fits one-vs-rest binary models for "
                f"{n_classes} classes: {n_classes} separate objectives, not one; use solver='lbfgs'")
        if liblinear and params.get("fit_intercept") and params.get("intercept_scaling", 1) != 1:
            raise _refuse(name, f"solver='liblinear', intercept_scaling={params['intercept_scaling']!r}")
        loss = losses.Logistic() if binary else losses.Multinomial()
        return ("classification" if binary else "multiclass", loss,
                (lambda J, N: J / (C * N)) if ridge else (lambda J, N: 0.0), liblinear, False)
    if name == "Ridge":
        alpha = params["alpha"]
        if np.ndim(alpha) != 0:
            raise _refuse(name, "alpha=<one per target>")
        return "regression", losses.Squared(), lambda J, N: 2.0 * J * float(alpha) / N, False, True
    if name == "LinearRegression":
        return "regression", losses.Squared(), lambda J, N: 0.0, False, True
    if name == "SGDClassifier":
        loss_name = params["loss"]
        if loss_name not in ("log_loss", "hinge"):
            raise InvalidParameterError(f"from_sklearn: SGDClassifier(loss={loss_name!r}) is not supported; "
                                        "loss='log_loss' (Logistic) and loss='hinge' (Hinge) are")
        if not binary:
            raise InvalidParameterError(f"from_sklearn: SGDClassifier fits one-vs-rest binary models for "
                                        f"{n_classes} classes: {n_classes} separate objectives, not one")
        ridge = _ridge_only(est, name)
        alpha = float(params["alpha"])
        loss = losses.Logistic() if loss_name == "log_loss" else losses.Hinge()
        return "classification", loss, (lambda J, N: alpha) if ridge else (lambda J, N: 0.0), False, False
    if name == "LinearSVC":
        if params["loss"] != "hinge":
            raise InvalidParameterError(
                f"from_sklearn: LinearSVC(loss={params['loss']!r}) minimizes the squared hinge, which is not "
                "in drflmodel's loss catalogue; LinearSVC(loss='hinge') is supported")
        if params.get("penalty") != "l2":
            raise _refuse(name, f"penalty={params.get('penalty')!r}")
        if not binary:
            raise InvalidParameterError(f"from_sklearn: LinearSVC fits one-vs-rest binary models for "
                                        f"{n_classes} classes: {n_classes} separate objectives, not one")
        if params.get("fit_intercept") and params.get("intercept_scaling", 1) != 1:
            raise InvalidParameterError(
                f"from_sklearn: LinearSVC(intercept_scaling={params['intercept_scaling']!r}) penalizes the "
                "intercept with a weight drflmodel's 0/1 penalty weights cannot express; use 1")
        C = float(params["C"])
        return "classification", losses.Hinge(), lambda J, N: J / (C * N), True, False
    raise InvalidParameterError(
        f"from_sklearn does not know {type(est).__module__}.{name}; supported: {', '.join(SUPPORTED_ESTIMATORS)}")


def _check_estimator(estimator) -> None:
    """A scikit-learn estimator *instance*; a name or a class is refused, saying what to pass."""
    if isinstance(estimator, type) or not hasattr(estimator, "get_params"):
        what = (f"the class {estimator.__name__}" if isinstance(estimator, type)
                else f"{type(estimator).__name__} {estimator!r}")
        example = estimator.__name__ if isinstance(estimator, type) else (
            estimator if isinstance(estimator, str) and estimator in SUPPORTED_ESTIMATORS else "LogisticRegression")
        raise InvalidParameterError(
            f"estimator must be a scikit-learn estimator instance, e.g. {example}() from sklearn.linear_model "
            f"(one of {', '.join(SUPPORTED_ESTIMATORS)}); got {what}")


def _classifier(est) -> bool:
    return type(est).__name__ in ("LogisticRegression", "SGDClassifier", "LinearSVC")


def _federation(est, X, y, clients, classes):
    """The federation FedAvg trains on: the intercept column prepended when the estimator fits one,
    labels as drflmodel expects them (+-1 with classes_[1] = +1; class indices)."""
    from ._validation import as_finite_array
    from .data import class_indices
    from .datasets import add_intercept

    X = as_finite_array(X, "X", ndim=2)
    if bool(est.get_params().get("fit_intercept", True)):
        X = add_intercept(X)
    if clients is None:
        raise InvalidParameterError("from_sklearn needs clients= (the client of each row): the objective "
                                    "is the average over clients")
    if not _classifier(est):
        target = as_finite_array(y, f"y (the target of the regressor {type(est).__name__})", ndim=1)
        return Federation.from_groups(X, target, clients, task="regression"), None
    idx, labels = class_indices(y, classes)       # missing, infinite, unknown labels refused, naming y
    if len(labels) == 2:
        return Federation.from_groups(X, np.where(idx == 1, 1.0, -1.0), clients, task="classification"), labels
    return Federation.from_groups(X, np.asarray(y, dtype=object), clients, task="multiclass",
                                  classes=labels), labels


def from_sklearn(estimator, X=None, y=None, clients=None, aggregation: str = "fedavg", federation=None,
                 classes=None) -> SklearnObjective:
    """The drflmodel problem FedAvg-style training of ``estimator`` minimizes, and the map between
    its ``[coef_, intercept_]`` and :math:`\\theta` (module docstring).

    Parameters
    ----------
    estimator : a scikit-learn estimator of :data:`SUPPORTED_ESTIMATORS` (fitted or not; only its
        parameters are read).
    X, y, clients : the rows, labels (any labels for classifiers; ``classes_`` order: sorted) and
        the client of each row.
    aggregation : ``"fedavg"`` (the example-weighted average; the only one).
    federation : instead of ``X, y, clients``: a federation already in drflmodel's form (the
        intercept column 0 when the estimator fits one; labels +-1 or class indices) -- e.g. the
        declared federation of a federated server, which has no rows.
    classes : classifiers: the class labels in order (default: the sorted labels of ``y``).
    """
    _check_estimator(estimator)
    if aggregation != "fedavg":
        raise InvalidParameterError(f"aggregation must be 'fedavg' (the example-weighted average of the "
                                    f"clients' objectives); got {aggregation!r}")
    from .problems.minmax.dro import FederatedDRO
    from .sets import HCVaR

    name = type(estimator).__name__
    if name not in SUPPORTED_ESTIMATORS:
        _spec(estimator, 2)                     # raises, naming the estimator
    if federation is None:
        if X is None or y is None:
            raise InvalidParameterError("from_sklearn needs X, y and clients, or federation=")
        federation, labels = _federation(estimator, X, y, clients, classes)
    elif X is not None or y is not None:
        raise InvalidParameterError("pass either X, y, clients or federation=, not both")
    K = federation.n_classes if federation.task == "multiclass" else 2
    task, loss, kappa, penalize_intercept, regressor = _spec(estimator, K)
    if federation.task != task:
        raise InvalidDataError(f"{name} needs task {task!r} data; the federation's task is {federation.task!r}")
    fit_intercept = bool(estimator.get_params().get("fit_intercept", True))
    if fit_intercept and federation.intercept_column != 0:
        raise InvalidDataError(f"{name}(fit_intercept=True): the federation's column 0 must be the intercept "
                               f"(all ones); its intercept column is {federation.intercept_column}")
    J, N = federation.n_clients, int(np.sum(federation.sizes))
    l2 = float(kappa(J, N))
    if not fit_intercept:
        penalize_intercept = True                  # nothing to leave out
    problem = FederatedDRO(federation, loss, weights=HCVaR(federation.proportions, 1.0), l2=l2,
                           penalize_intercept=penalize_intercept if l2 > 0 else True)
    pmap = ParameterMap(problem.layout, regressor=regressor, fit_intercept=fit_intercept)
    description = (f"sum_i (N_i/N) [mean {loss.name} loss of client i + penalty], l2 = {l2:.6g} "
                   f"({'intercept unpenalized' if not penalize_intercept else 'every coefficient penalized'}): "
                   f"what FedAvg over {J} clients training {name} aims at")
    return SklearnObjective(problem=problem, parameters=pmap, estimator=name, description=description)


def sklearn_site(estimator, X, y, classes=None, name: str | None = None):
    """One client's :class:`~drflmodel.client_oracle.Site` from the rows it trains ``estimator``
    on, in scikit-learn's form: the intercept column prepended when the estimator fits one, labels
    mapped as :func:`from_sklearn` maps them (``classes``: every class label in order; default the
    estimator's ``classes_`` -- a client that holds only some classes cannot infer them)."""
    from .client_oracle import Site
    from .data import class_indices
    from .datasets import add_intercept

    _check_estimator(estimator)
    X = np.asarray(X, float)
    if bool(estimator.get_params().get("fit_intercept", True)):
        X = add_intercept(X)
    if not _classifier(estimator):
        _, loss, _, _, _ = _spec(estimator, 2)
        return Site(X, np.asarray(y, float), loss, name=name)
    if classes is None:
        if not hasattr(estimator, "classes_"):
            raise InvalidParameterError("sklearn_site needs classes= (every class label, in order) for an "
                                        "estimator without classes_")
        classes = estimator.classes_
    labels = [c.item() if hasattr(c, "item") else c for c in classes]
    K = len(labels)
    _, loss, _, _, _ = _spec(estimator, K)
    y = np.asarray(y, dtype=object)
    unknown = sorted({v for v in y.tolist()} - set(labels), key=str)
    if unknown:
        raise InvalidDataError(f"{name or 'site'}: labels {unknown} are not among classes {labels}")
    if K == 2:
        return Site(X, np.where(y == labels[1], 1.0, -1.0), loss, name=name)
    idx, _ = class_indices(y, labels)
    return Site(X, idx, loss, n_outputs=K, name=name)
