r"""``fixed_point(problem, strategy, ...)``: where a federated strategy lands, certified.

The strategy is named (``"FedAvg"``, ``"FedProx"``, ``"SCAFFOLD"``, ``"Scaff-PD"``, ``"q-FedAvg"``,
``"FedAdam"``, ...; :mod:`drflmodel.landing.strategies`) or given as a drflmodel solver
(``dm.solvers.FedProx(mu=1, local_steps=10)``, whose parameters are the configuration). Three kinds
of point, each with a certificate:

* ``"local_steps"`` (FedAvg, FedProx with :math:`J` local steps, FedAdam / FedYogi / FedAdagrad /
  FedAvgM): the fixed point of the averaged local steps, certified by Banach's bound
  (:mod:`drflmodel.landing.contraction`);
* ``"moreau"`` (FedProx with ``local_steps="exact"``): the minimizer of the clients' Moreau
  envelopes, certified by lower and upper bounds on its convex problem
  (:mod:`drflmodel.landing.moreau`);
* ``"optimum"`` (SCAFFOLD, Scaff-PD, Scaff-PD-IA, q-FedAvg with one local step): the problem's own
  certified optimum (``problem.solve()``), with a distance bound from the objective's strong
  convexity: :math:`\|\nabla g(\hat\theta)\|/m` for a smooth objective (ERM, q-FFL), or
  :math:`\sqrt{2(U-L)/m}` from the oracle's gap for a min-max objective over weights in the simplex.

Every random-free computation here is deterministic; the result is a
:class:`~drflmodel.landing.result.FixedPoint`.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_finite_array, check_int, check_probability_vector, check_real
from ..errors import InvalidDataError, InvalidParameterError
from ..solution import ORACLE_GAP_TOL
from ..solvers.baselines import default_local_step
from .contraction import ROUNDING_ALLOWANCE, contraction_factors, solve_local_steps_fixed_point
from .moreau import moreau_certificate, solve_moreau_fixed_point, strong_convexity_modulus
from .result import FixedPoint
from .strategies import StrategyNotCharacterized, characterize

__all__ = ["fixed_point", "optimum_point", "strategy_configuration", "client_weights", "check_problem",
           "check_solution", "CONFIG_KEYS"]

#: the configuration keys a landing point may depend on, and what they are
CONFIG_KEYS = {"local_steps": "J, the number of local steps per round (or 'exact' for FedProx's exact local solve)",
               "step_size": "eta, the local step size",
               "mu": "mu, FedProx's proximal weight",
               "global_step": "eta_g, the server step (changes the speed, not the point)",
               "batch_size": "the minibatch size (None: full-batch local gradients)"}


def strategy_configuration(strategy, **given) -> tuple[str, dict]:
    """``(name, config)`` of a strategy named or given as a drflmodel solver; ``given`` (the keys of
    :data:`CONFIG_KEYS`, ``None`` meaning not given) fills in or must agree with the solver's own
    parameters."""
    config = {k: v for k, v in given.items() if v is not None}
    unknown = set(config) - set(CONFIG_KEYS)
    if unknown:
        raise InvalidParameterError(f"unknown configuration {sorted(unknown)}; known: {sorted(CONFIG_KEYS)}")
    if isinstance(strategy, str):
        return strategy, config
    params = getattr(strategy, "params", None)
    if not isinstance(params, dict):
        raise InvalidParameterError(
            f"strategy must be a name (e.g. 'FedProx') or a drflmodel solver; got {type(strategy).__name__}")
    name = type(strategy).__name__
    for key in CONFIG_KEYS:
        if params.get(key) is None:
            continue
        if key in config and config[key] != params[key]:
            raise InvalidParameterError(
                f"{key}={config[key]!r} contradicts the solver's {key}={params[key]!r}; pass one of them")
        config[key] = params[key]
    config["_solver_defaults"] = True          # step_size=None means the solver's documented default
    return name, config


def client_weights(problem, weights=None) -> np.ndarray:
    """The averaging weights :math:`p`: ``weights`` (a probability vector of length ``n``) or the
    single point of the problem's weight set (``HCVaR(p, 1)``: :math:`p`; ``CVaR(n, 1)``: uniform)."""
    n = int(problem.n_clients)
    if weights is not None:
        return check_probability_vector(weights, "weights", n)
    from ..solvers.baselines import fixed_weights

    return fixed_weights(problem.weights, n)


