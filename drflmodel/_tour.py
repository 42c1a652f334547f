"""``drflmodel tour``: the main job.

For each of the five formulation families, on built-in data (no network): solve the exact
oracle with its certificate, run the family's distributed solver and one baseline, verify each
against the certified solution of the problem it solves, and print one summary table. A JSON
report (every solution, every verification table) and figures go to the output directory.

Every stop is a small function returning :class:`Leg` records, so the tour, its tests and its
report share one definition. Tolerances are stated per leg (the rate the paper proves decides
what is reachable in a few hundred rounds: linear-rate solvers are held to 1e-8 in squared
distance, sublinear ones to a relative objective gap).
"""

from __future__ import annotations

import contextvars
import json
import re
import sys
import textwrap
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._progress import ErrorProbe, progress_enabled
from .verification import ORACLE_GAP_TOL

__all__ = ["run_tour", "STOPS", "Leg", "format_table", "format_compact", "gap_cell", "summary_line"]


@dataclass
class Leg:
    """One row of the tour table: an oracle and (optionally) a verified distributed run."""

    family: str
    data: str
    problem: object
    solution: object
    solver: str = ""
    report: object = None
    tol: float = float("nan")
    metric: str = ""
    seconds: float = 0.0
    note: str = ""
    extra: dict = field(default_factory=dict)

    def row(self) -> dict:
        sol, rep = self.solution, self.report
        return {
            "family": self.family,
            "data": self.data,
            "oracle value": sol.value,
            "status": sol.status,
            "certificate gap": sol.relative_gap,
            "solver": self.solver or "-",
            "rounds": (len(rep.rows) - 1) if rep is not None else None,
            "rounds to tol": (rep.rounds_to_tol if rep is not None else None),
            "tol": f"{self.tol:g} {self.metric}" if rep is not None else "",
            "verdict": ("passed" if rep.passed else "FAILED") if rep is not None else "-",
            "seconds": self.seconds,
        }


def _verify(dm, trace, sol, tol, metric, problem=None):
    return dm.verify(trace, sol, tol=tol, error_metric=metric, problem=problem)


#: the tour's ``progress`` argument, read by every leg (the stops keep their ``(dm, quick)`` signature)
_PROGRESS: contextvars.ContextVar = contextvars.ContextVar("drflmodel_tour_progress", default=None)


def _run_leg(dm, family, data, problem, sol, solver, tol, metric, note="", seed=0, variant=""):
    """Run ``solver`` on ``problem`` and verify it against ``sol``; ``variant`` (e.g. ``"b=16"``)
    is appended to the solver's name in the table."""
    t0 = time.perf_counter()
    progress = _PROGRESS.get()
    # on a terminal the run's progress shows the error being verified (a probe that never stops
    # the run, evaluated at most twice a second); elsewhere the run has no callback at all
    probe = ErrorProbe(dm.Verifier(sol, tol=tol, error_metric=metric, problem=problem).error) \
        if progress_enabled(progress) else None
    trace = solver.run(problem, seed=seed, callback=probe, progress=progress)
    rep = _verify(dm, trace, sol, tol, metric, problem=problem)
    name = type(solver).__name__ + (f" {variant}" if variant else "")
    return Leg(family, data, problem, sol, solver=name, report=rep, tol=tol,
               metric=metric, seconds=time.perf_counter() - t0, note=note, extra={"trace": trace})


# --------------------------------------------------------------------------- the five stops
def stop_dro(dm, quick: bool) -> list[Leg]:
    """Federated DRO, χ² penalty (Scaff-PD paper's synthetic setup) — Scaff-PD and DRFA."""
    fed = dm.datasets.synthetic_regression(n_clients=5, dim=10, samples=100, seed=0)
    loss = dm.losses.Squared()
    prob = dm.FederatedDRO(fed, loss, weights=dm.sets.ChiSquare(5, rho=0.1), l2=0.1)
    sol = prob.solve(gap_tol=ORACLE_GAP_TOL)   # the reference the iterates are verified against
    data = "synthetic regression (Scaff-PD recipe), 5x100x10"
    legs = [_run_leg(dm, "federated DRO (chi_square, rho=0.1)", data, prob, sol,
                     dm.solvers.ScaffPD(rounds=2000 if quick else 2500, local_steps=10),
                     1e-8, "dist_theta_sq")]
    legs.append(_run_leg(dm, "federated DRO (chi_square, rho=0.1)", data, prob, sol,
                         dm.solvers.DRFA(rounds=400, local_steps=10), 1e-3, "rel_gap",
                         note="baseline with the same J=10 local steps: stalls at its client-drift floor"))
    if not quick:
        legs.append(_run_leg(dm, "federated DRO (chi_square, rho=0.1)", data, prob, sol,
                             dm.solvers.StochasticAFL(rounds=2000, clients_per_round=3), 1e-2, "rel_gap",
                             variant="m=3",
                             note="client sampling, 3 of 5 clients per round (Mohri et al.); O(1/sqrt(R))"))
    return legs


