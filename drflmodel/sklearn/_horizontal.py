"""Estimators over the horizontal (client-partitioned) oracles: federated DRO, FAFL, Wasserstein
DRFL and relative fairness. The client of each row is passed to ``fit(X, y, clients=...)``.

Clients: client *i* holds the rows whose label is the *i*-th of the sorted unique labels of
``clients`` (``client_names_``; per-client parameter vectors such as ``radius`` follow this order).
With ``clients=None`` every row belongs to one client named ``"all"``. Over one client every
client-weight set inside the simplex is the single point {1}: federated DRO, FAFL and relative
fairness then *are* ridge-regularized ERM with the chosen loss, the weight-set parameters have no
effect (they are still checked against their domain), and a :class:`SingleClientWarning` says so.
For the Wasserstein estimators one client is the classical single-ball Wasserstein DRO (no warning).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin

from .. import sets as _sets
from .._validation import check_choice, check_real
from ..data import Federation
from ..errors import InvalidDataError, InvalidParameterError
from ..problems.minmax.dro import FederatedDRO
from ..problems.minmax.fafl import FairnessAwareFL
from ..problems.relative import RelativeFairness
from ..problems.wasserstein import WassersteinDRFL
from ._base import SAMPLE_WEIGHT_TOLERANCE, OracleEstimator, RegressorPredictMixin, SingleClientWarning, repeated_rows
from ._classifier import OracleClassifierMixin

__all__ = ["FederatedDROClassifier", "FederatedDRORegressor", "FairnessAwareClassifier",
           "WassersteinDRClassifier", "WassersteinDRRegressor", "RelativeFairRegressor"]

CLASSIFICATION_LOSSES = ("logistic", "hinge", "smooth_hinge")
REGRESSION_LOSSES = ("squared", "huber", "epsilon_insensitive", "pinball")
#: the DRFL paper's regression losses (the squared loss is not Lipschitz: no Wasserstein oracle)
WASSERSTEIN_REGRESSION_LOSSES = ("huber", "epsilon_insensitive", "pinball")

#: the estimator parameter of a weight-set option whose name scikit-learn gives to something else
_PARAMETER_OF = {"alpha": "cvar_level"}
#: options of drflmodel.sets.from_name the estimators do not expose (the center is the proportions)
_FIXED_OPTIONS = ("center", "clip_alpha")


def _dro_weights() -> dict[str, tuple[str, ...]]:
    """FederatedDRO's weight sets (its registry entry) and the estimator parameters each one uses
    (the set's options, :func:`drflmodel.sets.options_of`)."""
    from ..problems.registry import family

    out = {}
    for name in family("dro").weight_set_names():
        required, optional = _sets.options_of(name)
        out[name] = tuple(_PARAMETER_OF.get(o, o) for o in (*required, *optional) if o not in _FIXED_OPTIONS)
    return out


#: FederatedDRO weight sets and the estimator parameters each one uses
DRO_WEIGHTS = _dro_weights()
#: domain of each weight-set parameter, checked even when it has no effect (one client)
_DOMAINS = {"alpha": dict(low=0.0, high=1.0, low_open=True), "rho": dict(low=0.0),
            "radius": dict(low=0.0, low_open=True), "p": dict(low=1.0, allow_inf=True),
            "q": dict(low=0.0, low_open=True), "tau": dict(low=0.0, low_open=True)}
_DOMAINS["cvar_level"] = _DOMAINS["alpha"]
_DRO_PARAMETERS = ("cvar_level", "rho", "radius", "p", "q", "tau")


def _check_unused(est, used: tuple, all_params: tuple, what: str) -> None:
    for name in all_params:
        if name not in used and getattr(est, name) is not None:
            raise InvalidParameterError(
                f"{name}={getattr(est, name)!r} has no effect with {what}; leave it None")


class _HorizontalEstimator(OracleEstimator):
    """``fit(X, y, clients=None)``: a :class:`~drflmodel.data.Federation` from the rows and their
    client labels, the subclass's oracle, a certified solve."""

    #: warn that one client makes the weight set {1} (not for Wasserstein)
    _one_client_is_erm = True

    def fit(self, X, y, clients=None, sample_weight=None):
        """Fit the certified model.

        Parameters
        ----------
        X : array of shape (n_samples, n_features).
        y : targets (classifiers: any hashable, orderable labels; two classes, or more where the
            family has a multi-class oracle).
        clients : array of n_samples client labels (strings or numbers), or ``None`` for one
            client holding every row (see the module documentation).
        sample_weight : ``None`` or n_samples whole numbers >= 0: how many times each row counts.
            The fit is then exactly the fit on the rows repeated that many times (a row of weight 0
            is left out): each client's loss is the weighted mean of its rows' losses and its share
            :math:`p_i` the sum of its weights over the total, as scikit-learn's integer weights
            mean. Fractional weights are refused: the oracles' certificates are written for clients
            whose rows count equally.
        """
        loss = self._resolve_loss()
        X, y = self._validate_fit_data(X, y)
        if sample_weight is not None:
            rows = repeated_rows(sample_weight, X.shape[0])
            if clients is not None:
                clients = np.asarray(clients, dtype=object)
                if clients.ndim != 1 or clients.shape[0] != X.shape[0]:
                    raise InvalidDataError(f"clients must hold one label per row ({X.shape[0]}); got shape "
                                           f"{clients.shape}")
                clients = clients[rows]
            X, y = X[rows], np.asarray(y)[rows]
        y_fit, task, loss = self._fit_targets(y, loss)
        design = self._design(X)
        labels = np.full(X.shape[0], "all", dtype=object) if clients is None else clients
        fed = Federation.from_groups(design, y_fit, labels, task=task)
        if fed.n_clients == 1 and self._one_client_is_erm:
            how = "clients=None" if clients is None else "clients has a single label"
            warnings.warn(f"{type(self).__name__}: {how}, so all rows form one client, the client-weight "
                          "set is {1} and this fit is ridge-regularized ERM with the chosen loss; pass "
                          "clients=... (one label per row) for the federated model", SingleClientWarning,
                          stacklevel=2)
        problem = self._problem(fed, loss)
        sol = self._solve(problem)
        self._set_fitted(sol, self._layout(problem, design, problem.layout.n_outputs))
        self.client_names_ = list(fed.names)
        self.client_weights_ = None if sol.weights is None else np.asarray(sol.weights, float)
        return self


# ================================================================================ FederatedDRO
class _FederatedDRO(_HorizontalEstimator):
    _unpenalized_intercept = True
    _renamed_parameters = {"alpha": "cvar_level"}     # scikit-learn's alpha is a regularization strength

    def _weight_set(self, fed):
        name = self.weights
        if isinstance(name, str) and name not in DRO_WEIGHTS:
            try:
                name = _sets.canonical_name(name)    # a former name warns and becomes its new one
            except InvalidParameterError:
                pass                                 # check_choice names the allowed values
        name = check_choice(name, "weights", tuple(DRO_WEIGHTS))
        used = DRO_WEIGHTS[name]
        _check_unused(self, used, _DRO_PARAMETERS, f"weights={name!r}")
        values = {}
        for param in used:
            value = getattr(self, param)
            if value is None and param == "p":
                value = 2
            if value is None:
                raise InvalidParameterError(f"weights={name!r} needs {param} (it is None)")
            values[param] = check_real(value, param, **_DOMAINS[param])
        n = fed.n_clients
        if n == 1 and name != "qffl":
            return _sets.Simplex(1)   # every set inside the simplex is {1} over one client
        options = {o: values[_PARAMETER_OF.get(o, o)] for o in sum(_sets.options_of(name), ())
                   if _PARAMETER_OF.get(o, o) in values}
        return _sets.from_name(name, n, fed.proportions, **options)

    def _problem(self, fed, loss):
        return FederatedDRO(fed, loss, weights=self._weight_set(fed), l2=self.l2,
                            penalize_intercept=not self.fit_intercept)


_DRO_DOC = """Federated distributionally robust {kind} (Scaff-PD family, ``drflmodel.FederatedDRO``):

    .. math:: \\min_\\theta\\max_{{\\lambda\\in\\Lambda}}\\sum_i\\lambda_i f_i(\\theta)-\\psi(\\lambda),\\qquad
              f_i(\\theta)=\\tfrac1{{N_i}}\\textstyle\\sum_{{j\\in\\text{{client }}i}} L_j(\\theta)
              +\\tfrac{{\\ell_2}}2\\|\\mathrm{{coef}}\\|^2,

    solved exactly with a certificate; the client of each row is passed at ``fit(X, y, clients=...)``.
    {labels}
    **Regularization, as in scikit-learn.** ``l2`` (:math:`\\ell_2`) weighs a ridge term in every
    client's objective; with ``fit_intercept=True`` the intercept is *not* in it (the core's
    ``penalize_intercept=False``), as in scikit-learn.
    {sklearn_map}

    Parameters
    ----------
    loss : {losses} or a :class:`drflmodel.losses.Loss` instance of one of them
        (default ``{default}``).
    weights : the client-weight set :math:`\\Lambda` by name: ``"simplex"`` (AFL, default),
        ``"cvar"`` (needs ``cvar_level`` in [1/n, 1]), ``"chi_square"`` (:math:`\\chi^2` penalty, needs
        ``rho >= 0``), ``"lp_ball"`` (ball of ``radius`` > 0 in the ``p``-norm (default 2) around the
        sample proportions, within the simplex), ``"hcvar"`` (needs ``cvar_level``), ``"qffl"``
        (needs ``q > 0``), ``"kl_penalty"`` (KL penalty, the tilted risk
        :math:`\\tau\\log\\frac1n\\sum_ie^{{f_i/\\tau}}`, needs ``tau > 0``). A parameter the chosen set
        does not use must stay ``None``.
    cvar_level : the CVaR level :math:`\\alpha\\in(0,1]` of ``"cvar"`` and ``"hcvar"``
        (``drflmodel.sets.CVaR(n, alpha)``: the worst :math:`\\alpha` fraction of the clients).
        Its old name ``alpha`` is refused with a pointer here: scikit-learn gives ``alpha`` to a
        regularization strength, and its common checks set it on every regressor that has one.
    rho, radius, p, q, tau : the other weight sets' parameters (see ``drflmodel.sets``).
    l2 : ridge weight :math:`\\ell_2\\ge0` (default 1e-3; see above; > 0 also makes the
        certificate's lower bound solver-independent).
    fit_intercept : fit an unpenalized intercept (default True): the constant column is prepended
        and left out of the ridge term. False: no intercept (``intercept_`` is 0).
    solver, gap_tol, solve_options : passed to the oracle's ``solve`` (solver to try first,
        relative certificate gap for ``"optimal"``, further keyword options).

    Attributes
    ----------
    coef_, intercept_ : {shapes}
    {classes}status_, lower_bound_, upper_bound_ (the certified objective interval), gap_,
    relative_gap_, client_weights_ (worst-case :math:`\\lambda^\\star`, ordered like ``client_names_``),
    client_names_, solution_ (its ``theta`` is the oracle's class-major vector, ``drflmodel.layout``),
    n_features_in_.
    """

#: the labels paragraph of the classifiers' docstrings
_CLASSIFIER_LABELS = """
    **Labels.** Any hashable, orderable labels (``classes_``, sorted). Two classes: the binary
    ``loss`` on labels :math:`\\pm1` (``classes_[1]`` is +1). :math:`K>2` classes with
    ``loss="logistic"``: the softmax cross-entropy :math:`L_j=\\log\\sum_ke^{s_{jk}}-s_{jy_j}` of
    the scores :math:`s_{jk}=x_j^\\top` ``coef_[k]`` + ``intercept_[k]``
    (``drflmodel.losses.Multinomial``), scikit-learn's multinomial ``LogisticRegression``; the
    margin losses are binary.
"""

#: the classifiers' map to LogisticRegression's C (binary and multinomial)
_LOGISTIC_C = """scikit-learn's ``LogisticRegression(C=C)`` minimizes
    :math:`\\tfrac12\\|\\mathrm{coef}\\|^2+C\\sum_{j=1}^NL_j` (binary and multinomial alike); divided
    by :math:`CN` that is the mean loss plus :math:`\\tfrac1{2CN}\\|\\mathrm{coef}\\|^2`. So over one
    client (``clients=None``), where every weight set is :math:`\\{1\\}`, ``l2 = 1/(C * n_samples)``
    fits ``LogisticRegression(C=C)``'s model, and :math:`CN` times ``upper_bound_`` is its objective."""


class FederatedDROClassifier(OracleClassifierMixin, ClassifierMixin, _FederatedDRO):
    __doc__ = _DRO_DOC.format(
        kind="classifier", losses=CLASSIFICATION_LOSSES, default="logistic", labels=_CLASSIFIER_LABELS,
        sklearn_map=_LOGISTIC_C, classes="classes_, ",
        shapes="shapes ``(K, n_features)`` and ``(K,)`` for :math:`K>2` classes,\n        "
               "``(1, n_features)`` and ``(1,)`` for two, as scikit-learn's.")
    _losses = CLASSIFICATION_LOSSES
    _unsupported_checks = SAMPLE_WEIGHT_TOLERANCE

    def __init__(self, loss="logistic", weights="simplex", cvar_level=None, rho=None, radius=None, p=None,
                 q=None, tau=None, l2=1e-3, fit_intercept=True, solver=None, gap_tol=1e-6, solve_options=None):
        self.loss = loss
        self.weights = weights
        self.cvar_level = cvar_level
        self.rho = rho
        self.radius = radius
        self.p = p
        self.q = q
        self.tau = tau
        self.l2 = l2
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.gap_tol = gap_tol
        self.solve_options = solve_options


class FederatedDRORegressor(RegressorPredictMixin, RegressorMixin, _FederatedDRO):
    __doc__ = _DRO_DOC.format(
        kind="linear regressor", losses=REGRESSION_LOSSES, default="squared", labels="", classes="",
        sklearn_map="scikit-learn's ``Ridge(alpha=a)`` minimizes\n    :math:`\\|y-X\\mathrm{coef}-b\\|^2"
                    "+a\\|\\mathrm{coef}\\|^2`; the squared loss here is :math:`(y-s)^2` (no factor 1/2),\n"
                    "    so over one client ``l2 = 2 * a / n_samples`` fits ``Ridge(alpha=a)``'s model.",
        shapes="shapes ``(n_features,)`` and a float, as scikit-learn's.")
    _losses = REGRESSION_LOSSES

    def __init__(self, loss="squared", weights="simplex", cvar_level=None, rho=None, radius=None, p=None,
                 q=None, tau=None, l2=1e-3, fit_intercept=True, solver=None, gap_tol=1e-6, solve_options=None):
        self.loss = loss
        self.weights = weights
        self.cvar_level = cvar_level
        self.rho = rho
        self.radius = radius
        self.p = p
        self.q = q
        self.tau = tau
        self.l2 = l2
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.gap_tol = gap_tol
        self.solve_options = solve_options


# ================================================================================ FAFL
class FairnessAwareClassifier(OracleClassifierMixin, ClassifierMixin, _HorizontalEstimator):
    """Fairness-aware federated classifier (FAFL / HCVaR, ``drflmodel.FairnessAwareFL``):
    :math:`\\min_\\theta f_\\alpha(\\theta)`, the HCVaR of the client losses
    :math:`f_\\alpha=\\min_\\eta\\eta+\\sum_i\\frac{p_i}{\\alpha_i}(f_i(\\theta)-\\eta)_+` (Definition 1
    of the FAFL paper), certified. Clients are passed at ``fit(X, y, clients=...)``; :math:`f_i` is
    the client's mean loss plus :math:`\\frac{\\ell_2}2\\|\\mathrm{coef}\\|^2` (the intercept
    unpenalized), and labels, more than two classes and ``l2`` versus scikit-learn's ``C`` are as
    for :class:`FederatedDROClassifier`.

    Parameters
    ----------
    loss : ``"logistic"`` (default; the softmax loss for more than two classes), ``"hinge"``,
        ``"smooth_hinge"`` or a Loss instance.
    alpha : a scalar or one level per client (ordered like ``client_names_``), each in
        :math:`[p_i, 1]` with :math:`p_i` the client's share of the rows; 1 is the average loss,
        :math:`\\alpha_i=p_i` the worst client (AFL). Default 0.5. (The FAFL paper's name; a
        classifier's ``alpha`` does not collide with scikit-learn's checks.)
    alpha_below_p : ``"error"`` (default) or ``"clip"`` (use :math:`\\max(\\alpha_i,p_i)`, which has
        the same objective, and warn).
    l2, fit_intercept, solver, gap_tol, solve_options : as for :class:`FederatedDROClassifier`.

    Attributes
    ----------
    coef_, intercept_ (shapes as scikit-learn's: ``(K, n_features)``, ``(K,)``; ``(1, n_features)``,
    ``(1,)`` for two classes), classes_, status_, lower_bound_, upper_bound_, gap_, relative_gap_,
    client_weights_, client_names_, solution_, n_features_in_.
    """

    _unsupported_checks = SAMPLE_WEIGHT_TOLERANCE

    _losses = CLASSIFICATION_LOSSES
    _unpenalized_intercept = True

    def __init__(self, loss="logistic", alpha=0.5, alpha_below_p="error", l2=1e-3, fit_intercept=True,
                 solver=None, gap_tol=1e-6, solve_options=None):
        self.loss = loss
        self.alpha = alpha
        self.alpha_below_p = alpha_below_p
        self.l2 = l2
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.gap_tol = gap_tol
        self.solve_options = solve_options

    def _problem(self, fed, loss):
        alpha = np.asarray(self.alpha, dtype=float)
        if fed.n_clients == 1:
            if alpha.ndim and alpha.shape != (1,):
                raise InvalidParameterError(f"alpha must be a scalar or a vector of length 1 (one client); "
                                            f"got shape {alpha.shape}")
            for a in np.atleast_1d(alpha):
                check_real(float(a), "alpha", **_DOMAINS["alpha"])
            alpha = 1.0       # over one client the HCVaR set is {1} for every alpha in (0, 1]
        return FairnessAwareFL(fed, loss, alpha=alpha, l2=self.l2, alpha_below_p=self.alpha_below_p,
                               penalize_intercept=not self.fit_intercept)


# ================================================================================ Wasserstein
WASSERSTEIN_WEIGHTS = ("proportions", "uniform", "simplex", "lp_ball")


class _Wasserstein(_HorizontalEstimator):
    _one_client_is_erm = False

    def _q(self, fed):
        name = check_choice(self.weights, "weights", WASSERSTEIN_WEIGHTS)
        used = ("weights_radius", "weights_p") if name == "lp_ball" else ()
        _check_unused(self, used, ("weights_radius", "weights_p"), f"weights={name!r}")
        n = fed.n_clients
        if name == "lp_ball":
            if self.weights_radius is None:
                raise InvalidParameterError("weights='lp_ball' needs weights_radius (it is None)")
            radius = check_real(self.weights_radius, "weights_radius", **_DOMAINS["radius"])
            p = check_real(2 if self.weights_p is None else self.weights_p, "weights_p", **_DOMAINS["p"])
            if n > 1:
                return _sets.LpBall(fed.proportions, radius, p)
        if n == 1:
            return np.ones(1)     # Q over one client is {1}
        if name == "simplex":
            return _sets.Simplex(n)
        return fed.proportions if name == "proportions" else np.full(n, 1.0 / n)

    def _penalize_intercept(self) -> bool:
        """The transported, penalized intercept column (the regressor; the classifier on a bounded
        support, where the free intercept is not implemented)."""
        return True

    def _problem(self, fed, loss):
        radius = self.radius if np.ndim(self.radius) == 0 else np.asarray(self.radius, dtype=float)
        return WassersteinDRFL(fed, loss, radius=radius, kappa=self.kappa, norm=self.norm,
                               weights=self._q(fed), support=self.support, l2=self.l2,
                               penalize_intercept=self._penalize_intercept())


_WASSERSTEIN_DOC = """Wasserstein distributionally robust linear {kind} (DRFL paper, problem (4);
    ``drflmodel.WassersteinDRFL``): one type-1 Wasserstein ball per client, combined through a
    client-weight set Q,

    .. math:: \\min_\\theta\\max_{{q\\in Q}}\\sum_s q_s\\sup_{{W(P_s,\\hat P_s)\\le\\rho_s}}
              \\mathbb E_{{P_s}}[L(\\theta; x, y)] + \\tfrac{{\\ell_2}}2\\|\\theta\\|^2,

    with transport cost :math:`\\|x-x'\\|` (``norm``) + :math:`\\kappa\\,{label_cost}`. Certified by
    the conic dual. One client (``clients=None``) is the classical single-ball Wasserstein DRO.

    {labels}Parameters
    ----------
    loss : {losses} or a Loss instance of one of them (default ``{default}``).
    radius : :math:`\\rho_s\\ge0`, a scalar or one per client (ordered like ``client_names_``).
    kappa : label cost :math:`\\kappa>0` (default ``inf``: labels do not move).
    norm : 1, 2 (default) or ``inf``, the feature norm of the transport cost.
    weights : Q: ``"proportions"`` (default, fixed :math:`q=p`, the clients' row shares),
        ``"uniform"`` (fixed :math:`q_s=1/n`), ``"simplex"`` (any client mix, DRFA) or
        ``"lp_ball"`` (:math:`\\{{q\\in\\Delta:\\|q-p\\|_{{p'}}\\le`` ``weights_radius``:math:`\\}}`, with
        ``weights_p`` = :math:`p'`, default 2).
    weights_radius, weights_p : Q's ball (``weights="lp_ball"`` only; otherwise leave None).
    support : ``None`` (unbounded), ``"box"``, ``"unit_box"`` (piecewise-linear losses only).
    l2 : ridge weight (default 0: the balls regularize).
    fit_intercept : {intercept}
    solver, gap_tol, solve_options : passed to the oracle's ``solve``.

    Attributes
    ----------
    coef_, intercept_ ({shapes}), {classes}status_, lower_bound_, upper_bound_, gap_,
    relative_gap_, client_weights_ (worst-case :math:`q^\\star`), client_names_, solution_,
    n_features_in_.
    """


#: ``fit_intercept`` of the regressor (and of the classifier on a bounded support)
_TRANSPORTED_INTERCEPT = """prepend the explicit constant column. Unlike scikit-learn's intercept it is a
        feature like any other: the adversary may move it at transport cost, so the intercept
        enters :math:`\\|\\theta\\|_*`, and ``l2`` penalizes it."""

#: ``fit_intercept`` of the classifier
_FREE_INTERCEPT = """fit an intercept (default True). On unbounded support (``support=None``) it is
        scikit-learn's free intercept (the core's ``penalize_intercept=False``): the constant
        column is not transported, so the intercept is outside the dual norm
        :math:`\\|\\theta\\|_*` and outside the ``l2`` term (for :math:`K>2` classes it is centred,
        sum 0). On a bounded support (``"box"``, ``"unit_box"``) the free intercept is not
        implemented and the constant column is a transported feature: in the dual norm and the
        ``l2`` term. False: no intercept (``intercept_`` is 0)."""

#: the classifier's labels: two classes, or K > 2 with the softmax loss
_WASSERSTEIN_LABELS = """**Labels.** Any hashable, orderable labels (``classes_``, sorted). Two classes: the binary
    ``loss`` on labels :math:`\\pm1`. :math:`K>2` classes with ``loss="logistic"``: the softmax
    cross-entropy (``drflmodel.losses.Multinomial``) with the exact reformulation of the DRFL
    paper's Proposition 4.2 for the cost :math:`\\|x-x'\\|+\\kappa\\,1[y\\ne y']`: the dual norm is the
    largest pairwise :math:`\\|w_k-w_j\\|_*` of the class weight rows. The margin losses are binary.

    """


class WassersteinDRClassifier(OracleClassifierMixin, ClassifierMixin, _Wasserstein):
    __doc__ = _WASSERSTEIN_DOC.format(kind="classifier", losses=CLASSIFICATION_LOSSES,
                                      default="logistic", label_cost="1[y\\ne y']", classes="classes_, ",
                                      labels=_WASSERSTEIN_LABELS, intercept=_FREE_INTERCEPT,
                                      shapes="``(K, n_features)`` and ``(K,)`` for :math:`K>2` classes, "
                                             "``(1, n_features)`` and ``(1,)`` for two, as scikit-learn's")
    _unsupported_checks = SAMPLE_WEIGHT_TOLERANCE
    _losses = CLASSIFICATION_LOSSES
    _unpenalized_intercept = True

    def _penalize_intercept(self) -> bool:
        """The free intercept on unbounded support; the transported column on a bounded one."""
        unbounded = self.support is None or (isinstance(self.support, str)
                                             and self.support.lower() in ("none", "unbounded"))
        return not (self.fit_intercept and unbounded)

    def __init__(self, loss="logistic", radius=0.1, kappa=float("inf"), norm=2, weights="proportions",
                 weights_radius=None, weights_p=None, support=None, l2=0.0, fit_intercept=True,
                 solver=None, gap_tol=1e-6, solve_options=None):
        self.loss = loss
        self.radius = radius
        self.kappa = kappa
        self.norm = norm
        self.weights = weights
        self.weights_radius = weights_radius
        self.weights_p = weights_p
        self.support = support
        self.l2 = l2
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.gap_tol = gap_tol
        self.solve_options = solve_options


class WassersteinDRRegressor(RegressorPredictMixin, RegressorMixin, _Wasserstein):
    __doc__ = _WASSERSTEIN_DOC.format(kind="regressor", losses=WASSERSTEIN_REGRESSION_LOSSES,
                                      default="huber", label_cost="|y-y'|", classes="", labels="",
                                      intercept=_TRANSPORTED_INTERCEPT,
                                      shapes="``(n_features,)`` and a float, as scikit-learn's")
    _losses = WASSERSTEIN_REGRESSION_LOSSES

    def __init__(self, loss="huber", radius=0.1, kappa=float("inf"), norm=2, weights="proportions",
                 weights_radius=None, weights_p=None, support=None, l2=0.0, fit_intercept=True,
                 solver=None, gap_tol=1e-6, solve_options=None):
        self.loss = loss
        self.radius = radius
        self.kappa = kappa
        self.norm = norm
        self.weights = weights
        self.weights_radius = weights_radius
        self.weights_p = weights_p
        self.support = support
        self.l2 = l2
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.gap_tol = gap_tol
        self.solve_options = solve_options


# ================================================================================ relative fairness
RELATIVE_SETS = {"simplex": (), "cvar": ("alpha",), "hcvar": ("alpha",)}


class RelativeFairRegressor(RegressorPredictMixin, RegressorMixin, _HorizontalEstimator):
    """Relative-fairness linear regressor (integrated ambiguity set, ``drflmodel.RelativeFairness``):

    .. math:: \\min_{\\theta\\in\\Theta}\\max_{\\lambda\\in\\Lambda_\\varphi(A,B)}\\sum_i\\lambda_if_i(\\theta),
              \\qquad \\Lambda_\\varphi(A,B)=\\{(a-\\varphi b)/(1-\\varphi): a\\in A, b\\in B\\}.

    Negative weights make the problem non-convex in general: with the squared loss the oracle
    certifies it (vertex test, matrix-fractional dual or lifted SDP); with other losses the answer
    is ``"local"`` with a lower bound (and a :class:`CertificateWarning`).

    Parameters
    ----------
    loss : ``"squared"`` (default), ``"huber"``, ``"epsilon_insensitive"``, ``"pinball"`` or a Loss.
    phi : :math:`\\varphi\\in[0,1)` (default 0.1).
    A, B : ``"simplex"`` (default), ``"cvar"`` or ``"hcvar"``, with ``alpha_A`` / ``alpha_B``
        (required by ``"cvar"``/``"hcvar"``, otherwise None). With A = B = simplex the objective
        is :math:`(\\max_i f_i-\\varphi\\min_i f_i)/(1-\\varphi)`.
    box : ``None`` or ``(lower, upper)``: scalars, or arrays over the model vector
        :math:`\\theta` = [intercept, coef...] (with ``fit_intercept``) or coef (without).
    fit_intercept : prepend the explicit constant column. Unlike scikit-learn's intercept, ``l2``
        penalizes it (the oracle's certificates are written for a ridge term on every coordinate).
    l2, solver, gap_tol, solve_options : as for :class:`FederatedDRORegressor`
        (``solve_options`` may hold ``method``, ``n_starts``, ``seed``, ... of the oracle's solve).

    Attributes
    ----------
    coef_, intercept_, status_, lower_bound_, upper_bound_, gap_, relative_gap_,
    client_weights_ (worst-case :math:`\\lambda^\\star`, may be negative), client_names_,
    solution_, n_features_in_.
    """

    _losses = REGRESSION_LOSSES

    def __init__(self, loss="squared", phi=0.1, A="simplex", B="simplex", alpha_A=None, alpha_B=None,
                 box=None, l2=1e-3, fit_intercept=True, solver=None, gap_tol=1e-6, solve_options=None):
        self.loss = loss
        self.phi = phi
        self.A = A
        self.B = B
        self.alpha_A = alpha_A
        self.alpha_B = alpha_B
        self.box = box
        self.l2 = l2
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.gap_tol = gap_tol
        self.solve_options = solve_options

    def _set(self, fed, which: str):
        name = check_choice(getattr(self, which), which, tuple(RELATIVE_SETS))
        param = f"alpha_{which}"
        alpha = getattr(self, param)
        if name == "simplex":
            _check_unused(self, (), (param,), f"{which}='simplex'")
        elif alpha is None:
            raise InvalidParameterError(f"{which}={name!r} needs {param} (it is None)")
        else:
            alpha = check_real(alpha, param, **_DOMAINS["alpha"])
        n = fed.n_clients
        if n == 1 or name == "simplex":
            return _sets.Simplex(n)
        return _sets.CVaR(n, alpha) if name == "cvar" else _sets.HCVaR(fed.proportions, alpha)

    def _problem(self, fed, loss):
        return RelativeFairness(fed, loss, A=self._set(fed, "A"), B=self._set(fed, "B"), phi=self.phi,
                                l2=self.l2, box=self.box)