def check_problem(problem) -> None:
    """Refuse, by name, a ``problem`` that is not a drflmodel problem (before any work)."""
    if isinstance(problem, (str, bytes)) or not all(hasattr(problem, a) for a in ("dim", "n_clients", "solve")):
        raise InvalidParameterError(f"problem must be a drflmodel problem (e.g. dm.FederatedDRO(...)) with dim, "
                                    f"n_clients and solve(); got {type(problem).__name__} {problem!r:.60}")


def check_solution(solution) -> None:
    """Refuse, by name, a ``solution`` that is not a certified drflmodel Solution."""
    if solution is not None and not all(hasattr(solution, a) for a in ("theta", "status", "value",
                                                                        "lower_bound", "upper_bound")):
        raise InvalidParameterError(f"solution must be a drflmodel Solution (problem.solve()) or None; got "
                                    f"{type(solution).__name__} {solution!r:.60}")


def _check_smooth_horizontal(problem, name: str) -> None:
    if getattr(problem, "objectives", None) is None or not hasattr(problem.objectives, "gradients"):
        raise InvalidParameterError(
            f"{name}'s landing point needs a horizontal problem with client objectives (FederatedDRO); "
            f"got {type(problem).__name__}")
    if not getattr(problem.objectives, "holds_rows", True):
        raise InvalidParameterError(
            f"{name}'s landing point runs every client's local steps from many models; this problem's rows "
            "are on remote clients (a federated oracle, e.g. of a graded Flower app): pass the problem "
            "with the rows (the FederatedDRO the app trains, or dm.from_sklearn(estimator, X, y, clients))")
    loss = problem.loss
    if not np.isfinite(getattr(loss, "smoothness", np.inf)):
        raise StrategyNotCharacterized(
            f"{name}'s local gradient steps need a differentiable loss with a Lipschitz gradient; "
            f"{loss!r} is not differentiable (use a smooth loss such as Logistic, SmoothHinge, Huber, "
            f"Squared or Multinomial)")


def _status(radius: float, theta, tol: float) -> str:
    if theta is None or not np.all(np.isfinite(theta)):
        return "failed"
    if not np.isfinite(radius):
        return "uncertified"
    return "certified" if radius <= tol * max(1.0, float(np.linalg.norm(theta))) else "certified_within_radius"


def _missing(char, config: dict) -> list[str]:
    needed = list(char.needs)
    if char.kind == "local_steps" and config.get("local_steps") == "exact":
        needed = [k for k in needed if k != "step_size"]
    if config.get("_solver_defaults") and "step_size" in needed and config.get("local_steps") is not None:
        needed = [k for k in needed if k != "step_size"]
    return [k for k in needed if config.get(k) is None]


def missing_configuration(strategy, config: dict) -> list[str]:
    """The configuration keys the landing point of ``strategy`` needs that ``config`` lacks."""
    return _missing(characterize(strategy), config)