def stop_fafl(dm, quick: bool) -> list[Leg]:
    """FAFL (HCVaR) — the exact oracle; rFedFair against the certified smoothed optimum; FedAvg on ERM.

    rFedFair runs with the descent-lemma step :math:`\\beta=1/L`, :math:`L` the smoothness constant
    of the FAFL paper's Lemma C.1 (its Theorems 1–2 ask for :math:`\\beta\\le1/(40L)`, far too slow to
    show in a tour); its limit is checked against the smoothed target and against the exact optimum
    within the bias :math:`\\mu\\log2\\,\\tau_\\alpha` of the paper's Lemma 2.
    """
    from .solvers.rfedfair import rfedfair_constants

    fed = dm.datasets.synthetic_classification(n_clients=4, dim=5, samples=60, seed=0)
    loss = dm.losses.Logistic()
    p = fed.proportions
    alpha = np.maximum(p, 0.5)
    l2 = 0.05
    prob = dm.FairnessAwareFL(fed, loss, alpha=alpha, l2=l2)
    sol = prob.solve(gap_tol=ORACLE_GAP_TOL)   # the reference the iterates are verified against
    mu = 0.05
    smooth = prob.solve_smoothed(mu)
    X, _, _ = fed.pooled()
    lip = float(np.linalg.norm(X, axis=1).max() + l2 * np.sqrt(2 * np.log(2) / l2))  # ||grad f_i|| on {f <= f(0)}
    L = rfedfair_constants(prob, mu, lip)["L"]
    data = "synthetic classification, 4 clients x 60, alpha_i = max(p_i, 0.5)"
    legs = [Leg("FAFL / HCVaR (exact)", data, prob, sol, note="oracle only")]
    leg = _run_leg(dm, f"FAFL smoothed (mu={mu})", data, prob, smooth,
                   dm.solvers.RFedFair(mu=mu, rounds=1000, local_steps=10, step_size=1.0 / L), 1e-4, "rel_gap",
                   note="step 1/L, L of the FAFL paper's Lemma C.1")
    excess = prob.objective(leg.extra["trace"].final_theta) - sol.value
    bound = mu * np.log(2.0) * prob.tau_alpha
    leg.note += f"; exact FAFL excess {excess:.2e} <= mu log2 tau_alpha = {bound:.2e}: {excess <= bound + 1e-4}"
    legs.append(leg)
    if not quick:
        legs.append(_run_leg(dm, f"FAFL smoothed (mu={mu})", data, prob, smooth,
                             dm.solvers.RFedFair(mu=mu, rounds=1000, local_steps=10, step_size=1.0 / L,
                                                 batch_size=16), 1e-3, "rel_gap", variant="b=16",
                             note="minibatch local steps (batch 16; the FAFL paper's theorems assume exact local "
                                  "gradients): a noise floor O(step/batch)"))
    erm = dm.FederatedDRO(fed, loss, weights=dm.sets.HCVaR(p, np.ones(fed.n_clients)), l2=l2)
    erm_sol = erm.solve(gap_tol=ORACLE_GAP_TOL)   # the reference the iterates are verified against
    legs.append(_run_leg(dm, "ERM (p-weighted)", data, erm, erm_sol,
                         dm.solvers.FedAvg(rounds=400, local_steps=1), 1e-8, "dist_theta_sq",
                         note="baseline"))
    return legs


