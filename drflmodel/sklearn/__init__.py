"""scikit-learn estimators over drflmodel's certified oracles (optional: ``pip install
'drflmodel[sklearn]'``, scikit-learn >= 1.6).

Each estimator stores its parameters in the constructor; ``fit`` builds the exact oracle and solves
it with a certificate (``status_``, ``lower_bound_``, ``upper_bound_``, ``gap_``, ``solution_``).
The client of each row is passed at ``fit(X, y, clients=...)``; the protected group of each row at
``DEOClassifier.fit(X, y, sensitive_features=...)``. With metadata routing enabled
(``sklearn.set_config(enable_metadata_routing=True)``), ``est.set_fit_request(clients=True)``
routes the client labels through ``Pipeline`` and ``GridSearchCV``.

The classifiers follow scikit-learn's conventions: labels of any sortable type (``classes_``),
``coef_`` of shape ``(n_classes, n_features)`` (``(1, n_features)`` for two classes), an
unpenalized intercept with ``fit_intercept=True`` where the family allows it, and more than two
classes through the softmax loss in ``FederatedDROClassifier``, ``FairnessAwareClassifier`` and
``WassersteinDRClassifier`` (``DEOClassifier`` is binary and says why).

>>> from drflmodel.sklearn import FederatedDROClassifier          # doctest: +SKIP
>>> clf = FederatedDROClassifier(weights="cvar", cvar_level=0.5).fit(X, y, clients=site)  # doctest: +SKIP
>>> clf.status_, clf.gap_, clf.client_weights_                     # doctest: +SKIP
"""

from __future__ import annotations

try:
    import sklearn as _sklearn
except ImportError as exc:  # pragma: no cover - exercised only without scikit-learn
    raise ImportError("drflmodel.sklearn needs scikit-learn >= 1.6: pip install 'drflmodel[sklearn]'") from exc

if tuple(int(p) for p in _sklearn.__version__.split(".")[:2] if p.isdigit()) < (1, 6):  # pragma: no cover
    raise ImportError(f"drflmodel.sklearn needs scikit-learn >= 1.6 (estimator tags, validate_data); "
                      f"found {_sklearn.__version__}")

from ._base import CertificateWarning, SingleClientWarning, expected_failed_checks  # noqa: E402
from ._deo import DEOClassifier  # noqa: E402
from ._horizontal import (FairnessAwareClassifier, FederatedDROClassifier, FederatedDRORegressor,  # noqa: E402
                          RelativeFairRegressor, WassersteinDRClassifier, WassersteinDRRegressor)

__all__ = ["FederatedDROClassifier", "FederatedDRORegressor", "FairnessAwareClassifier",
           "WassersteinDRClassifier", "WassersteinDRRegressor", "RelativeFairRegressor", "DEOClassifier",
           "CertificateWarning", "SingleClientWarning", "expected_failed_checks"]
