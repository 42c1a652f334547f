"""What every drflmodel estimator shares: input validation, the intercept, the certified solve,
the fitted attributes in scikit-learn's shapes, and the parameters they do not have.

Conventions (drflmodel's, stated in scikit-learn's vocabulary):

* the oracle's model is one vector :math:`\\theta` in the class-major layout of
  :mod:`drflmodel.layout`; ``fit_intercept=True`` prepends the constant column of
  :func:`drflmodel.datasets.add_intercept` and, where the family allows it (federated DRO, FAFL),
  leaves its coefficient out of the ridge term, as scikit-learn does (``penalize_intercept=False``
  in the core). The fitted ``coef_`` / ``intercept_`` are
  :meth:`drflmodel.layout.ParameterLayout.to_sklearn` of :math:`\\theta`: shapes ``(K, d)`` /
  ``(K,)`` for a classifier (``(1, d)`` / ``(1,)`` for two classes), ``(d,)`` / float for a
  regressor; without ``fit_intercept`` the intercept is 0;
* ``fit`` solves the exact oracle and keeps its certificate: ``status_``, ``lower_bound_``,
  ``upper_bound_``, ``gap_`` (absolute, :math:`U-L`), ``relative_gap_`` and the whole
  :class:`~drflmodel.solution.Solution` as ``solution_`` (without its back-reference to the CVXPY
  problem, so that fitted estimators stay small and picklable). A status other than
  ``"optimal"`` is kept and announced with a :class:`CertificateWarning`; ``"failed"`` and
  ``"infeasible"`` raise :class:`~drflmodel.errors.SolverError`;
* a parameter of scikit-learn's linear models that has no counterpart here (``penalty``, ``C``,
  ...) is refused by name with what to use instead, and so is a renamed parameter (``alpha`` of the
  federated DRO estimators, now ``cvar_level``: scikit-learn sets ``alpha`` on every regressor that
  has one, as a regularization strength).

Class labels and predictions of the classifiers: :mod:`drflmodel.sklearn._classifier`.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import losses as _losses
from .._validation import check_bool
from ..errors import InvalidDataError, InvalidParameterError, SolverError
from ..layout import ParameterLayout

__all__ = ["CertificateWarning", "SingleClientWarning", "OracleEstimator", "RegressorPredictMixin",
           "expected_failed_checks", "repeated_rows"]


class CertificateWarning(ConvergenceWarning):
    """The fitted model's certificate did not close: status ``"optimal_within_gap"`` (a valid
    gap above ``gap_tol``) or ``"local"`` (a stationary point with a lower bound, non-convex case)."""


class SingleClientWarning(UserWarning):
    """All rows form one client, so the client-weight set is the single point {1} and the fit is
    ordinary (ridge-regularized) empirical risk minimization with the chosen loss."""


def expected_failed_checks(estimator) -> dict:
    """The scikit-learn common checks that cannot apply to ``estimator``, ``{check name: reason}``
    (scikit-learn >= 1.6: ``parametrize_with_checks(..., expected_failed_checks=expected_failed_checks)``
    or ``check_estimator(est, expected_failed_checks=expected_failed_checks(est))``)."""
    return dict(getattr(estimator, "_unsupported_checks", {}))


def repeated_rows(sample_weight, n_samples: int) -> np.ndarray:
    """The row indices of a fit with integer ``sample_weight``: row *j* repeated ``sample_weight[j]``
    times (scikit-learn's meaning of an integer weight). Raises
    :class:`~drflmodel.errors.InvalidDataError` (a ``ValueError``) for a weight that is not a whole
    number >= 0, a wrong shape, or weights that are all zero."""
    w = np.asarray(sample_weight, dtype=float)
    if w.ndim != 1 or w.shape[0] != n_samples:
        raise InvalidDataError(f"sample_weight must hold one weight per row, shape ({n_samples},); got shape {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise InvalidDataError("sample_weight must be finite and >= 0")
    if np.any(w != np.round(w)):
        k = int(np.flatnonzero(w != np.round(w))[0])
        raise InvalidDataError(
            f"sample_weight must hold whole numbers (how many times each row counts); row {k} has {float(w[k])!r}: "
            "the oracles' certificates are written for clients whose rows count equally, so a fractional "
            "weight has no exact model here")
    if w.sum() <= 0:
        raise InvalidDataError("sample_weight is zero for every row: nothing to fit")
    return np.repeat(np.arange(n_samples), w.astype(np.int64))


def _loss_name(loss) -> str:
    return loss if isinstance(loss, str) else getattr(loss, "name", type(loss).__name__)


#: parameters of scikit-learn's linear models that drflmodel's estimators do not have: what to use
_NOT_PARAMETERS = {
    "penalty": "the penalty is always the ridge term l2/2*||coef||^2 (scikit-learn's penalty='l2'; "
               "penalty=None is l2=0); 'l1' and 'elasticnet' do not map",
    "C": "set l2 = 1/(C*n_samples) (scikit-learn's C-weighted objective over C*n_samples; see the docstring)",
    "l1_ratio": "there is no L1 term: the penalty is the ridge term l2/2*||coef||^2",
    "multi_class": "more than two classes are always fitted with the softmax (multinomial) loss",
    "class_weight": "rows are weighted through their client's weight, not by class",
    "dual": "the oracle solves the exact problem and certifies it; there is no dual option",
    "intercept_scaling": "with fit_intercept=True the intercept is not penalized, so it needs no scaling",
}


def refuse_undeclared_parameters(estimator_type, params) -> None:
    """Refuse, with an :class:`InvalidParameterError` that says what to use instead, a keyword that
    ``estimator_type`` does not declare but a user may bring from elsewhere: a renamed parameter
    (``estimator_type._renamed_parameters``: old name -> new name) or one of scikit-learn's
    (:data:`_NOT_PARAMETERS`). Other names are left to Python's and scikit-learn's own errors."""
    declared = estimator_type._get_param_names()
    for key in params:
        if key in declared:
            continue
        new = estimator_type._renamed_parameters.get(key)
        if new is not None:
            raise InvalidParameterError(f"{key} is now {new} in {estimator_type.__name__} (scikit-learn "
                                        f"reserves {key} for a regularization strength); pass {new}=...")
        if key in _NOT_PARAMETERS:
            raise InvalidParameterError(f"{key} is not a parameter of {estimator_type.__name__}: "
                                        f"{_NOT_PARAMETERS[key]}")


#: scikit-learn's check that weighted and repeated rows give the same model to 1e-7 relative: the two
#: fits see the rows in another order and each stops within its certificate's tolerance (gap_tol,
#: default 1e-6 relative on the objective), so their predicted probabilities agree to ~1e-6, not 1e-7
#: (tests/test_sklearn.py checks the equivalence itself, with the rows in the same order)
SAMPLE_WEIGHT_TOLERANCE = {
    "check_sample_weight_equivalence_on_dense_data":
        "weighted and repeated rows fit the same objective; the two fits stop within the certificate's "
        "gap_tol (1e-6 relative), so probabilities agree to ~1e-6, not the check's 1e-7"}


class OracleEstimator(BaseEstimator):
    """Base class: subclasses set ``_task`` and ``_losses`` (allowed loss names) and implement
    ``fit`` with the helpers below (``_resolve_loss``, ``_validate_fit_data``, ``_fit_targets``,
    ``_design``, ``_solve``, ``_layout``, ``_set_fitted``)."""

    _task = "regression"
    _losses: tuple = ()
    #: common checks that cannot apply, with a one-line reason (see :func:`expected_failed_checks`)
    _unsupported_checks: dict = {}
    #: whether ``fit_intercept=True`` leaves the intercept out of the ridge term (the family's
    #: ``penalize_intercept=False``); families that cannot keep it as a penalized column
    _unpenalized_intercept = False
    #: old parameter name -> new name (refused by name, with the new one: see ``__new__``)
    _renamed_parameters: dict = {}

    def __new__(cls, *args, **kwargs):
        # runs before __init__ sees the keywords: a renamed or scikit-learn-only parameter gets an
        # error saying what to use instead of Python's "unexpected keyword argument"
        refuse_undeclared_parameters(cls, kwargs)
        return super().__new__(cls)

    def set_params(self, **params):
        """scikit-learn's ``set_params``; a renamed or scikit-learn-only parameter is refused as in
        the constructor."""
        refuse_undeclared_parameters(type(self), [k for k in params if "__" not in k])
        return super().set_params(**params)

    # ------------------------------------------------------------------ parameters
    def _resolve_loss(self) -> _losses.Loss:
        """``self.loss`` as a drflmodel loss: a name of :data:`drflmodel.losses.ALL_LOSSES`
        (default parameters) or a :class:`~drflmodel.losses.Loss` instance (e.g. ``Huber(0.5)``)."""
        loss = self.loss
        if isinstance(loss, str):
            if loss not in self._losses:
                raise InvalidParameterError(
                    f"loss must be one of {list(self._losses)} or a drflmodel.losses.Loss of one of "
                    f"them for {type(self).__name__}; got {loss!r}")
            return _losses.get(loss)
        if isinstance(loss, _losses.Loss):
            if loss.name not in self._losses:
                raise InvalidParameterError(
                    f"loss must be one of {list(self._losses)} for {type(self).__name__}; got {loss!r}")
            return loss
        raise InvalidParameterError(f"loss must be a loss name or a drflmodel.losses.Loss; got {loss!r}")

    def _solve_kwargs(self) -> dict:
        if self.solve_options is not None and not isinstance(self.solve_options, Mapping):
            raise InvalidParameterError(f"solve_options must be a dict of solve() keywords or None; "
                                        f"got {self.solve_options!r}")
        options = {} if self.solve_options is None else dict(self.solve_options)
        bad = [k for k in ("solver", "gap_tol") if k in options]
        if bad:
            raise InvalidParameterError(f"solve_options must not contain {bad[0]!r}: it is the "
                                        f"estimator parameter {bad[0]}")
        return {"solver": self.solver, "gap_tol": self.gap_tol, **options}

    # ------------------------------------------------------------------ data
    def _validate_fit_data(self, X, y):
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=self._task == "regression")
        return X, y

    def _design(self, X) -> np.ndarray:
        """The explicit design: ``[1, X]`` with ``fit_intercept``, else ``X``."""
        if check_bool(self.fit_intercept, "fit_intercept"):
            if self._unpenalized_intercept and X.shape[0] > 1:
                ones = np.flatnonzero(np.all(X == 1.0, axis=0))
                if ones.size:
                    raise InvalidDataError(
                        f"X column {int(ones[0])} is constant 1, a second intercept next to the one "
                        "fit_intercept=True adds (unpenalized); drop that column or pass fit_intercept=False")
            return np.hstack([np.ones((X.shape[0], 1)), X])
        return X

    def _layout(self, problem, design, n_outputs: int = 1) -> ParameterLayout:
        """The layout of the oracle's :math:`\\theta` with the intercept where ``_design`` put it
        (column 0) and the problem's unpenalized features (their class-shift is centred)."""
        unpenalized = problem.layout.unpenalized if hasattr(problem, "layout") else ()
        return ParameterLayout(design.shape[1], n_outputs, 0 if self.fit_intercept else None, unpenalized)

    def _fit_targets(self, y, loss):
        """``(targets, task, loss)`` as the oracle expects them (regression: as they are)."""
        return np.asarray(y, dtype=float), self._task, loss

    # ------------------------------------------------------------------ the solve
    def _solve(self, problem):
        sol = problem.solve(**self._solve_kwargs())
        if sol.status in ("failed", "infeasible") or sol.theta is None:
            attempts = sol.info.get("attempts")
            raise SolverError(f"{type(self).__name__}: the oracle returned status {sol.status!r} "
                              f"(no certified model); solver attempts: {attempts}")
        if sol.status != "optimal":
            warnings.warn(
                f"{type(self).__name__}: status {sol.status!r}, relative certificate gap "
                f"{sol.relative_gap:.2e} (gap_tol {self.gap_tol:g}); certificate: {sol.certificate}. "
                "The model is kept; see status_, lower_bound_ and upper_bound_.",
                CertificateWarning, stacklevel=3)
        return sol

    def _set_fitted(self, sol, layout: ParameterLayout, sign: float = 1.0) -> None:
        """``coef_`` / ``intercept_`` in scikit-learn's shapes (module docstring) and the certificate."""
        theta = sign * np.asarray(sol.theta, dtype=float)
        self.coef_, self.intercept_ = layout.to_sklearn(theta, regressor=self._task == "regression")
        self.status_ = sol.status
        self.lower_bound_ = float(sol.lower_bound)
        self.upper_bound_ = float(sol.upper_bound)
        self.gap_ = float(sol.gap)
        self.relative_gap_ = float(sol.relative_gap)
        self.solution_ = dataclasses.replace(sol, problem=None)

    # ------------------------------------------------------------------ prediction
    def _scores(self, X) -> np.ndarray:
        """``X @ coef_.T + intercept_``: shape ``(n,)`` for a regressor, ``(n, K')`` for a classifier."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return X @ self.coef_.T + self.intercept_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = False
        return tags


class RegressorPredictMixin:
    """``predict`` = :math:`x^\\top` ``coef_`` + ``intercept_``."""

    def predict(self, X) -> np.ndarray:
        return self._scores(X)