def fixed_point(problem, strategy, *, local_steps=None, step_size=None, mu=None, weights=None,
                global_step=None, batch_size=None, tol: float = 1e-8, solution=None,
                theta0=None) -> FixedPoint:
    r"""The certified landing point of ``strategy`` on ``problem`` (module docstring).

    Parameters
    ----------
    problem : the drflmodel problem the strategy runs on (a ``FederatedDRO``; for Scaff-PD-IA a
        ``RelativeFairness``). FedAvg-type strategies average with the single point of its weight
        set (``HCVaR(p, 1)``: :math:`p_i`, e.g. Flower's ``num-examples`` weighting; ``CVaR(n, 1)``:
        uniform) unless ``weights`` is given.
    strategy : a name (``"FedAvg"``, ``"FedProx"``, ``"FedAdam"``, ``"FedYogi"``, ``"FedAdagrad"``,
        ``"FedAvgM"``, ``"SCAFFOLD"``, ``"Scaff-PD"``, ``"Scaff-PD-IA"``, ``"q-FedAvg"``) or a
        drflmodel solver whose parameters give the configuration. A strategy without a known
        characterization (FedMedian, Krum, DRFA, ...) raises
        :class:`~drflmodel.landing.strategies.StrategyNotCharacterized` naming the reason.
    local_steps : :math:`J\ge1`, or ``"exact"`` (FedProx with exact local solves).
    step_size : the local step :math:`\eta>0`.
    mu : FedProx's proximal weight :math:`\mu>0`.
    weights : the averaging weights (default: the problem's one-point weight set).
    global_step, batch_size : recorded; ``batch_size`` must be ``None`` (minibatch local steps have
        no fixed point).
    tol : the radius, relative to :math:`\max(1,\|\theta\|)`, below which the point is ``"certified"``.
    solution : for ``"optimum"`` points, a certified solution of ``problem`` (default: solved here).
    theta0 : a starting point for the ``"local_steps"`` and ``"moreau"`` computations.

    Returns
    -------
    FixedPoint
        The point, its status and certificate, the characterization and its source.
    """
    check_problem(problem)
    check_solution(solution)
    if global_step is not None:
        global_step = check_real(global_step, "global_step", low=0.0, low_open=True)
    name, config = strategy_configuration(strategy, local_steps=local_steps, step_size=step_size, mu=mu,
                                          global_step=global_step, batch_size=batch_size)
    char = characterize(name)
    tol = check_real(tol, "tol", low=0.0, low_open=True)
    if config.get("batch_size") is not None:
        raise StrategyNotCharacterized(
            f"{char.name} with minibatch local gradients (batch_size={config['batch_size']}) has no fixed "
            f"point: its iterates keep moving with the gradient noise. The landing point is that of the "
            f"full-batch strategy (batch_size=None)")
    missing = _missing(char, config)
    if missing:
        raise InvalidParameterError(
            f"{char.name}'s landing point depends on {', '.join(char.needs)}; missing: "
            + "; ".join(f"{k} ({CONFIG_KEYS[k]})" for k in missing))
    if char.kind == "optimum":
        return _optimum_point(problem, char, config, tol, solution)
    _check_smooth_horizontal(problem, char.name)
    if theta0 is not None:
        theta0 = as_finite_array(theta0, "theta0", ndim=1)
        if theta0.shape != (int(problem.dim),):
            raise InvalidDataError(f"theta0 must have shape ({problem.dim},); got {theta0.shape}")
    p = client_weights(problem, weights)
    mu_value = check_real(config.get("mu", 0.0), "mu", low=0.0, low_open=char.name == "FedProx")
    if char.name != "FedProx" and "mu" in config and config["mu"] != 0:
        raise InvalidParameterError(f"mu is FedProx's proximal weight; {char.name} has none (got mu={config['mu']})")
    if config.get("local_steps") == "exact":
        if char.name != "FedProx":
            raise InvalidParameterError(f"local_steps='exact' is FedProx's exact local solve; {char.name} "
                                        "takes an integer number of local steps")
        return _moreau_point(problem, char, config, p, mu_value, tol, theta0)
    J = check_int(config["local_steps"], "local_steps", low=1)
    eta = config.get("step_size")
    if eta is None:                             # the step drflmodel's FedAvg / FedProx take by default
        eta = default_local_step(problem, J, mu_value if char.name == "FedProx" else 0.0)
    eta = check_real(eta, "step_size", low=0.0, low_open=True)
    config.update(local_steps=J, step_size=eta, mu=mu_value if char.name == "FedProx" else None)
    return _local_steps_point(problem, char, config, p, J, eta, mu_value, tol, theta0)


def _public(config: dict, p) -> dict:
    out = {k: v for k, v in config.items() if not k.startswith("_")}
    out["weights"] = np.asarray(p, float)
    return out


def _local_steps_point(problem, char, config, p, J, eta, mu, tol, theta0) -> FixedPoint:
    obj = problem.objectives
    L, m = np.asarray(obj.smoothness(), float), np.asarray(obj.strong_convexity(), float)
    q_i = contraction_factors(L, m, J, eta, mu)
    q = float(p @ np.where(p > 0, q_i, 0.0))
    solved = solve_local_steps_fixed_point(obj, p, J, eta, mu, theta0=theta0)
    theta, residual = solved["theta"], solved["residual"]
    info = {"kind": "local_steps", "per_client_factors": q_i, "smoothness": L, "strong_convexity": m,
            "residual": residual, **{k: solved[k] for k in ("newton_steps", "fixed_point_steps", "gmres_iterations")}}
    if q < 1.0 and np.isfinite(residual):
        allowance = ROUNDING_ALLOWANCE * J * (1.0 + float(np.linalg.norm(theta)))
        radius = (residual + allowance) / (1.0 - q)
        certificate = (f"Banach: radius = (||T(theta) - theta|| + rounding allowance) / (1 - q), "
                       f"residual {residual:.2e}, q = {q:.6f}")
    else:
        radius = np.inf
        why = []
        if np.any(~np.isfinite(q_i[p > 0])):
            bad = np.flatnonzero((~np.isfinite(q_i)) & (p > 0))
            why.append(f"the local step eta={eta:g} does not contract for client(s) {bad.tolist()} "
                       f"(needs eta < 2/(L_i + mu) = {2.0 / (L[bad].max() + mu):.4g})")
        if np.any(m[p > 0] <= 0):
            why.append("a client objective is not strongly convex (l2 = 0 or an unpenalized intercept with a "
                       "non-quadratic loss): its local steps need not contract; use l2 > 0 on every coefficient")
        if not why:
            why.append(f"the round map's Lipschitz bound q = {q:.6g} is not below 1")
        info["reason"] = "; ".join(why)
        certificate = "none: " + info["reason"]
    status = _status(radius, theta, tol)
    return FixedPoint(strategy=char.name, theta=theta if np.all(np.isfinite(theta)) else None, status=status,
                      radius=float(radius), certificate=certificate, characterization=char,
                      config=_public(config, p), contraction=q if q < 1.0 else None, info=info, problem=problem)


