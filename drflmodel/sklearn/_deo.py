"""``DEOClassifier``: a linear classifier under an equal-opportunity (DEO) constraint, the exact
oracle of fair vertical FL (``drflmodel.DEOConstrained``), with the protected groups passed at
``fit`` as ``sensitive_features`` (as in Fairlearn)."""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin

from ..data import VerticalFederation
from ..errors import InvalidDataError, InvalidParameterError
from ..problems.deo import DEOConstrained
from ._base import OracleEstimator
from ._classifier import OracleClassifierMixin

__all__ = ["DEOClassifier"]

DEO_LOSSES = ("logistic", "hinge", "smooth_hinge", "squared")

_NEEDS_GROUPS = "fit needs sensitive_features (one group label per row); the common check calls fit(X, y)"
#: scikit-learn (1.9) common checks that fit without sensitive_features, hence cannot apply
UNSUPPORTED_CHECKS = {name: _NEEDS_GROUPS for name in (
    "check_classifier_data_not_an_array", "check_classifiers_classes", "check_classifiers_train",
    "check_decision_proba_consistency", "check_dict_unchanged", "check_dont_overwrite_parameters",
    "check_dtype_object", "check_estimators_dtypes", "check_estimators_fit_returns_self",
    "check_estimators_nan_inf", "check_estimators_overwrite_params", "check_estimators_pickle",
    "check_f_contiguous_array_estimator", "check_fit2d_1feature", "check_fit2d_predict1d",
    "check_fit_check_is_fitted", "check_fit_idempotent", "check_fit_score_takes_y",
    "check_methods_sample_order_invariance", "check_methods_subset_invariance", "check_n_features_in",
    "check_n_features_in_after_fitting", "check_pipeline_consistency", "check_positive_only_tag_during_fit",
    "check_readonly_memmap_input", "check_supervised_y_2d")}


def _group_codes(sensitive_features, n: int):
    """``(codes, groups)``: 0 for the first of the two sorted values (group a), 1 for the second."""
    s = np.asarray(sensitive_features, dtype=object)
    if s.ndim == 2 and s.shape[1] == 1:
        s = s[:, 0]
    if s.ndim != 1:
        raise InvalidDataError(f"sensitive_features must be one column (one group label per row); "
                               f"got shape {s.shape}")
    if s.shape[0] != n:
        raise InvalidDataError(f"sensitive_features has {s.shape[0]} rows but X has {n}")
    values = [v.item() if hasattr(v, "item") else v for v in s]
    if any(v is None or (isinstance(v, float) and v != v) for v in values):
        raise InvalidDataError("sensitive_features contains missing values")
    try:
        groups = sorted(set(values))
    except TypeError:
        raise InvalidDataError("sensitive_features: labels must be all strings or all numbers") from None
    if len(groups) != 2:
        raise InvalidDataError(f"sensitive_features must hold exactly two groups; got {len(groups)}: "
                               f"{groups[:6]}")
    return np.array([0 if v == groups[0] else 1 for v in values]), np.array(groups, dtype=object)


