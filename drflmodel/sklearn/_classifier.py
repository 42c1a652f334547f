"""Class labels and predictions of drflmodel's classifiers, as scikit-learn's linear classifiers
have them.

* ``classes_`` are the sorted distinct labels of ``y`` (any hashable, mutually orderable values);
* two classes: the oracle fits a binary loss on the labels :math:`\\{-1,+1\\}` (``classes_[1]`` is
  +1), the score is :math:`x^\\top` ``coef_[0]`` + ``intercept_[0]`` and a positive
  ``decision_function`` predicts ``classes_[1]``;
* :math:`K>2` classes (families with a multi-class oracle, ``loss="logistic"``): the softmax
  cross-entropy :class:`drflmodel.losses.Multinomial` on the class indices;
  ``decision_function`` is the :math:`K` scores :math:`x^\\top` ``coef_[k]`` + ``intercept_[k]``,
  ``predict`` their argmax and ``predict_proba`` their softmax -- scikit-learn's multinomial
  ``LogisticRegression``. Binary-only families refuse :math:`K>2` with the reason.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit, log_softmax, softmax
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets

from .. import losses as _losses
from ..data import class_indices
from ..errors import InvalidDataError
from ._base import _loss_name

__all__ = ["OracleClassifierMixin"]


class OracleClassifierMixin:
    """Labels of any type, ``classes_``, ``decision_function``, ``predict`` and (logistic loss)
    ``predict_proba`` / ``predict_log_proba`` (module docstring)."""

    _task = "classification"
    #: why the family cannot fit more than two classes; ``None`` if it can (with the logistic loss)
    _binary_only_reason: str | None = None

    def _fit_targets(self, y, loss):
        """``(targets, task, loss)`` for the oracle, and ``classes_``: labels :math:`\\pm1` and the
        binary loss for two classes, class indices and the softmax loss for more."""
        name = type(self).__name__
        y = np.asarray(y)
        if y.dtype.kind == "O":
            class_indices(y)        # missing, unhashable or unorderable labels: an error naming y
        check_classification_targets(y)
        classes, index = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise InvalidDataError(f"y: {name} needs at least two classes; got 1 class ({classes.tolist()})")
        self.classes_ = classes
        if classes.size == 2:
            return np.where(index == 1, 1.0, -1.0), "classification", loss
        reason = self._binary_only_reason
        if reason is None and loss.name != "logistic":
            reason = (f"loss={loss.name!r} is a margin loss for two classes (loss='logistic' fits the "
                      "softmax loss when y has more)")
        if reason is not None:
            raise ValueError(f"Only binary classification is supported by {name}: {reason}; "
                             f"y has {classes.size} classes")
        return index.astype(float), "multiclass", _losses.Multinomial()

    def decision_function(self, X) -> np.ndarray:
        """Two classes: :math:`x^\\top` ``coef_[0]`` + ``intercept_[0]``, shape ``(n,)`` (positive
        means ``classes_[1]``); :math:`K>2`: the class scores, shape ``(n, K)``."""
        scores = self._scores(X)
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def predict(self, X) -> np.ndarray:
        scores = self.decision_function(X)
        return self.classes_[(scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)]

    def _has_logistic_loss(self) -> bool:
        return _loss_name(self.loss) == "logistic"

    @available_if(lambda self: self._has_logistic_loss())
    def predict_proba(self, X) -> np.ndarray:
        """(logistic loss only) The model's class probabilities, columns ordered like ``classes_``:
        :math:`\\sigma(s)` for two classes, :math:`\\mathrm{softmax}(s)` over :math:`K>2` scores."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            p = expit(scores)
            return np.column_stack([1.0 - p, p])
        return softmax(scores, axis=1)

    @available_if(lambda self: self._has_logistic_loss())
    def predict_log_proba(self, X) -> np.ndarray:
        """(logistic loss only) The logarithm of :meth:`predict_proba`, computed without overflow."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return np.column_stack([log_expit(-scores), log_expit(scores)])
        return log_softmax(scores, axis=1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = self._binary_only_reason is None and self._has_logistic_loss()
        return tags
