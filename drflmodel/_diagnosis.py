"""What an error sequence does, compared with what the theory predicts (used by ``verify``).

* :func:`behaviour` names the error's course in words: ``"converged"`` (met the tolerance),
  ``"converging"``, ``"stalling"`` (it fell by less than 10% over the second half of the run, or
  over the last quarter by less than 10% and less than a tenth of the second half's fall: a floor),
  ``"growing"`` (it rose by more than 10%, or ends 10% above its minimum while still rising),
  ``"oscillating"`` (it changes direction in more than a third of the rounds and swings more than
  it trends) or ``"diverged"`` (NaN or inf). Only a converging or converged error is fitted as a rate.
* :func:`compare` measures, over a window of rounds, the observed fall of the error against the
  fall of the theory's bound (:class:`drflmodel._rates.Prediction`): the theorems bound the error
  from above, so the run *matches* when it falls at least ``1 - margin`` times as much.
* :func:`rounds_to_tol` extrapolates the round at which the tolerance would be met, at the
  theory's rate (its bound's shape anchored at the last error) and at the observed rate.
* :func:`feature_scale_note` names badly scaled features, the usual cause of a tiny step;
  :func:`oracle_precision_note` an error that stalls at the certified optimum's own precision.
"""

from __future__ import annotations

import math

import numpy as np

from ._rates import ROUND_CAP, Prediction

__all__ = ["behaviour", "window", "compare", "rounds_to_tol", "feature_scale_note", "oracle_precision_note",
           "BEHAVIOURS"]

BEHAVIOURS = ("converged", "converging", "stalling", "growing", "oscillating", "diverged")
#: a change smaller than this (log units, ~10%) over the window is no trend
TREND = math.log(1.1)


def window(errors, tol: float) -> tuple[int, int]:
    """The rounds ``(a, b)`` a rate is measured on: ``b`` is the first round the error met
    ``tol`` (else the last round) and ``a = b // 2`` -- the second half of the run up to the
    tolerance, so the transient and the oracle's precision floor after convergence stay out."""
    e = np.abs(np.asarray(errors, float))
    met = np.nonzero(e <= tol)[0]
    b = int(met[0]) if met.size else e.size - 1
    return b // 2, b


def _log_slope(e: np.ndarray, a: int, b: int) -> float:
    """Least-squares slope of log e against the round on ``[a, b]`` (positive values only)."""
    r = np.arange(a, b + 1, dtype=float)
    v = e[a:b + 1]
    keep = np.isfinite(v) & (v > 0)
    if keep.sum() < 3:
        return float("nan")
    return float(np.polyfit(r[keep], np.log(v[keep]), 1)[0])


def behaviour(errors, tol: float, metric: str) -> dict:
    """``{"behaviour", "text", "window"}``: the error's course in words (module docstring)."""
    e = np.abs(np.asarray(errors, float))
    R = e.size - 1
    if not np.all(np.isfinite(e)):
        k = int(np.nonzero(~np.isfinite(e))[0][0])
        return {"behaviour": "diverged", "text": f"diverged: {metric} is NaN or inf from round {k}",
                "window": [0, R]}
    met = np.nonzero(e <= tol)[0]
    if e[-1] <= tol:
        return {"behaviour": "converged", "text": f"converged: {metric} met the tolerance at round "
                f"{int(met[0])}", "window": list(window(e, tol))}
    a, b = R // 2, R
    if b - a < 2:                                   # too few rounds for a trend: the endpoints
        course = "converging" if e[-1] < e[0] else ("growing" if e[-1] > e[0] else "stalling")
        return {"behaviour": course, "text": f"{course}: {metric} went from {e[0]:.3g} to {e[-1]:.3g} in "
                f"{R} round(s)", "window": [0, R]}
    logs = np.log(np.maximum(e[a:b + 1], 1e-300))
    trend = _log_slope(e, a, b) * (b - a)             # fitted log change over the window
    swing = float(logs.max() - logs.min())
    steps = np.diff(logs)
    steps = steps[steps != 0]
    turns = float(np.mean(np.sign(steps[1:]) != np.sign(steps[:-1]))) if steps.size > 2 else 0.0
    lo = int(np.argmin(e))
    change = f"from {e[a]:.3g} (round {a}) to {e[b]:.3g} (round {b})"
    if turns > 1 / 3 and swing > 2 * abs(trend) + math.log(1.5):
        med = float(np.median(e[a:b + 1]))
        return {"behaviour": "oscillating",
                "text": f"oscillating: {metric} swings between {e[a:b + 1].min():.3g} and {e[a:b + 1].max():.3g} "
                        f"(median {med:.3g}) over rounds {a}-{b}, changing direction in {turns:.0%} of the "
                        f"rounds, with no clear trend; no rate fitted", "window": [a, b]}
    if trend > TREND or (e[-1] > 1.1 * e[lo] and lo < b and trend > 0):
        return {"behaviour": "growing",
                "text": f"growing: {metric} rose from {e[lo]:.3g} (round {lo}) to {e[-1]:.3g} (round {R}); "
                        "no rate fitted", "window": [lo, R]}
    if trend > -TREND:
        pct = 100.0 * (math.exp(trend) - 1.0)
        return {"behaviour": "stalling",
                "text": f"stalling: {metric} changed by {pct:+.2g}% over rounds {a}-{b} ({change}); "
                        "no rate fitted", "window": [a, b]}
    c = (a + b) // 2                  # the last quarter: a fall that stopped (a floor) is a stall
    recent = _log_slope(e, c, b) * (b - c)
    if b - c >= 3 and recent > -TREND and -recent < 0.1 * -trend:
        pct = 100.0 * (math.exp(recent) - 1.0)
        return {"behaviour": "stalling",
                "text": f"stalling: {metric} fell from {e[a]:.3g} (round {a}) to {e[c]:.3g} (round {c}), then "
                        f"changed by {pct:+.2g}% over rounds {c}-{b}; no rate fitted", "window": [c, b]}
    return {"behaviour": "converging", "text": f"converging: {metric} fell {change}", "window": [a, b]}