class DEOClassifier(OracleClassifierMixin, ClassifierMixin, OracleEstimator):
    """Linear binary classifier with a bound on the difference of equal opportunity (DEO),
    solved exactly with a certificate (fair vertical FL paper, problem (1)-(4)):

    .. math:: \\min_\\theta\\ \\frac1n\\sum_i l(x_i^\\top\\theta, y_i)+\\frac{\\ell_2}2\\|\\theta\\|^2
              \\quad\\text{s.t.}\\quad |\\hat l_f^a(\\theta)-\\hat l_f^b(\\theta)|\\le\\varepsilon,

    where :math:`\\hat l_f^s` is the mean fairness loss over the rows of group *s* with the
    favourable label. ``fit(X, y, sensitive_features=...)`` takes one group label per row, with
    exactly two groups (the first in sorted order is group a).

    The centralized oracle does not depend on how the features are split between parties, so
    the estimator uses one block; build a :class:`drflmodel.VerticalFederation` (e.g.
    ``VerticalFederation.from_dataframe``) to run the distributed solver.

    Parameters
    ----------
    loss : ``"logistic"`` (default), ``"hinge"``, ``"smooth_hinge"``, ``"squared"`` (on ±1 labels).
    eps : DEO tolerance :math:`\\varepsilon\\ge0` (default 0.05).
    fairness_loss : ``"linear"`` (default; convex, always exact), ``"squared"`` or ``"same"``
        (the objective loss; non-convex unless certified, then status ``"local"``).
    tolerance_convention : ``"deo"`` (default) or ``"donini"`` (see ``DEOConstrained``).
    pos_label : the favourable class (mapped to +1 inside the oracle); default ``classes_[1]``.
        Predictions follow scikit-learn's orientation whatever ``pos_label`` is.
    l2 : ridge weight (default 1e-3; > 0 makes the Lagrangian certificate solver-independent).
    fit_intercept : prepend the explicit constant column. Unlike scikit-learn's intercept, ``l2``
        penalizes it (the DEO oracle has no unpenalized coordinate).
    solver, gap_tol, solve_options : as for the other drflmodel estimators.

    Binary only: the DEO constraint compares the groups' rates of the favourable outcome, so more
    than two classes are refused.

    Attributes
    ----------
    coef_, intercept_ (shapes ``(1, n_features)`` and ``(1,)``, as scikit-learn's), classes_,
    groups_ (the two sensitive values: group a, group b), pos_label_, status_, lower_bound_,
    upper_bound_, gap_, relative_gap_, multipliers_ (:math:`\\lambda_1, \\lambda_2` of the two DEO
    constraints), solution_, n_features_in_.
    """

    _losses = DEO_LOSSES
    _unsupported_checks = UNSUPPORTED_CHECKS
    _binary_only_reason = ("DEO is binary by definition (equal opportunity of the favourable outcome, "
                           "one class against the other)")

    def __init__(self, loss="logistic", eps=0.05, fairness_loss="linear", tolerance_convention="deo",
                 pos_label=None, l2=1e-3, fit_intercept=True, solver=None, gap_tol=1e-6,
                 solve_options=None):
        self.loss = loss
        self.eps = eps
        self.fairness_loss = fairness_loss
        self.tolerance_convention = tolerance_convention
        self.pos_label = pos_label
        self.l2 = l2
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.gap_tol = gap_tol
        self.solve_options = solve_options

    def fit(self, X, y, sensitive_features=None):
        """Fit under the DEO constraint.

        Parameters
        ----------
        X : array of shape (n_samples, n_features).
        y : two classes, any hashable, orderable labels.
        sensitive_features : one protected-group label per row, exactly two groups; required.
        """
        loss = self._resolve_loss()
        X, y = self._validate_fit_data(X, y)
        y_pm, _, loss = self._fit_targets(y, loss)
        if sensitive_features is None:
            raise InvalidDataError("DEOClassifier.fit needs sensitive_features= (one protected-group "
                                   "label per row, two groups); the DEO constraint is defined by them")
        codes, groups = _group_codes(sensitive_features, X.shape[0])
        if self.pos_label is None:
            pos = self.classes_[1]
        elif self.pos_label in self.classes_.tolist():
            pos = self.pos_label
        else:
            raise InvalidParameterError(f"pos_label must be one of the classes {self.classes_.tolist()}; "
                                        f"got {self.pos_label!r}")
        sign = 1.0 if pos == self.classes_[1] else -1.0
        design = self._design(X)
        vfed = VerticalFederation([design], sign * y_pm, codes, active=[0])
        problem = DEOConstrained(vfed, loss, self.eps, fairness_loss=self.fairness_loss, l2=self.l2,
                                 tolerance_convention=self.tolerance_convention)
        sol = self._solve(problem)
        self._set_fitted(sol, self._layout(problem, design), sign=sign)
        self.groups_ = groups
        self.pos_label_ = pos
        self.multipliers_ = np.array([sol.duals.get("lambda1", np.nan), sol.duals.get("lambda2", np.nan)],
                                     dtype=float)
        return self
