"""Verification of distributed-solver iterates against a certified oracle solution.

``verify(trace, solution)`` and ``verify_iterates(problem, solution, thetas, lambdas)`` compute,
per round :math:`r`:

* ``dist_theta``: :math:`\\|\\theta^r - \\theta^\\star\\|_2` (and ``dist_theta_sq``, its square, the
  quantity of the Scaff-PD theorems);
* ``objective``: the exact robust objective :math:`g(\\theta^r)` from ``problem.objective`` (numpy);
* ``rel_gap``: :math:`(g(\\theta^r) - g^\\star)/\\max(1, |g^\\star|)`, with :math:`g^\\star` the
  certified value (when :math:`\\theta^\\star` is not unique this is the meaningful distance: the
  distance to the *solution set* in objective value);
* ``dist_lambda`` and ``lambda_feasible`` when dual iterates are given;
* ``constraint_violation`` for constrained families (DEO) when the problem defines it;
* ``time`` when the trace has wall times.

The error sequence (``dist_theta_sq`` where available, else ``rel_gap``) is first described in
words: *converged*, *converging*, *stalling*, *growing*,
*oscillating* or *diverged*. Only a converging (or converged) error is fitted as an empirical
**rate**, on the second half of the rounds up to the first that met the tolerance: *linear* --
least-squares slope of :math:`\\log e_r` against :math:`r` (contraction factor
:math:`e^{\\text{slope}}` per round); *sublinear* -- slope of :math:`\\log e_r` against
:math:`\\log r` (order :math:`O(r^{\\text{slope}})`), each with :math:`R^2`.

Next to it the report states what the theory predicts for this run (from the theorem of the
solver's paper, the problem's constants -- smoothness, strong convexity, the weight set's
strong concavity -- and the schedule the solver used), whether the observed fall of the error
matches the theory's bound, and, when the tolerance was not met, the round at which it would be at
the theory's and at the observed rate, and the causes (a step limited by the smoothness, badly
scaled features, no strong concavity in :math:`\\lambda`, a minibatch noise floor, client drift).

**The theorem's explicit bound** (:mod:`drflmodel._bounds`). For a run the theorem covers
(Scaff-PD's Theorems 3.1 and 3.5, deterministic gradients, every client every round), the bound is
computed with this run's own constants and the certified saddle point, and checked at **every
round** (rows get ``theory_bound``), together with the proof's potential; the report gives the
largest ratio error/bound and its round. A round above the bound, or a rise of the potential, means
a solver defect or a wrong constant -- never a slow run -- and fails either verdict.

Verdicts: ``verdict="tol"`` (default) passes when the final error meets the tolerance, without
divergence and, when the paper proves a linear rate and the tolerance was not met, with a
negative linear slope of good fit. ``verdict="rate"`` judges what the theory guarantees instead of
a tolerance that may be millions of rounds away: where an explicit bound applies, it passes when
every round is inside it (the error may grow inside the bound: a primal-dual method's distance
need not fall monotonically); otherwise when the error converges and its observed fall is at least
``1 - rate_margin`` times the theory's bound's over the measured rounds -- and only if that bound
itself falls by more than 10% there (else any error that does not grow would "match" it).
A PASSED on ``verdict="rate"`` for a run that has not met the tolerance says so, and what was
checked instead, on the verdict line itself. Every failed check adds a reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from . import _diagnosis as diag
from ._bounds import TheoremBound, theorem_bound
from ._frames import table, to_frame
from ._rates import Prediction, predict
from ._validation import check_choice, check_real
from .errors import InvalidDataError, InvalidParameterError
from .solution import ORACLE_GAP_TOL, Solution, jsonable

__all__ = ["verify", "verify_iterates", "fit_rate", "Report", "Verifier", "RATE_KINDS", "VERDICTS", "ORACLE_GAP_TOL"]

#: the convergence rates a fit can be asked to expect (``expected_rate``): ``"linear"`` (a
#: contraction factor per round), ``"sublinear"`` (an order :math:`O(r^p)`), or ``None`` (no
#: expectation: the rate is fitted and reported, not judged)
RATE_KINDS = ("linear", "sublinear", None)
#: what a verdict judges: the final error against the tolerance, or the rate against the theory's
VERDICTS = ("tol", "rate")


# --------------------------------------------------------------------------- rate fitting
def fit_rate(errors: Sequence[float], kind: str = "linear", tail: float = 0.5,
             floor: float = 1e-14) -> dict:
    """Fit an empirical convergence rate to a positive error sequence.

    ``kind="linear"``: :math:`\\log e_r \\approx a + b\\,r`; returns ``slope = b`` and
    ``factor = e^b`` (per-round contraction). ``kind="sublinear"``: :math:`\\log e_r \\approx a +
    b \\log r`; ``slope = b`` is the order (−1 for :math:`O(1/r)`). Only the last ``tail``
    fraction of rounds with :math:`e_r > ` ``floor`` enters the fit (the transient and the
    round-off floor are excluded). Returns a dict with ``slope``, ``intercept``, ``r2``,
    ``factor`` (linear only), ``rounds_used``.
    """
    if kind not in ("linear", "sublinear"):
        raise InvalidParameterError(f"kind must be 'linear' or 'sublinear'; got {kind!r}")
    e = np.asarray(errors, dtype=float)
    r = np.arange(e.size, dtype=float)
    start = int(np.floor((1.0 - tail) * e.size))
    sel = (r >= max(start, 1 if kind == "sublinear" else 0)) & np.isfinite(e) & (e > floor)
    if sel.sum() < 3:
        return {"kind": kind, "slope": float("nan"), "intercept": float("nan"), "r2": float("nan"),
                "factor": float("nan"), "rounds_used": int(sel.sum())}
    x = r[sel] if kind == "linear" else np.log(r[sel])
    yv = np.log(e[sel])
    A = np.vstack([x, np.ones_like(x)]).T
    (slope, intercept), *_ = np.linalg.lstsq(A, yv, rcond=None)
    resid = yv - (slope * x + intercept)
    ss_tot = float(np.sum((yv - yv.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else 1.0
    out = {"kind": kind, "slope": float(slope), "intercept": float(intercept), "r2": r2,
           "rounds_used": int(sel.sum())}
    out["factor"] = float(np.exp(slope)) if kind == "linear" else float("nan")
    return out


# --------------------------------------------------------------------------- report
@dataclass
class Report:
    """The result of a verification.

    Attributes
    ----------
    rows : per-round dicts (see the module docstring); ``table`` is the same as a pandas
        DataFrame when pandas is installed, else the list itself; ``to_frame()`` always a
        DataFrame (``ImportError`` naming the extra without pandas).
    rate : the fitted rate (see :func:`fit_rate`) plus ``expected`` (the paper's rate kind) and
        ``behaviour``; slope and factor are NaN when the error does not converge (it is then
        described in words, never fitted).
    passed : the verdict (``verdict`` says on what); ``reasons`` lists every failed check.
    final : the last row; ``rounds_to_tol``: first round at which the error met the tolerance.
    diagnosis : the error's course in words, the theory's prediction, the comparison, the
        predicted rounds to the tolerance and the causes (module docstring).
    """

    rows: list
    rate: dict
    passed: bool
    reasons: list
    tol: float
    error_metric: str
    rounds_to_tol: int | None
    solver: str = ""
    family: str = ""
    extra: dict = field(default_factory=dict)
    verdict: str = "tol"
    diagnosis: dict = field(default_factory=dict)

    @property
    def table(self):
        return table(self.rows)

    def _not_graded_summary(self) -> str:
        """A run recorded without a certified oracle (:func:`drflmodel.flower.recorder.not_graded`):
        no verdict on convergence, what was checked without an oracle, and why."""
        lines = [f"NOT GRADED: {self.solver or 'iterates'} vs {self.family or 'oracle'} (no certified oracle; "
                 f"checked without one: {self.extra.get('checked', '')})"]
        lines += [f"  caveat: {c}" for c in self.extra.get("caveats", [])]
        partial = self.extra.get("partial_participation")
        if partial:
            lines.append(f"  partial participation (not every client took part) in {len(partial)} round(s)")
        lines += [f"  reason: {reason}" for reason in self.reasons]
        return "\n".join(lines)

    def to_frame(self):
        return to_frame(self.rows)

    @property
    def final(self) -> dict:
        return self.rows[-1] if self.rows else {}

    @property
    def converged(self) -> bool:
        """Whether the last round meets the tolerance -- what ``passed`` means with ``verdict="tol"``;
        with ``verdict="rate"`` a run may pass without it (the summary's first line then says so)."""
        value = self.final.get(self.error_metric, float("nan")) if self.final else float("nan")
        return bool(np.isfinite(value) and abs(value) <= self.tol)

    def _judged_on(self) -> str:
        """What the verdict judged, in words; a PASSED that is not at the tolerance says so and
        says what was checked instead (on the same line as the verdict)."""
        metric, tol = self.error_metric, self.tol
        if self.verdict == "tol":
            return f"tolerance {tol:g} on {metric}"
        d = self.diagnosis
        by_bound = d.get("decided_by") == "theorem bound"
        on = "on the theorem's bound" if by_bound else f"on the rate (margin {d.get('margin', 0.25):g})"
        final = abs(float(self.final.get(metric, np.nan))) if self.final else float("nan")
        if self.converged:
            return f"{on}; converged: {metric} met tol {tol:g} at round {self.rounds_to_tol}"
        if not self.passed:
            return f"{on}; tolerance {tol:g} on {metric} reported"
        if by_bound:
            b = d["bound"]
            what = (f"||x - x*||^2 stayed below {b['theorem']}'s explicit bound at "
                    f"every round (largest ratio {b['largest_ratio']:.3g} at round {b['largest_ratio_round']})")
            if b.get("potential"):
                what += " and the proof's potential fell at every round"
        else:
            c = d["comparison"]
            what = (f"the error fell {c['ratio']:.3g}x as much as the theory's bound over rounds "
                    f"{c['window'][0]}-{c['window'][1]}")
        return f"{on}; NOT converged: {metric} = {final:.3e} > tol {tol:g} -- checked instead: {what}"

    def summary(self) -> str:
        if self.extra.get("not_graded"):
            return self._not_graded_summary()
        f = self.final
        verdict = "PASSED" if self.passed else "FAILED"
        source = self.extra.get("oracle_source")
        lines = [f"{verdict}: {self.solver or 'iterates'} vs {self.family or 'oracle'} "
                 f"({len(self.rows) - 1} rounds, {self._judged_on()}{'; ' + source if source else ''})"]
        lines += [f"  caveat: {c}" for c in self.extra.get("caveats", [])]
        if f:
            shown = [self.error_metric] + [k for k in ("rel_gap", "dist_lambda", "constraint_violation")
                                           if k != self.error_metric]
            parts = [f"{k}={f[k]:.3e}" for k in shown
                     if k in f and f[k] is not None and np.isfinite(f[k])]
            lines.append("  final: " + ", ".join(parts))
        d = self.diagnosis
        if d.get("text"):
            lines.append(f"  error: {d['text']}")
        rt = self.rate
        alt = (rt or {}).get("alternative") or {}
        if rt and rt.get("kind") != "linear" and np.isfinite(alt.get("r2", np.nan)) and \
                alt["r2"] >= rt.get("r2", -np.inf) and alt.get("factor", 1.0) < 1.0:
            # no rate kind claimed and the errors fall geometrically: say so, not "O(r^-12.67)"
            lines.append(f"  empirical rate: linear, factor {alt['factor']:.4f}/round (R^2={alt['r2']:.3f}; "
                         f"fits better than O(r^{rt['slope']:.2f}), R^2={rt['r2']:.3f}); "
                         f"paper: {rt.get('expected') or 'n/a'}")
        elif rt and np.isfinite(rt.get("slope", np.nan)):
            if rt["kind"] == "linear":
                lines.append(f"  empirical rate: linear, factor {rt['factor']:.4f}/round (R^2={rt['r2']:.3f}); "
                             f"paper: {rt.get('expected') or 'n/a'}")
            else:
                lines.append(f"  empirical rate: O(r^{rt['slope']:.2f}) (R^2={rt['r2']:.3f}); "
                             f"paper: {rt.get('expected') or 'n/a'}")
        theory = d.get("theory")
        if theory:
            lines.append(f"  theory: {theory['statement']}" + (f" -- {theory['source']}" if theory["source"] else ""))
        if d.get("comparison", {}).get("text") and theory and theory.get("kind"):
            aside = " (for information: the verdict is on the theorem's bound)" \
                if d.get("decided_by") == "theorem bound" else ""
            lines.append(f"  rate check: {d['comparison']['text']}{aside}")
        bound = d.get("bound")
        if bound:
            lines.append(f"  theorem bound: {bound['text'] if bound['applies'] else 'none checked: ' + bound['why_not']}")
        if self.rounds_to_tol is not None:
            lines.append(f"  rounds to tolerance: {self.rounds_to_tol}")
        else:
            pred = d.get("predicted_rounds") or {}
            more = []
            if pred.get("theory") is not None:
                more.append(f"at the theory's rate {diag.describe_rounds(pred['theory'])}")
            if pred.get("observed") is not None:
                more.append(f"at the observed rate {diag.describe_rounds(pred['observed'])}")
            lines.append("  rounds to tolerance: not reached" + ("; predicted " + ", ".join(more) if more else ""))
            for cause in d.get("causes", []):
                lines.append(f"  cause: {cause}")
        partial = self.extra.get("partial_participation")
        if partial:
            shown = ", ".join(map(str, partial[:10])) + (", ..." if len(partial) > 10 else "")
            lines.append(f"  partial participation (not every client took part) in {len(partial)} "
                         f"round(s): {shown}")
        for reason in self.reasons:
            lines.append(f"  reason: {reason}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return jsonable({"passed": self.passed, "converged": self.converged, "verdict": self.verdict,
                         "graded": not self.extra.get("not_graded"),
                         "reasons": self.reasons,
                         "tol": self.tol, "error_metric": self.error_metric,
                         "rounds_to_tol": self.rounds_to_tol, "rate": self.rate, "diagnosis": self.diagnosis,
                         "solver": self.solver, "family": self.family, "rows": self.rows, "extra": self.extra})

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    def plot(self, path=None, ax=None):
        """Plot the error curves (log scale) to ``path`` (PNG/PDF) or onto ``ax``."""
        from .plots import plot_report
        return plot_report(self, path=path, ax=ax)


# --------------------------------------------------------------------------- core
def _problem_weight_set(problem):
    for name in ("weights", "weight_set", "ambiguity_set"):
        w = getattr(problem, name, None)
        if w is not None and hasattr(w, "contains"):
            return w
    return None


def _rows(problem, solution, T, L, times, bound=None) -> list[dict]:
    """The per-round table (module docstring); distances between the identifiable
    representatives ``problem.identifiable(theta)`` when the problem defines them."""
    theta_star = np.asarray(solution.theta, dtype=float)
    identify = getattr(problem, "identifiable", None)
    T_id = identify(T) if callable(identify) and np.all(np.isfinite(T)) else T
    theta_star = identify(theta_star) if callable(identify) else theta_star
    g_star = float(solution.value)
    lam_star = None if solution.weights is None else np.asarray(solution.weights, float)
    objective = problem.objective_for(solution) if hasattr(problem, "objective_for") else problem.objective
    wset = _problem_weight_set(problem)
    violation = getattr(problem, "constraint_violation", None)
    rows = []
    for r, th in enumerate(T):
        d = float(np.linalg.norm(T_id[r] - theta_star))
        try:
            g = float(objective(th))
        except (ValueError, ArithmeticError):
            g = float("nan")
        row = {"round": r, "dist_theta": d, "dist_theta_sq": d * d, "objective": g,
               "rel_gap": (g - g_star) / max(1.0, abs(g_star)) if np.isfinite(g) else float("inf")}
        if L is not None:
            lam = L[r]
            if lam_star is not None and lam_star.shape == lam.shape:
                row["dist_lambda"] = float(np.linalg.norm(lam - lam_star))
            if wset is not None:
                row["lambda_feasible"] = bool(wset.contains(lam, tol=1e-6))
        if callable(violation):
            row["constraint_violation"] = float(violation(th))
        if times is not None:
            row["time"] = float(np.asarray(times)[r])
        if bound is not None and bound.applies:
            row["theory_bound"] = float(bound.bound[r])
        rows.append(row)
    return rows


def _diagnose(abs_err, tol, error_metric, kind, expected_rate, prediction, problem, solution, margin):
    """``(rate, diagnosis)``: the error's course, the fitted rate (converging errors only), the
    comparison with the theory, the predicted rounds to ``tol`` and the causes."""
    course = diag.behaviour(abs_err, tol, error_metric)
    a, b = diag.window(abs_err, tol)
    if course["behaviour"] in ("converged", "converging"):
        rate = fit_rate(abs_err[:b + 1], kind=kind)
        if expected_rate is None:
            rate["alternative"] = fit_rate(abs_err[:b + 1], kind="linear")
    else:
        rate = {"kind": kind, "slope": float("nan"), "intercept": float("nan"), "r2": float("nan"),
                "factor": float("nan"), "rounds_used": 0}
    rate["expected"] = expected_rate
    rate["behaviour"] = course["behaviour"]
    comparison = diag.compare(abs_err, prediction, error_metric, a, b, margin)
    causes = list(prediction.notes) if prediction is not None else []
    if abs_err[-1] > tol:
        scale = diag.feature_scale_note(problem)
        if scale:
            causes.insert(0, scale)
        if course["behaviour"] in ("stalling", "oscillating"):
            floor = diag.oracle_precision_note(abs_err, error_metric, problem, solution)
            if floor:
                causes.insert(0, floor)
    diagnosis = {"behaviour": course["behaviour"], "text": course["text"], "margin": margin,
                 "theory": None if prediction is None else prediction.to_dict(), "comparison": comparison,
                 "predicted_rounds": (diag.rounds_to_tol(abs_err, tol, prediction, error_metric, rate)
                                      if abs_err[-1] > tol and course["behaviour"] in ("converging", "stalling")
                                      else {"theory": None, "observed": None}),
                 "causes": causes}
    return rate, diagnosis


def verify_iterates(problem, solution: Solution, thetas, lambdas=None, tol: float = 1e-6,
                    expected_rate: str | None = None, error_metric: str | None = None,
                    times=None, solver: str = "", require_rate: bool = True,
                    prediction: Prediction | None = None, verdict: str = "tol",
                    rate_margin: float = 0.25, bound: TheoremBound | None = None) -> Report:
    """Verify iterates produced anywhere (a user's own implementation included).

    Parameters
    ----------
    problem : the drflmodel ``Problem`` the iterates claim to solve.
    solution : its certified :class:`~drflmodel.solution.Solution`, solved to a gap that bounds its
        own error on the metric below ``tol`` (e.g. ``problem.solve(gap_tol=1e-10)``,
        :data:`ORACLE_GAP_TOL`; ``solve()`` stops at its default 1e-6). With ``verdict="tol"`` a
        solution whose certificate bounds its own error only above ``tol``
        (for a :math:`\\mu`-strongly convex objective :math:`2(U-L)/\\mu` for ``dist_theta_sq``,
        :math:`(U-L)/\\max(1,|U|)` for ``rel_gap``) fails the verdict with that reason, naming the
        ``gap_tol`` to re-solve with; ``report.diagnosis["oracle"]`` states the bound either way.
    thetas : array ``(R+1, P)`` of model iterates (round 0 first), in the layout of
        :mod:`drflmodel.layout` (``P = K d``; distances are measured between the identifiable
        representatives ``problem.identifiable(theta)``: for a softmax model, the class-centred
        coefficients of every unpenalized feature).
    lambdas : optional array ``(R+1, n)`` of dual iterates (client weights).
    tol : tolerance on the error metric for the verdict and ``rounds_to_tol``.
    expected_rate : ``"linear"``, ``"sublinear"`` or ``None`` -- the rate the paper proves.
    error_metric : ``"dist_theta_sq"`` (default when :math:`\\theta^\\star` is unique),
        ``"dist_theta"`` or ``"rel_gap"`` (default when the certificate does not pin
        :math:`\\theta^\\star`, e.g. status ``"local"``).
    times : optional array ``(R+1,)`` of wall-clock seconds at each round (a ``time`` column of
        the report's table).
    solver : the name of the algorithm that produced the iterates, for the report's title.
    require_rate : with ``expected_rate="linear"``, whether a tolerance that was not met also fails
        the verdict when the fitted rate is not a good linear contraction (default ``True``).
    prediction : what the theory predicts for the run (the rate of the solver's paper for the
        problem's constants and the schedule used; :func:`verify` computes it from a drflmodel
        trace). Without one nothing is compared.
    verdict : ``"tol"`` (the final error meets ``tol``) or ``"rate"`` (the error converges at
        least ``1 - rate_margin`` times as fast as the theory's bound; module docstring).
    rate_margin : in ``[0, 1)``, the margin of ``verdict="rate"`` (default 0.25).
    bound : the theorem's explicit bound for this run (:func:`drflmodel._bounds.theorem_bound`;
        ``verify`` computes it from the trace). When it applies, every round is checked against it
        (rows get ``theory_bound``), a violation fails either verdict, and ``verdict="rate"`` is
        decided by it instead of the rate comparison.

    Returns
    -------
    Report
        One row per round (``report.rows``; ``report.table`` as a DataFrame with pandas; a
        ``theory_bound`` column where the theorem's bound applies), the final errors
        (``report.final``), the fitted rate (``report.rate``), the error's course, the theory's
        prediction and the bound's check (``report.diagnosis``: ``behaviour``, ``theory``,
        ``comparison``, ``bound``, ``decided_by``), ``report.rounds_to_tol``, the verdict
        (``report.passed``, ``report.converged``, with ``report.reasons`` when it fails) and
        ``report.summary()``.
    """
    tol = check_real(tol, "tol", low=0.0, low_open=True)
    verdict = check_choice(verdict, "verdict", VERDICTS)
    rate_margin = check_real(rate_margin, "rate_margin", low=0.0, high=1.0, high_open=True)
    if expected_rate not in RATE_KINDS:
        raise InvalidParameterError(f"expected_rate must be one of {RATE_KINDS}; got {expected_rate!r}")
    if solution is None or solution.theta is None:
        raise InvalidParameterError("solution must be a solved Solution with theta (status "
                                    f"{getattr(solution, 'status', None)!r} has none)")
    T = np.asarray(thetas, dtype=float)
    theta_star = np.asarray(solution.theta, dtype=float)
    if T.ndim != 2 or T.shape[1] != theta_star.size:
        raise InvalidDataError(f"thetas must have shape (rounds, {theta_star.size}); got {T.shape}")
    L = None
    if lambdas is not None:
        L = np.asarray(lambdas, dtype=float)
        if L.ndim != 2 or L.shape[0] != T.shape[0]:
            raise InvalidDataError(f"lambdas must have shape ({T.shape[0]}, n); got {L.shape}")
    if error_metric is None:
        error_metric = "dist_theta_sq" if solution.status == "optimal" else "rel_gap"
    if error_metric not in ("dist_theta_sq", "dist_theta", "rel_gap"):
        raise InvalidParameterError(
            f"error_metric must be 'dist_theta_sq', 'dist_theta' or 'rel_gap'; got {error_metric!r}")

    rows = _rows(problem, solution, T, L, times, bound)
    err = np.array([row[error_metric] for row in rows], dtype=float)
    abs_err = np.abs(err)
    met = np.nonzero(abs_err <= tol)[0]
    rounds_to_tol = int(met[0]) if met.size else None
    rate, diagnosis = _diagnose(abs_err, tol, error_metric, expected_rate or "sublinear", expected_rate,
                                prediction, problem, solution, rate_margin)
    by_bound = bound is not None and bound.applies
    diagnosis["bound"] = None if bound is None else bound.to_dict()
    slow_dual = bound.slow_dual_note() if by_bound and bound.holds and abs_err[-1] > tol else None
    if slow_dual and diagnosis["behaviour"] in ("growing", "stalling", "oscillating"):
        diagnosis["causes"].insert(0, slow_dual)
    diagnosis["decided_by"] = "tolerance" if verdict == "tol" else ("theorem bound" if by_bound else "rate comparison")
    oracle = diag.oracle_error_bound(error_metric, problem, solution)
    diagnosis["oracle"] = {"relative_gap": solution.relative_gap, "error_bound": oracle,
                           "text": _oracle_text(error_metric, oracle, tol)}

    reasons = []
    if verdict == "tol" and oracle is not None and oracle > tol:
        reasons.append(diagnosis["oracle"]["text"])
    if not np.all(np.isfinite(T)):
        reasons.append("iterates contain NaN or inf (diverged)")
    if verdict == "tol" and abs_err[-1] > tol:
        reasons.append(f"final {error_metric} = {abs_err[-1]:.3e} exceeds tol = {tol:g}")
    if abs_err.size > 1 and np.isfinite(abs_err[-1]) and abs_err[-1] > 10 * max(abs_err[0], tol):
        reasons.append(f"error grew from {abs_err[0]:.3e} to {abs_err[-1]:.3e} (divergence)")
    if err[-1] < -max(tol, 1e-6) and error_metric == "rel_gap":
        reasons.append(f"iterate objective below the certified optimum by {-err[-1]:.3e}: "
                       "the certificate or the iterate's objective is wrong")
    if verdict == "tol":
        if (expected_rate == "linear" and require_rate and rounds_to_tol is None
                and diagnosis["behaviour"] == "converging" and not (rate["slope"] < 0 and rate["r2"] > 0.8)):
            reasons.append(f"paper proves a linear rate but the fitted slope is {rate['slope']:.3g} "
                           f"(R^2={rate['r2']:.2f})")
    elif not by_bound:
        comparison = diagnosis["comparison"]
        if diagnosis["behaviour"] not in ("converged", "converging"):
            reasons.append(f"no rate to compare: the error is {diagnosis['behaviour']}")
        elif comparison["matches"] is None:
            reasons.append(f"no rate verdict possible: {comparison['text']}")
        elif not comparison["matches"]:
            reasons.append(f"the rate does not match the theory's: {comparison['text']}")
        elif not comparison["informative"] and abs_err[-1] > tol:
            reasons.append(f"no rate verdict possible: {comparison['text']}")
    if by_bound and not bound.holds:
        reasons.append(f"the theorem's explicit bound fails for this run -- a solver defect or a wrong "
                       f"constant: {bound.text()}")
    if L is not None and any(row.get("lambda_feasible") is False for row in rows):
        bad = sum(row.get("lambda_feasible") is False for row in rows)
        reasons.append(f"dual iterate infeasible for the weight set in {bad} rounds")
    if "constraint_violation" in rows[-1] and rows[-1]["constraint_violation"] > max(tol, 1e-4):
        reasons.append(f"final constraint violation {rows[-1]['constraint_violation']:.3e}")
    return Report(rows=rows, rate=rate, passed=not reasons, reasons=reasons, tol=tol,
                  error_metric=error_metric, rounds_to_tol=rounds_to_tol, solver=solver,
                  family=getattr(problem, "family", type(problem).__name__), verdict=verdict,
                  diagnosis=diagnosis)




def _oracle_text(metric: str, bound: float | None, tol: float) -> str:
    """What the oracle's certificate guarantees of its own error on ``metric`` against ``tol``."""
    if bound is None:
        return (f"the oracle solution's certificate does not bound its own {metric} (not strongly convex, or no "
                f"finite bounds): errors are measured against its point, not a proven theta*")
    if bound <= tol:
        return f"the oracle solution's certificate bounds its own {metric} error by {bound:.2g} <= tol = {tol:g}"
    return (f"the oracle solution's certified gap bounds its own {metric} error only by {bound:.2g}, above "
            f"tol = {tol:g}: this tolerance cannot be verified against it; re-solve the solution with "
            f"problem.solve(gap_tol={ORACLE_GAP_TOL:g}) (or a smaller gap_tol)")


def _trace_arrays(trace):
    thetas = getattr(trace, "thetas", None)
    if thetas is None:
        thetas = getattr(trace, "theta", None)
    if thetas is None:
        raise InvalidDataError("trace has no per-round 'thetas'")
    lambdas = None
    for name in ("lambdas", "weights", "lam"):
        lambdas = getattr(trace, name, None)
        if lambdas is not None:
            break
    times = getattr(trace, "times", None)
    return np.asarray(thetas), (None if lambdas is None else np.asarray(lambdas)), times


def verify(trace, solution: Solution, tol: float = 1e-6, expected_rate: str | None = "auto",
           error_metric: str | None = None, problem=None, verdict: str = "tol",
           rate_margin: float = 0.25) -> Report:
    """Verify a drflmodel :class:`~drflmodel.solvers.Trace` against a certified solution.

    ``expected_rate="auto"`` takes the rate the solver's paper proves from
    ``trace.expected_rate`` (set by each solver); pass ``None`` to fit without expectation.
    The theory's prediction for the run (the rate of the solver's paper) is computed from the
    trace's recorded schedule constants and the problem; ``verdict`` and ``rate_margin`` as in
    :func:`verify_iterates`, which returns the :class:`Report`.
    """
    problem = problem if problem is not None else getattr(solution, "problem", None)
    if problem is None:
        problem = getattr(trace, "problem", None)
    if problem is None:
        raise InvalidParameterError("solution has no problem attached; pass problem=...")
    thetas, lambdas, times = _trace_arrays(trace)
    if expected_rate == "auto":
        expected_rate = getattr(trace, "expected_rate", None)
    if times is not None and len(times) != len(thetas):
        times = None
    report = verify_iterates(problem, solution, thetas, lambdas, tol=tol, expected_rate=expected_rate,
                             error_metric=error_metric, times=times,
                             solver=getattr(trace, "solver", "") or "",
                             prediction=predict(trace, problem), verdict=verdict, rate_margin=rate_margin,
                             bound=theorem_bound(trace, problem, solution))
    partial = (getattr(trace, "info", None) or {}).get("partial_participation")
    if partial:       # e.g. a Flower run in which some clients failed or were not sampled
        report.extra["partial_participation"] = list(partial)
    return report


class Verifier:
    """A live verifier usable as a solver ``callback``: it records the error per round and stops
    the run (``StopIteration``) once the error metric meets ``tol``.

    The callback receives SciPy-style intermediate results with at least ``theta`` (and
    optionally ``round``); ``history`` keeps ``(round, error)`` pairs and ``stopped_at`` the
    round of the stop. The stop compares with the oracle's point: where ``solution``'s certificate
    bounds its own error on the metric only above ``tol`` (:func:`verify_iterates`; solve it with e.g.
    ``problem.solve(gap_tol=1e-10)``) a :class:`~drflmodel.errors.OracleGapWarning` names the
    ``gap_tol`` to re-solve with and ``caveat`` keeps it (``oracle_bound``: that bound, ``None``
    where the certificate bounds nothing). The error is also written on the result (``intermediate_result.error``)
    so that the solver's progress display shows it.
    """

    def __init__(self, solution: Solution, tol: float = 1e-6, error_metric: str = "dist_theta_sq",
                 problem=None):
        if error_metric not in ("dist_theta_sq", "dist_theta", "rel_gap"):
            raise InvalidParameterError(
                f"error_metric must be 'dist_theta_sq', 'dist_theta' or 'rel_gap'; got {error_metric!r}")
        self.solution = solution
        self.tol = check_real(tol, "tol", low=0.0, low_open=True)
        self.error_metric = error_metric
        self.problem = problem if problem is not None else solution.problem
        self.oracle_bound = diag.oracle_error_bound(error_metric, self.problem, solution)
        self.caveat = None
        if self.oracle_bound is not None and self.oracle_bound > self.tol:
            import warnings

            from .errors import OracleGapWarning

            self.caveat = f"solution: {_oracle_text(error_metric, self.oracle_bound, self.tol)}"
            warnings.warn(self.caveat, OracleGapWarning, stacklevel=2)
        self.history: list[tuple[int, float]] = []
        self.stopped_at: int | None = None

    def error(self, theta) -> float:
        theta = np.asarray(theta, float)
        if not np.all(np.isfinite(theta)):                   # a diverged iterate: never within tol
            return float("nan")
        if self.error_metric == "rel_gap":
            objective = getattr(self.problem, "objective_for", lambda s: self.problem.objective)(self.solution)
            g = float(objective(theta))
            return (g - self.solution.value) / max(1.0, abs(self.solution.value))
        star = np.asarray(self.solution.theta, float)
        identify = getattr(self.problem, "identifiable", None)
        if callable(identify):
            theta, star = identify(theta), identify(star)
        d = float(np.linalg.norm(theta - star))
        return d * d if self.error_metric == "dist_theta_sq" else d

    def __call__(self, intermediate_result: Any) -> None:
        theta = getattr(intermediate_result, "theta", None)
        if theta is None and isinstance(intermediate_result, dict):
            theta = intermediate_result.get("theta")
        r = getattr(intermediate_result, "round", len(self.history))
        e = self.error(theta)
        self.history.append((int(r), float(e)))
        if not isinstance(intermediate_result, dict):
            try:
                intermediate_result.error = float(e)
            except AttributeError:  # a read-only result object: nothing to show
                pass
        if abs(e) <= self.tol:
            self.stopped_at = int(r)
            raise StopIteration