def stop_wasserstein(dm, quick: bool) -> list[Leg]:
    """Wasserstein DRFL (smooth hinge, ℓ1 transport, ℓ2 weight ball) — AD-LPMM; DRFA on the
    ρ = 0, Q = Δ special case (the DRFL paper's App. C)."""
    m = 20 if quick else 40
    fed = dm.datasets.synthetic_classification(n_clients=3, dim=5, samples=m, seed=0)
    S = fed.n_clients
    loss = dm.losses.SmoothHinge()
    weights = dm.sets.LpBall(np.full(S, 1.0 / S), 0.2, 2)
    prob = dm.WassersteinDRFL(fed, loss, radius=0.05, kappa=1.0, norm=1, weights=weights)
    sol = prob.solve()
    data = f"synthetic classification, {S} clients x {m}"
    legs = [_run_leg(dm, "Wasserstein DRFL (rho=0.05, kappa=1, l1)", data, prob, sol,
                     dm.solvers.ADLPMM(rounds=600, proximal="tight"), 1e-6, "rel_gap",
                     note="stops when the primal residual and the change of the iterates are below 1e-6 "
                          "(the DRFL paper leaves the stopping rule open)")]
    drfa = dm.FederatedDRO(fed, loss, weights=dm.sets.Simplex(S))
    legs.append(_run_leg(dm, "DRFA (rho=0, Q=simplex)", data, drfa, drfa.solve(),
                         dm.solvers.DRFA(rounds=500, local_steps=1), 1e-6, "rel_gap", note="baseline"))
    return legs


def stop_relative(dm, quick: bool) -> list[Leg]:
    """Relative fairness on penguins (paper setup, certified SDP) — Scaff-PD-IA; Scaff-PD at φ = 0."""
    fed = dm.datasets.penguins(n_per_species=10)
    loss = dm.losses.Squared()
    S = dm.sets.Simplex(3)
    box = (np.array([-35.0, 0.0, 0.0]), np.array([-25.0, 1.0, 1.0]))
    prob = dm.RelativeFairness(fed, loss, A=S, B=S, phi=0.05, box=box)
    sol = prob.solve()
    data = "penguins, 3 species x 10 (paper setup, box)"
    legs = [Leg("relative fairness (phi=0.05, non-convex)", data, prob, sol,
                note="certified by the rank-one SDP")]
    syn = dm.datasets.synthetic_regression(n_clients=5, dim=4, samples=40, noise=0.5, seed=0)
    A = dm.sets.CVaR(5, 0.4)
    conv = dm.RelativeFairness(syn, loss, A=A, B=dm.sets.CVaR(5, 0.4), phi=0.1)
    csol = conv.solve()
    syn_data = "synthetic regression 5x40x4"
    legs.append(_run_leg(dm, "relative fairness (phi=0.1, CVaR 0.4, convex)", syn_data, conv, csol,
                         dm.solvers.ScaffPDIA(rounds=500 if quick else 800, local_steps=5, schedule="constant",
                                              step_size=0.05, dual_step=0.05),
                         1e-8, "dist_theta_sq", note="constant steps tau = sigma = 0.05, J = 5 local steps"))
    dro = dm.FederatedDRO(syn, loss, weights=A)
    dsol = dro.solve(gap_tol=ORACLE_GAP_TOL)   # the reference the iterates are verified against
    legs.append(_run_leg(dm, "phi = 0: federated DRO (CVaR 0.4)", syn_data, dro, dsol,
                         dm.solvers.ScaffPD(rounds=800, local_steps=5), 1e-3, "rel_gap",
                         note="baseline: Scaff-PD, strongly-convex-concave schedule (Scaff-PD paper, "
                              "Theorem 3.1: O(1/R^2))"))
    return legs