def compare(errors, prediction: Prediction | None, metric: str, a: int, b: int,
            margin: float) -> dict:
    """The observed fall of the error over rounds ``[a, b]`` against the theory's.

    Returns ``{"comparable", "observed_drop", "predicted_drop", "ratio", "matches", "informative",
    "text"}``: drops are fitted log decreases over the window; ``matches`` is ``ratio >= 1 - margin``
    (``None`` when the theory gives no bound on ``metric``); ``informative`` is ``False`` when the
    bound itself falls by less than 10% over the window (then any error that does not grow
    "matches" it, and the text says so)."""
    e = np.abs(np.asarray(errors, float))
    out = {"comparable": False, "observed_drop": None, "predicted_drop": None, "ratio": None,
           "matches": None, "informative": False, "window": [int(a), int(b)]}
    if prediction is None or prediction.kind is None:
        out["text"] = "not compared: the theory claims no rate for this run"
        return out
    if prediction.log_envelope([0], metric) is None:
        bound = ", ".join(prediction.metrics) or "a quantity not verified here"
        out["text"] = f"not compared: the theorem bounds {bound}, not {metric}"
        return out
    if b - a < 2:
        out["text"] = "not compared: too few rounds"
        return out
    slope = _log_slope(e, a, b)
    if not np.isfinite(slope):
        out["text"] = "not compared: too few positive errors in the window"
        return out
    env = prediction.log_envelope(np.arange(a, b + 1), metric)
    predicted = -float(np.polyfit(np.arange(a, b + 1, dtype=float), env, 1)[0]) * (b - a)
    observed = -slope * (b - a)
    ratio = observed / predicted if predicted > 0 else float("inf")
    matches = bool(ratio >= 1.0 - margin)
    informative = bool(predicted > TREND)
    out.update(comparable=True, observed_drop=observed, predicted_drop=predicted, ratio=ratio, matches=matches,
               informative=informative)
    if prediction.kind == "linear":
        obs = f"factor {math.exp(slope):.6g}/round"
        pred = f"{math.exp(-predicted / (b - a)):.6g}/round"
    else:
        span = math.log(max(b, 1) / max(a, 1)) or 1.0
        obs = f"like r^{slope * (b - a) / span:.2f}"
        pred = f"r^{-predicted / span:.2f}"
    verdict = ("matches" if matches else "does NOT match") + f" (observed fall {ratio:.3g}x the bound's; " \
              f"at least {1 - margin:.2g}x needed)"
    out["text"] = f"over rounds {a}-{b} the error falls {obs}, the theory's bound {pred}: {verdict}"
    if not informative:
        out["text"] += (f"; uninformative: the bound itself falls only {100 * -math.expm1(-predicted):.2g}% over "
                        "these rounds, so any error that does not grow matches it")
    return out


def rounds_to_tol(errors, tol: float, prediction: Prediction | None, metric: str, fit: dict) -> dict:
    """Rounds at which ``tol`` would be met, from the last error: ``{"theory", "observed"}``
    (``None``: not predictable; ``ROUND_CAP + 1``: more than :data:`ROUND_CAP`)."""
    e = np.abs(np.asarray(errors, float))
    R = e.size - 1
    drop = math.log(e[-1] / tol) if e[-1] > 0 and np.isfinite(e[-1]) else float("nan")
    out = {"theory": None, "observed": None}
    if not np.isfinite(drop):
        return out
    if prediction is not None and prediction.kind is not None and \
            prediction.log_envelope([0], metric) is not None:
        n = prediction.rounds_to_drop(R, drop, metric)
        out["theory"] = ROUND_CAP + 1 if n is None else int(n)
    slope = fit.get("slope", float("nan")) if fit else float("nan")
    if np.isfinite(slope) and slope < 0:
        if fit["kind"] == "linear":
            n = R + drop / -slope
        else:
            n = max(R, 1) * math.exp(drop / -slope)
        out["observed"] = int(math.ceil(n)) if n <= ROUND_CAP else ROUND_CAP + 1
    return out