def _moreau_point(problem, char, config, p, mu, tol, theta0) -> FixedPoint:
    obj = problem.objectives
    m = np.asarray(obj.strong_convexity(), float)
    kappa = strong_convexity_modulus(m, mu, p)
    solved = solve_moreau_fixed_point(obj, p, mu, theta0=theta0)
    cert = moreau_certificate(obj, p, mu, solved["theta"], solved["U"], kappa)
    info = {"kind": "moreau", "kappa": kappa, "dual_norm": cert["dual_norm"], "local_models": solved["U"],
            **{k: solved[k] for k in ("newton_steps", "cg_iterations")}}
    if kappa > 0:
        certificate = (f"joint strong convexity kappa = {kappa:.4g}: value in [F - ||g||^2/(2 kappa), F], "
                       f"radius = ||g|| / kappa with ||g|| = {cert['dual_norm']:.2e}")
    else:
        info["reason"] = ("a client objective is not strongly convex (l2 = 0 or an unpenalized intercept with a "
                          "non-quadratic loss): no lower bound or radius holds; use l2 > 0 on every coefficient")
        certificate = "none: " + info["reason"]
    config = {**config, "local_steps": "exact", "mu": mu}
    config.pop("step_size", None)
    return FixedPoint(strategy=char.name, theta=solved["theta"], status=_status(cert["radius"], solved["theta"], tol),
                      radius=float(cert["radius"]), certificate=certificate, characterization=char,
                      config=_public(config, p), value=cert["upper"],
                      lower_bound=cert["lower"] if kappa > 0 else None, upper_bound=cert["upper"],
                      info=info, problem=problem)


def _optimum_point(problem, char, config, tol, solution) -> FixedPoint:
    _check_problem_family(problem, char, config)
    sol = solution if solution is not None else problem.solve(gap_tol=ORACLE_GAP_TOL)
    info = {"kind": "optimum", "oracle_status": sol.status, "oracle_certificate": sol.certificate}
    if sol.theta is None or sol.status not in ("optimal", "optimal_within_gap"):
        info["reason"] = f"the oracle's solve ended {sol.status!r}"
        return FixedPoint(strategy=char.name, theta=None, status="failed", radius=np.inf,
                          certificate="none: " + info["reason"], characterization=char, config=_public(config, []),
                          value=None, info=info, problem=problem)
    theta, radius, how = optimum_point(problem, sol, info)
    if not np.isfinite(radius):
        info["reason"] = how
    value = float(problem.objective(theta))
    return FixedPoint(strategy=char.name, theta=theta, status=_status(radius, theta, tol), radius=float(radius),
                      certificate=how, characterization=char, config=_public(config, []), value=value,
                      lower_bound=float(sol.lower_bound), upper_bound=min(float(sol.upper_bound), value),
                      info=info, problem=problem)


def _check_problem_family(problem, char, config) -> None:
    from ..sets import QFFL

    weights = getattr(problem, "weights", None)
    if char.name == "SCAFFOLD":
        client_weights(problem)                # ERM: a one-point weight set, else a named error
    elif char.name == "q-FedAvg":
        if config.get("local_steps") != 1:
            raise StrategyNotCharacterized(
                f"q-FedAvg with local_steps={config.get('local_steps')}: with more than one local step its "
                "fixed point solves sum_i f_i(theta)^q (theta - u_{i,J}(theta)) = 0, which has no known "
                "characterization as a convex problem; with local_steps=1 it is the q-FFL optimum")
        if not isinstance(weights, QFFL):
            raise InvalidParameterError(f"q-FedAvg lands on the q-FFL optimum: pass a FederatedDRO with a "
                                        f"QFFL(n, q) weight set; got {weights!r}")
    elif char.name == "Scaff-PD" and type(problem).__name__ != "FederatedDRO":
        raise InvalidParameterError(f"Scaff-PD runs on FederatedDRO problems; got {type(problem).__name__}")
    elif char.name == "Scaff-PD-IA" and type(problem).__name__ != "RelativeFairness":
        raise InvalidParameterError(f"Scaff-PD-IA runs on RelativeFairness problems; got {type(problem).__name__}")