def stop_deo(dm, quick: bool) -> list[Leg]:
    """DEO-constrained fair VFL on Adult (6 parties, 1 active) — FairVFL with c = 0 (its fixed
    points are the KKT pairs of the constrained problem); FedBCD on vertical ERM (the constraint
    inactive).

    Both use the descent step :math:`1/\\eta = 2L` with :math:`L` the smoothness of
    :math:`f(\\cdot,\\lambda)` (``vfl_constants``; Assumption 2 of the fair-VFL paper) and the dual
    step 0.5.
    """
    from .solvers.fairvfl import vfl_constants

    n = 600 if quick else 3000
    vfed = dm.datasets.adult(n_parties=6, active=(0,), n_samples=n, seed=0)
    loss = dm.losses.Logistic()
    prob = dm.DEOConstrained(vfed, loss, eps=0.05, fairness_loss="linear", l2=1e-2)
    sol = prob.solve()
    eta_inv = 2.0 * vfl_constants(prob)["L"]
    data = f"Adult a8a, {n} rows, 6 parties (1 active)"
    legs = [_run_leg(dm, "DEO-constrained (linear, eps=0.05)", data, prob, sol,
                     dm.solvers.FairVFL(rounds=3000, preset="lagrangian", eta_inv=eta_inv),
                     1e-8, "dist_theta_sq", note=f"c=0, 1/eta = 2L = {eta_inv:.3g}, beta = 0.5")]
    run = legs[0].extra["trace"]
    lam = run.iterates.get("lam") if hasattr(run, "iterates") else None
    if lam is not None and len(lam):
        lam_star = np.array([sol.duals["lambda1"], sol.duals["lambda2"]])
        legs[0].note += f"; |lambda - lambda*| = {np.abs(np.asarray(lam[-1]) - lam_star).max():.1e}"
    if not quick:
        legs.append(_run_leg(dm, "DEO-constrained (linear, eps=0.05)", data, prob, sol,
                             dm.solvers.FairVFL(rounds=3000, preset="lagrangian", eta_inv=eta_inv,
                                                passive_steps=3),
                             1e-8, "dist_theta_sq", variant="P=3",
                             note="passive parties take 3 local steps per round (allowed by the fair-VFL "
                                  "paper's analysis; its algorithms take 1)"))
    if not quick:
        free = dm.DEOConstrained(vfed, loss, eps=10.0, fairness_loss="linear", l2=1e-2)
        legs.append(_run_leg(dm, "vertical ERM (eps=10: inactive)", data, free, free.solve(),
                             dm.solvers.FedBCD(rounds=3000, eta_inv=eta_inv), 1e-8, "dist_theta_sq",
                             note="baseline"))
    return legs


def stop_multiclass(dm, quick: bool) -> list[Leg]:
    """Federated DRO with a softmax model (3 classes): Palmer penguins' species from four body
    measurements, one client per island -- Scaff-PD against the certified multi-class optimum."""
    fed = dm.datasets.penguin_species()
    prob = dm.FederatedDRO(fed, dm.losses.Multinomial(), weights=dm.sets.ChiSquare(3, rho=1.0), l2=0.5)
    sol = prob.solve(gap_tol=ORACLE_GAP_TOL)   # the reference the iterates are verified against
    data = "Palmer penguins: species (3 classes) by island, 342x5"
    return [_run_leg(dm, "multi-class DRO (softmax, chi_square)", data, prob, sol,
                     dm.solvers.ScaffPD(rounds=1500, local_steps=2 if quick else 10), 1e-8, "dist_theta_sq",
                     note="theta is the 3 x 5 weight matrix, class by class; distances between class-centred "
                          "representatives")]


STOPS = [("federated DRO", stop_dro), ("FAFL", stop_fafl), ("Wasserstein DRFL", stop_wasserstein),
         ("relative fairness", stop_relative), ("DEO-constrained fair VFL", stop_deo),
         ("multi-class DRO", stop_multiclass)]


# --------------------------------------------------------------------------- output
#: the printed table fits in this many columns (``--wide`` prints :func:`format_table`)
WIDTH = 100
COMPACT_COLUMNS = ("family", "solver", "status", "gap", "rounds", "verdict")
TABLE_KEY = ("gap: the oracle's certificate gap (U - L)/max(1, |U|); a negative gap within the 1e-6\n"
             "tolerance (rounding: L above U by that much) is shown as 0, its raw value in tour.json\n"
             "rounds: rounds to tol / rounds run; data, oracle value and tol of each row: drflmodel tour\n"
             "--wide, or tour.json")
#: a certificate gap in [-GAP_ROUNDING, 0) is rounding: shown as 0 (the raw value stays in tour.json)
GAP_ROUNDING = 1e-6


def gap_cell(gap, digits: int = 1) -> str:
    """A certificate gap for the table: ``"-"`` (none), ``"0"`` for a negative gap within
    :data:`GAP_ROUNDING`, else the value."""
    if gap is None:
        return "-"
    if -GAP_ROUNDING <= gap < 0:
        return "0"
    return f"{gap:.{digits}e}"


def format_table(rows: list[dict]) -> str:
    """The wide table (every column of :meth:`Leg.row` but the timings): ``drflmodel tour --wide``."""
    cols = ["family", "data", "oracle value", "status", "certificate gap", "solver", "rounds to tol",
            "tol", "verdict"]

    def fmt(k, v):
        if k == "certificate gap":
            return gap_cell(v, digits=3)
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.6g}"
        return str(v)

    cells = [[fmt(k, r[k]) for k in cols] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    line = "  ".join(c.ljust(w) for c, w in zip(cols, widths))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(x.ljust(w) for x, w in zip(row, widths)) for row in cells]
    return "\n".join([line, sep, *body])