def describe_rounds(n: int | None) -> str:
    if n is None:
        return "not predictable"
    if n > ROUND_CAP:
        return f"more than {ROUND_CAP:,} rounds"
    return f"round ~{n:,}"


def feature_scale_note(problem, ratio: float = 10.0) -> str | None:
    """A note when the features' root-mean-square values differ by more than ``ratio``
    (constant columns such as an intercept included): the smoothness constant, hence the step,
    follows the largest column and the strong convexity the smallest."""
    fed = getattr(problem, "federation", None)
    try:
        X = fed.pooled()[0] if hasattr(fed, "pooled") else np.asarray(fed.X, float)
    except (AttributeError, TypeError, ValueError):
        return None
    if X.ndim != 2 or X.shape[1] < 2:
        return None
    rms = np.sqrt(np.mean(X**2, axis=0))
    used = np.nonzero(rms > 0)[0]
    if used.size < 2:
        return None
    big, small = used[np.argmax(rms[used])], used[np.argmin(rms[used])]
    if rms[big] <= ratio * rms[small]:
        return None
    names = getattr(fed, "feature_names", None)
    if not names or len(names) != X.shape[1]:
        names = [f"column {k}" for k in range(X.shape[1])]
    col = X[:, big]
    return (f"feature scales differ by {rms[big] / rms[small]:.3g}x ('{names[big]}': mean {col.mean():.3g}, "
            f"sd {col.std():.3g}; '{names[small]}': root mean square {rms[small]:.3g}): the smoothness "
            "constant, hence the step, follows the largest column -- standardize the features "
            "([data] standardize = true, or Federation.from_dataframe(..., standardize=True))")


def _certified_gap(solution) -> float:
    """:math:`U-L` of ``solution`` (at least a few ulps of :math:`U`: the bounds' own rounding)."""
    gap = abs(float(solution.upper_bound) - float(solution.lower_bound))
    return max(gap, 4 * np.finfo(float).eps * max(1.0, abs(float(solution.upper_bound))))


def oracle_error_bound(metric: str, problem, solution) -> float | None:
    r"""What the oracle's certificate :math:`[L, U]` bounds of its own error on ``metric``: for
    ``"rel_gap"`` (measured against :math:`g^\star=U`) the relative gap :math:`(U-L)/\max(1,|U|)`;
    for the distances, with every client objective :math:`\mu`-strongly convex (the weighted sum
    then is too, the weights summing to one) and :math:`\Phi(\hat\theta)-\Phi^\star\le U-L`,
    :math:`\|\hat\theta-\theta^\star\|^2\le2(U-L)/\mu` (``"dist_theta_sq"``; its square root for
    ``"dist_theta"``). ``None`` where nothing is bounded (no finite bounds, or :math:`\mu=0`: an
    unpenalized intercept)."""
    try:
        gap = _certified_gap(solution)
    except (AttributeError, TypeError, ValueError):
        return None
    if not np.isfinite(gap):
        return None
    if metric == "rel_gap":
        return gap / max(1.0, abs(float(solution.upper_bound)))
    try:
        mu = float(np.min(problem.objectives.strong_convexity()))
    except (AttributeError, TypeError, ValueError):
        return None
    if not mu > 0:
        return None
    bound = 2.0 * gap / mu
    return float(np.sqrt(bound)) if metric == "dist_theta" else float(bound)


def oracle_precision_note(errors, metric: str, problem, solution) -> str | None:
    r"""A note when a distance stalls where the oracle's own :math:`\theta^\star` is uncertain:
    for a :math:`\mu`-strongly convex objective the certificate bounds
    :math:`\|\theta_{\text{oracle}}-\theta^\star\|^2\le2(U-L)/\mu` (:func:`oracle_error_bound`), so
    errors at that level (the median of the second half of the run within 100 times the bound) are
    the reference's precision, not the solver's."""
    if metric not in ("dist_theta_sq", "dist_theta"):
        return None
    bound = oracle_error_bound("dist_theta_sq", problem, solution)
    if bound is None:
        return None
    gap = _certified_gap(solution)
    e = np.abs(np.asarray(errors, float))
    level = float(np.median(e[e.size // 2:]))
    if metric == "dist_theta":
        level = level**2
    if level > 100.0 * bound:
        return None
    return (f"the error stalls at the oracle's own precision: its certificate (U - L = {gap:.2g}) bounds "
            f"||theta_oracle - theta*||^2 by 2 (U - L)/mu_x = {bound:.2g}, and the run sits at {level:.2g} "
            "(a tolerance below that cannot be verified; tighten the oracle's gap_tol)")
