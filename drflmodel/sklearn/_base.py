"""What every drflmodel estimator shares: input validation, the explicit intercept column, the
mapping of two class labels to {-1, +1}, the certified solve and the fitted attributes.

Conventions (drflmodel's, stated in scikit-learn's vocabulary):

* the model is one vector :math:`\\theta`; ``fit_intercept=True`` prepends the explicit constant
  column of :func:`drflmodel.datasets.add_intercept`, so ``intercept_ = theta[0]`` and
  ``coef_ = theta[1:]``. The intercept is an ordinary coordinate: the ridge term ``l2`` and, for
  the Wasserstein estimators, the transport cost apply to it too;
* ``coef_`` is 1-D (binary classification and single-target regression);
* classifiers accept any two labels: ``classes_`` holds them sorted, ``classes_[1]`` is +1 and a
  positive ``decision_function`` predicts ``classes_[1]`` (scikit-learn's convention);
* ``fit`` solves the exact oracle and keeps its certificate: ``status_``, ``lower_bound_``,
  ``upper_bound_``, ``gap_`` (absolute, :math:`U-L`), ``relative_gap_`` and the whole
  :class:`~drflmodel.solution.Solution` as ``solution_`` (without its back-reference to the CVXPY
  problem, so that fitted estimators stay small and picklable). A status other than
  ``"optimal"`` is kept and announced with a :class:`CertificateWarning`; ``"failed"`` and
  ``"infeasible"`` raise :class:`~drflmodel.errors.SolverError`.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator
from sklearn.utils.metaestimators import available_if
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import losses as _losses
from ..errors import InvalidParameterError, SolverError

__all__ = ["CertificateWarning", "SingleClientWarning", "OracleEstimator", "BinaryClassifierMixin",
           "expected_failed_checks"]


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


def _loss_name(loss) -> str:
    return loss if isinstance(loss, str) else getattr(loss, "name", type(loss).__name__)


class OracleEstimator(BaseEstimator):
    """Base class: subclasses set ``_task`` and ``_losses`` (allowed loss names) and implement
    ``_problem(design, y, fit_params)`` returning ``(problem, extra_attributes)``."""

    _task = "regression"
    _losses: tuple = ()
    #: common checks that cannot apply, with a one-line reason (see :func:`expected_failed_checks`)
    _unsupported_checks: dict = {}

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
        if self.fit_intercept:
            return np.hstack([np.ones((X.shape[0], 1)), X])
        return X

    def _fit_targets(self, y) -> np.ndarray:
        """Targets as the oracle expects them (regression: as they are)."""
        return np.asarray(y, dtype=float)

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

    def _set_fitted(self, sol, sign: float = 1.0) -> None:
        theta = sign * np.asarray(sol.theta, dtype=float)
        if self.fit_intercept:
            self.intercept_ = float(theta[0])
            self.coef_ = theta[1:].copy()
        else:
            self.intercept_ = 0.0
            self.coef_ = theta.copy()
        self.status_ = sol.status
        self.lower_bound_ = float(sol.lower_bound)
        self.upper_bound_ = float(sol.upper_bound)
        self.gap_ = float(sol.gap)
        self.relative_gap_ = float(sol.relative_gap)
        self.solution_ = dataclasses.replace(sol, problem=None)

    # ------------------------------------------------------------------ prediction
    def _scores(self, X) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return X @ self.coef_ + self.intercept_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.single_output = True
        tags.target_tags.multi_output = False
        return tags


class BinaryClassifierMixin:
    """Two labels of any type mapped to {-1, +1}; ``predict``, ``decision_function`` and (for
    the logistic loss) ``predict_proba``."""

    _task = "classification"

    def _fit_targets(self, y) -> np.ndarray:
        check_classification_targets(y)
        y_type = type_of_target(y, input_name="y")
        classes = np.unique(y)
        if y_type != "binary" or classes.size != 2:
            if classes.size < 2:
                raise ValueError(f"{type(self).__name__} needs two classes in y; got 1 class "
                                 f"({classes.tolist()})")
            raise ValueError(f"Only binary classification is supported. The type of the target is "
                             f"{y_type} ({classes.size} classes) for {type(self).__name__}.")
        self.classes_ = classes
        return np.where(y == classes[1], 1.0, -1.0)

    def decision_function(self, X) -> np.ndarray:
        """:math:`x^\\top` ``coef_`` + ``intercept_``; positive means ``classes_[1]``."""
        return self._scores(X)

    def predict(self, X) -> np.ndarray:
        check_is_fitted(self)
        return self.classes_[(self.decision_function(X) > 0).astype(int)]

    def _has_logistic_loss(self) -> bool:
        return _loss_name(self.loss) == "logistic"

    @available_if(lambda self: self._has_logistic_loss())
    def predict_proba(self, X) -> np.ndarray:
        """(logistic loss only) Logistic model :math:`P(y=\\text{classes\\_[1]}\\mid x)=\\sigma(x^\\top\\theta)`;
        columns ordered like ``classes_``."""
        p = expit(self.decision_function(X))
        return np.column_stack([1.0 - p, p])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags


class RegressorPredictMixin:
    """``predict`` = :math:`x^\\top` ``coef_`` + ``intercept_``."""

    def predict(self, X) -> np.ndarray:
        return self._scores(X)