def _compact_cells(row: dict) -> list[str]:
    gap = row["certificate gap"]
    rounds = "-" if row["rounds"] is None else \
        f"{'-' if row['rounds to tol'] is None else row['rounds to tol']}/{row['rounds']}"
    return [row["family"], row["solver"], row["status"], gap_cell(gap), rounds, row["verdict"]]


def format_compact(rows: list[dict], width: int = WIDTH) -> str:
    """The printed table: :data:`COMPACT_COLUMNS`, at most ``width`` columns; a family name too
    long for its column wraps onto continuation lines (the other cells stay on the first)."""
    cols = list(COMPACT_COLUMNS)
    cells = [_compact_cells(r) for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    room = width - sum(widths[1:]) - 2 * (len(cols) - 1)
    widths[0] = max(len(cols[0]), min(widths[0], room))

    def join(row):
        return "  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip()

    lines = [join(cols), join(["-" * w for w in widths])]
    for row in cells:
        family = textwrap.wrap(row[0], widths[0]) or [""]
        lines.append(join([family[0], *row[1:]]))
        lines.extend(join(["  " + more] + [""] * (len(cols) - 1)) for more in
                     textwrap.wrap(" ".join(family[1:]), widths[0] - 2))
    return "\n".join(lines)


class _Printer:
    """The tour's text output: wrapped to :data:`WIDTH` columns, or as it comes with ``--wide``."""

    def __init__(self, stream, wide: bool):
        self.stream, self.wide = stream, wide

    def __call__(self, text: str = "", indent: str = "    ") -> None:
        if not self.wide:
            text = "\n".join(self._fit(line, indent) for line in text.split("\n"))
        print(text, file=self.stream, flush=True)

    @staticmethod
    def _fit(line: str, indent: str) -> str:
        if len(line) <= WIDTH:
            return line
        lead = line[:len(line) - len(line.lstrip(" "))]
        return textwrap.fill(line.strip(), WIDTH, initial_indent=lead, subsequent_indent=lead + indent,
                             break_on_hyphens=False, break_long_words=False)


def run_tour(out_dir="drflmodel-tour", quick: bool = False, plots: bool = True, stops=None,
             stream=None, wide: bool = False, progress: bool | None = None) -> int:
    """Run the tour; return the exit code (0 iff every oracle is certified or honestly bounded
    and every distributed run passed its verification).

    The printed table fits in 100 columns (:func:`format_compact`; ``wide=True`` prints every
    column, :func:`format_table`); ``tour.json`` in ``out_dir`` has every row and leg in full.
    ``progress`` shows each solver run's rounds, error and elapsed time on a terminal
    (:mod:`drflmodel._progress`; ``None`` = automatic).
    """
    import drflmodel as dm
    from .solution import jsonable

    say = _Printer(stream or sys.stdout, wide)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    legs: list[Leg] = []
    by_stop: dict[str, list[Leg]] = {}
    errors = []
    chosen = STOPS if stops is None else [s for s in STOPS if s[0] in stops]
    t_start = time.perf_counter()
    token = _PROGRESS.set(progress)
    try:
        for k, (name, fn) in enumerate(chosen, 1):
            say(f"[{k}/{len(chosen)}] {name}: solving the oracle, running and verifying the solvers ...")
            t0 = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message="Solution may be inaccurate")  # the certificate decides
                    new = fn(dm, quick)
            except Exception as exc:  # a failing stop is reported, never hidden
                errors.append({"stop": name, "error": f"{type(exc).__name__}: {exc}"})
                say(f"      ERROR in {name}: {type(exc).__name__}: {exc}")
                continue
            legs.extend(new)
            by_stop[name] = new
            say(f"      done in {time.perf_counter() - t0:.1f}s")
    finally:
        _PROGRESS.reset(token)

    rows = [leg.row() for leg in legs]
    if wide:
        say("\n" + format_table(rows))
    else:
        say("\n" + format_compact(rows))
        say(TABLE_KEY, indent="")
    honest = {"optimal", "optimal_within_gap", "local"}
    bad_oracles = [r for r in rows if r["status"] not in honest]
    bad_runs = [r for r in rows if r["verdict"] == "FAILED"]
    for leg in legs:
        if leg.note:
            say(f"  note ({leg.family}, {leg.solver or 'oracle'}): {leg.note}")
    for leg in legs:
        if leg.report is not None and not leg.report.passed:
            say(f"  {leg.solver} on {leg.family}: " + "; ".join(leg.report.reasons))
    total = time.perf_counter() - t_start
    say("\n" + summary_line(rows, len(errors), total))

    report = {"rows": rows, "errors": errors, "seconds": total, "quick": quick,
              "legs": [{"family": leg.family, "data": leg.data, "note": leg.note, "solver": leg.solver,
                        "solution": leg.solution.to_dict(),
                        "report": None if leg.report is None else leg.report.to_dict()} for leg in legs]}
    (out / "tour.json").write_text(json.dumps(jsonable(report), indent=1))
    if plots:
        _figures(dm, by_stop, out)
    say(f"report: {out / 'tour.json'}" + (f"; figures in {out}/" if plots else ""))
    return 0 if not (bad_oracles or bad_runs or errors) else 1