def optimum_point(problem, solution, info: dict | None = None) -> tuple[np.ndarray, float, str]:
    """``(theta, radius, how)``: the optimum of ``problem`` from its certified ``solution`` (refined
    for a smooth ERM objective) and a certified bound on its distance to the true optimum (``inf``
    when none holds; module docstring)."""
    info = {} if info is None else info
    theta = _polished_erm_optimum(problem, np.asarray(solution.theta, float), info)
    radius, how = _optimum_radius(problem, solution, theta)
    return theta, radius, how


def _polished_erm_optimum(problem, theta, info: dict) -> np.ndarray:
    r"""For a smooth ERM objective :math:`\sum_ip_if_i` (a one-point weight set): the oracle's
    :math:`\theta` refined by Newton steps on the fixed point of one gradient step
    (:func:`~drflmodel.landing.contraction.solve_local_steps_fixed_point` with :math:`J=1`,
    :math:`\eta=1/L_{\max}`), kept only if its gradient is smaller. The oracle certifies the value
    to its gap; the refined point's distance bound :math:`\|\nabla\|/m` is then near rounding."""
    obj = getattr(problem, "objectives", None)
    if obj is None or not np.isfinite(getattr(problem.loss, "smoothness", np.inf)):
        return theta
    try:
        from ..solvers.baselines import fixed_weights

        p = fixed_weights(problem.weights, int(problem.n_clients))
    except (InvalidParameterError, AttributeError):
        return theta
    L = float(np.max(obj.smoothness()))
    refined = solve_local_steps_fixed_point(obj, p, 1, 1.0 / L, theta0=theta)["theta"]
    before, after = (float(np.linalg.norm(p @ obj.gradients(t))) for t in (theta, refined))
    if np.all(np.isfinite(refined)) and after < before:
        info["refined"] = {"gradient_before": before, "gradient_after": after,
                           "moved": float(np.linalg.norm(refined - theta))}
        return refined
    return theta


def _optimum_radius(problem, sol, theta) -> tuple[float, str]:
    """A certified bound on the distance from ``theta`` to the optimum, and how (module docstring)."""
    from ..sets import QFFL

    obj = getattr(problem, "objectives", None)
    weights = getattr(problem, "weights", None)
    if obj is None or weights is None or not hasattr(obj, "strong_convexity"):
        return np.inf, "no distance bound for this family (the oracle's value certificate only)"
    m = np.asarray(obj.strong_convexity(), float)
    smooth = np.isfinite(getattr(problem.loss, "smoothness", np.inf))
    if isinstance(weights, QFFL) and smooth:
        q = float(weights.q)
        values = obj.values(theta)
        grads = obj.gradients(theta)
        floor = np.where(m > 0, values - np.sum(grads ** 2, axis=1) / (2.0 * np.where(m > 0, m, 1.0)), 0.0)
        modulus = float(np.sum(np.maximum(floor, 0.0) ** q * m))
        g = np.maximum(values, 0.0) ** q @ grads
        if modulus > 0:
            return (float(np.linalg.norm(g)) / modulus,
                    f"q-FFL objective {modulus:.3g}-strongly convex (f_i >= its certified floor): "
                    f"radius = ||sum_i f_i^q grad f_i|| / modulus")
        return np.inf, "no strong convexity of the q-FFL objective is certified: no distance bound"
    try:
        from ..solvers.baselines import fixed_weights

        p = fixed_weights(weights, int(problem.n_clients))
    except InvalidParameterError:
        p = None
    if p is not None and smooth:
        modulus = float(p @ m)
        if modulus > 0:
            g = p @ obj.gradients(theta)
            return (float(np.linalg.norm(g)) / modulus,
                    f"ERM objective {modulus:.3g}-strongly convex: radius = ||gradient|| / modulus")
    if getattr(weights, "in_simplex", False) and getattr(weights, "nonnegative", False) and np.min(m) > 0:
        gap = max(float(sol.upper_bound) - float(sol.lower_bound), 0.0)
        return (float(np.sqrt(2.0 * gap / np.min(m))),
                f"objective {np.min(m):.3g}-strongly convex (weights in the simplex): "
                f"radius = sqrt(2 (U - L) / m) from the oracle's gap {gap:.2e}")
    return np.inf, "no strong convexity certified for this objective: no distance bound (value certificate only)"