def summary_line(rows: list[dict], n_errors: int, seconds: float) -> str:
    """The tour's last line: how many oracles are certified optimal, which rows are only bounded
    (a valid gap above tolerance, or a local solution with a lower bound) or failed, and the
    distributed runs verified."""
    bounded = [r for r in rows if r["status"] in ("optimal_within_gap", "local")]
    failed = [r for r in rows if r["status"] not in ("optimal", "optimal_within_gap", "local")]
    certified = len(rows) - len(bounded) - len(failed)
    parts = [f"{len(rows)} rows: {certified} oracles certified optimal"]
    parts.append(f"{len(bounded)} only bounded" + (" (" + "; ".join(
        f"{r['family']}: {r['status']}" for r in bounded) + ")" if bounded else ""))
    if failed:
        parts.append(f"{len(failed)} without a certificate (" + "; ".join(
            f"{r['family']}: {r['status']}" for r in failed) + ")")
    runs = sum(r["verdict"] != "-" for r in rows)
    parts.append(f"{sum(r['verdict'] == 'passed' for r in rows)}/{runs} distributed runs verified")
    parts.append(f"{n_errors} errors, {seconds:.0f}s")
    return ", ".join(parts)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def lorenz_groups(legs: list[Leg]) -> dict[str, dict[str, np.ndarray]]:
    """The Lorenz panels of one stop: ``{data: {model: client losses}}`` -- the models of the
    stop that were solved on the same data set, each certified solution once (legs sharing an
    oracle share a curve); solutions without positive losses for at least two clients are left out."""
    groups: dict[str, dict[str, np.ndarray]] = {}
    seen: set[int] = set()
    for leg in legs:
        f = leg.solution.client_losses
        if id(leg.solution) in seen or f is None or np.size(f) < 2 or not np.all(np.asarray(f) > 0):
            continue
        seen.add(id(leg.solution))
        groups.setdefault(leg.data, {})[leg.family] = np.asarray(f, float)
    return groups


def _figures(dm, by_stop: dict[str, list[Leg]], out: Path) -> None:
    """One convergence figure per oracle (every solver verified against it on one log-scale
    plot) and one Lorenz figure per family (:func:`lorenz_groups`: a panel per data set)."""
    try:
        from . import plots
    except ImportError:  # pragma: no cover
        return
    try:
        groups: dict[int, list[Leg]] = {}
        for leg in (leg for stop_legs in by_stop.values() for leg in stop_legs):
            if leg.report is not None:
                groups.setdefault(id(leg.solution), []).append(leg)
        for k, group in enumerate(groups.values()):
            reports = {leg.solver: leg.report for leg in group}
            name = _slug("_".join(reports))          # file names without spaces or '='
            metric = None if len(group) == 1 else "rel_gap"  # one common metric on a shared plot
            plots.plot_convergence(reports, metric=metric, path=out / f"convergence_{k}_{name}.png",
                                   title=group[0].family)
        for stop, stop_legs in by_stop.items():
            panels = lorenz_groups(stop_legs)
            if panels:
                vertical = any(hasattr(leg.problem, "group_losses") for leg in stop_legs)
                plots.plot_lorenz_panels(panels, path=out / f"lorenz_{_slug(stop)}.png", title=stop,
                                         units="sensitive groups" if vertical else "clients")
    except ImportError:
        pass
