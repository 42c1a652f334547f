"""A grid of shapes: ``prob.solve()`` as a user calls it against what a user runs instead, from a
240-row table to the largest published linear heads, for the four kinds of weight set.

**Shapes** (:data:`GRID`; ``N x d [x K]``: rows, features, classes, 2 if omitted): binary and softmax
synthetic linear-head features (``dm.datasets.gaussian_mixture``: 4 Dirichlet(0.5) clients below
1,000 rows, 20 from there), scikit-learn's digits (20 Dirichlet(0.1) clients) and breast cancer
(4 clients); ``240x15`` and ``2kx20`` are ``bench_certified.py``'s scale shapes (14 and 19 features
plus the intercept). ``--large`` adds 1,000,000 x 20; ``--heads`` adds the largest published heads
with **float32** features (``bench_largest_heads.py``'s data): 100k x 512 x 200 (20 clients) and
50k x 2,048 x 100 (50 Dirichlet(0.1) clients).

**Kinds** (``--kinds``; all with ``l2 = 1e-3`` and the intercept unpenalized, logistic or
multinomial loss):

* ``erm``: one client holding the pooled rows (``Simplex(1)``, a fixed weight) against
  scikit-learn's ``LogisticRegression`` -- lbfgs, newton-cg (up to --newton-cg-max entries N x P), newton-cholesky (P <= 1,000: 43 s at P = 2,010), all at
  ``tol=1e-8``, ``C = 1/(l2 N)`` (the same objective) -- and SciPy's L-BFGS-B on the same objective
  (``_scale_baselines.erm_lbfgs``: plain numpy losses, scikit-learn's lbfgs tolerances);
* ``chi2``: ``ChiSquare(n, 0.1)`` against L-BFGS-B on the smooth dual of the chi-square support
  function in (theta, eta) (``_scale_baselines.chi2_dual_lbfgs``);
* ``cvar``: ``CVaR(n, alpha)`` (alpha = 0.2 with 10 or more clients, 0.5 below) against L-BFGS-B on
  the softplus-smoothed Rockafellar-Uryasev form, mu = 1e-4 (``cvar_smoothed_lbfgs``);
* ``afl``: agnostic federated learning, the whole simplex ``Simplex(n)`` (min max_i f_i) against the
  same smoothed L-BFGS-B at level 1/n (CVaR at level 1/n *is* the maximum: a softplus-smoothed max).

The smoothed CVaR/AFL baselines are slow at scale (86 s at 20k x 200 x 10 in ``bench_certified.py``):
they run up to ``--smoothed-max`` entries N x P (then "not run", and the row has no ratio).

**Timing.** Each repeat times, in turn in this one process, the certified solve at the default
``gap_tol`` (1e-6), the certified solve at ``gap_tol = 1e-8`` (both: building ``FederatedDRO(...)``
and ``solve()``, ``method="auto"``) and each baseline; the ratios are of medians, certified / the
fastest baseline. ``--repeats`` applies below ``--once-above`` entries N x P, one run above, and
``--small-repeats`` (21) below ``--small-below`` (1e6) entries, where a call takes milliseconds. Set
``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1``. ``--clock cpu`` times every call by the process's CPU
time instead of the wall clock (everything is one-threaded, so it is the work done, and a shared
machine's preemption does not land on whichever call was running). The target (the issue): <= 1x,
<= 1.5x per call below 10,000 rows.

**Checks.** Every certified answer's status (``optimal`` expected) is reported; each baseline's own
objective (evaluated exactly by drflmodel) is placed in the certified interval [L, U] of the 1e-8
solve and of the default solve: ``below L`` would falsify a certificate, ``above U`` says the
baseline stopped farther from the optimum than the certified answer (not matched accuracy).

**Federated bytes per answer, measured** (``_grid_federated.py``). After the timed runs, one federated
solve with ``method="auto"`` over the in-process ``LocalChannel`` (a counting subclass): the route
``auto`` took, the exchanges, the largest answer of one client in floats and bytes and the bytes the
busiest client sent (what the channel carried, counted array by array), the status and gap, and
whether the federated [L, U] meets the centralized certified one (default gap). The ``erm`` kind runs
on the shape's clients with the sample shares as fixed weights (``HCVaR(p, 1)``: the pooled objective,
so the same optimum); the others on the grid's federation. Flagged in bold: an answer above 4P floats,
more than 40 exchanges on digits (100 on the heads), a status other than ``optimal``, intervals that
do not meet. Above ``--federated-max-entries`` N x P (default 3e8: the whole default grid; not the
heads; ``--federated-only`` on the default grid took 9.6 min here for the four kinds, 1.9 min for
``erm,chi2``) the cell says "not run" and shows the estimate from P instead, labelled
(``route_costs.federated_floats``: the block route unless its ``auto_skip`` leaves the shape to the
dense ``sqp`` route, 8 bytes a float, the exchanges of its measured table); ``--federated-max-seconds``
also stops a run after that many seconds ("stopped", with what was carried). ``--federated-only`` skips
the timings and the baselines: one centralized solve (for the interval) and the federated run per row.

**Cold start and CLI.** ``--cold-start N`` also runs ``benchmarks/bench_import.py --repeats N`` (fresh
interpreters: import + first solve, scikit-learn import + fit, the CLI's ``solve``) and appends its
table.

Run: ``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/bench_grid.py [--shapes 240x15,digits]
[--kinds erm,chi2] [--large] [--heads] [--repeats 5] [--cold-start 3] [--federated-max-entries 3e8]
[--federated-max-seconds 120] [--federated-only] [--update-docs]``;
``--update-docs`` writes the table between ``<!-- bench_grid:start -->`` and
``<!-- bench_grid:end -->`` of ``docs/performance.md``. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import subprocess
import sys
import time
import warnings

import numpy as np

import drflmodel as dm
import _grid_federated
import _scale_baselines
from _scale_baselines import chi2_dual_lbfgs, cvar_smoothed_lbfgs, erm_lbfgs, sklearn_erm
from bench_certified import L2, RHO, SCALE_SHAPES, SKLEARN_SOLVERS, _pooled, scale_federation, update_docs

warnings.filterwarnings("ignore", message="Solution may be inaccurate")
GRID_MARKERS = ("<!-- bench_grid:start -->", "<!-- bench_grid:end -->")
KINDS = ("erm", "chi2", "cvar", "afl")
#: the default grid (25 shapes); ``--large`` and ``--heads`` add :data:`LARGE` and :data:`HEADS`
GRID = ("240x15", "500x15", "1kx15", "1kx50", "breast_cancer", "2kx20", "2kx100", "1kx20x3", "2kx50x4",
        "digits", "5kx30", "5kx100", "5kx30x5", "10kx50", "10kx200", "10kx50x10", "20kx20", "20kx100",
        "20kx200x10", "50kx20", "50kx100", "50kx512x10", "100kx20", "100kx50", "200kx20")
LARGE = ("1Mx20",)
#: float32 heads: name -> ``bench_largest_heads.SHAPES`` key
HEADS = {"100kx512x200": "tinyimagenet", "50kx2048x100": "fedpft"}
#: the default gap of ``Problem.solve`` and the tight one
GAPS = (1e-6, 1e-8)
#: a baseline objective within this relative distance of [L, U] counts as inside (round-off)
INSIDE_SLACK = 1e-12
#: largest P at which scikit-learn's newton-cholesky (a dense P x P Hessian) runs
CHOLESKY_MAX_P = 1_000


def _count(text: str) -> int:
    text = text.lower()
    scale = 1_000_000 if text.endswith("m") else 1_000 if text.endswith("k") else 1
    return int(float(text.rstrip("km")) * scale)


def parse_shape(name: str) -> tuple[int, int, int]:
    """``"20kx200x10"`` -> ``(20000, 200, 10)``; ``"1Mx20"`` -> ``(1000000, 20, 2)``."""
    parts = name.split("x")
    if len(parts) not in (2, 3):
        raise ValueError(f"a grid shape is rows x features [x classes], e.g. 10kx50 or 20kx200x10; got {name!r}")
    N, d = _count(parts[0]), int(parts[1])
    return N, d, int(parts[2]) if len(parts) == 3 else 2


def grid_federation(name: str):
    """The seeded federation of a grid shape (module docstring)."""
    if name in SCALE_SHAPES:
        return scale_federation(name)
    if name == "breast_cancer":
        return dm.datasets.breast_cancer(n_clients=4, seed=0)
    if name in HEADS:
        from bench_largest_heads import federation

        return federation(HEADS[name])
    N, d, K = parse_shape(name)
    return dm.datasets.gaussian_mixture(N, d, K, n_clients=4 if N < 1_000 else 20, alpha=0.5, seed=0)


def cvar_level(n: int) -> float:
    """The CVaR level of the grid: 0.2 with 10 or more clients, 0.5 below (so the set is not the
    whole simplex, which the ``afl`` kind is)."""
    return 0.2 if n >= 10 else 0.5


def grid_problem(fed, kind: str, pooled=None):
    """``FederatedDRO`` of one kind (``pooled``: the one-client federation of the ERM kind)."""
    loss = dm.losses.Multinomial() if fed.task == "multiclass" else dm.losses.Logistic()
    n = fed.n_clients
    if kind == "erm":
        return dm.FederatedDRO(pooled, loss, dm.sets.Simplex(1), l2=L2, penalize_intercept=False)
    W = {"chi2": lambda: dm.sets.ChiSquare(n, RHO), "cvar": lambda: dm.sets.CVaR(n, cvar_level(n)),
         "afl": lambda: dm.sets.Simplex(n)}[kind]()
    return dm.FederatedDRO(fed, loss, W, l2=L2, penalize_intercept=False)


def certified_once(fed, kind: str, gap_tol: float, pooled=None):
    """``(problem, solution, seconds)``: construction and ``solve(gap_tol=...)`` as a user calls them."""
    t0 = _scale_baselines.clock()
    prob = grid_problem(fed, kind, pooled)
    sol = prob.solve(gap_tol=gap_tol)
    return prob, sol, _scale_baselines.clock() - t0


def baselines_once(fed, kind: str, prob, pooled, smoothed_max: float, newton_cg_max: float) -> dict:
    """``{name: (seconds, exact objective of its answer)}`` of the kind's baselines (module docstring)."""
    out = {}
    size = prob.structure.rows * prob.dim
    if kind == "erm":
        for solver in SKLEARN_SOLVERS:
            if (solver == "newton-cholesky" and prob.dim > CHOLESKY_MAX_P) or (solver == "newton-cg" and size > newton_cg_max):
                continue
            model, seconds, _ = sklearn_erm(pooled, L2, solver)
            out[f"sklearn {solver}"] = (seconds, prob.objective(prob.layout.from_sklearn(model.coef_, model.intercept_)))
        theta, seconds, _ = erm_lbfgs(pooled, L2)
        out["L-BFGS-B"] = (seconds, prob.objective(theta))
    elif kind == "chi2":
        theta, _, seconds, _ = chi2_dual_lbfgs(fed, L2, RHO)
        out["L-BFGS-B dual"] = (seconds, prob.objective(theta))
    elif size <= smoothed_max:
        level = cvar_level(fed.n_clients) if kind == "cvar" else 1.0 / fed.n_clients
        theta, _, seconds, _ = cvar_smoothed_lbfgs(fed, L2, level)
        out["L-BFGS-B smoothed"] = (seconds, prob.objective(theta))
    return out


def placement(value: float, lower: float, upper: float, slack: float = INSIDE_SLACK) -> str:
    """``"in"``, ``"below L"`` (the certificate would be false) or ``"above U"`` (the baseline's point
    is worse than the certified one), relative to ``max(1, |U|)`` with a round-off ``slack``."""
    scale = max(1.0, abs(upper))
    if value < lower - slack * scale:
        return "below L"
    if value > upper + slack * scale:
        return "above U"
    return "in"


def federated_answer(structure) -> dict:
    """The estimate from P of what ``auto`` on a federated server would ask each client per exchange
    (module docstring; the cell of a row not run): ``{"route", "floats", "bytes", "exchanges"}``."""
    from drflmodel.problems.minmax.block_newton import BlockNewtonRoute
    from drflmodel.problems.minmax.route_costs import federated_floats

    server = dataclasses.replace(structure, rows_local=False, data_bytes=0, padded_rows=0)
    route = "sqp" if BlockNewtonRoute().auto_skip(server) else "block_newton"
    est = federated_floats(server)[route]
    return {"route": route, "floats": est["largest"], "bytes": 8 * est["largest"], "exchanges": est["exchanges"]}


def federated_problem(fed, kind: str, pooled=None):
    """The problem a federated server certifies for the row (module docstring): for ``erm``, the shape's
    clients with their sample shares as fixed weights (the pooled objective); else :func:`grid_problem`."""
    if kind != "erm":
        return grid_problem(fed, kind, pooled)
    loss = dm.losses.Multinomial() if fed.task == "multiclass" else dm.losses.Logistic()
    return dm.FederatedDRO(fed, loss, dm.sets.HCVaR(fed.proportions, 1.0), l2=L2, penalize_intercept=False)


def federated_column(shape: str, kind: str, fed, pooled, central: dict, max_entries: float,
                     max_seconds: float | None = None) -> dict:
    """The measured federated run of the row (``_grid_federated.measure``, stopped after ``max_seconds``)
    against the centralized interval ``central`` (``{"L", "U"}``), or, above ``max_entries`` N x P, the
    estimate marked not run."""
    prob = federated_problem(fed, kind, pooled)
    entries = int(sum(fed.sizes)) * int(prob.dim)
    if entries > max_entries:
        return {"run": False, "reason": f"N x P = {entries:.2g} > --federated-max-entries {max_entries:.2g}",
                **federated_answer(prob.structure)}
    return _grid_federated.measure(prob, central["L"], central["U"], shape, max_seconds)


def summarize(shape: str, kind: str, prob, runs: dict, base: dict) -> dict:
    """One row from the timed runs: ``runs[gap] = [(solution, seconds), ...]``, ``base[name] =
    [(seconds, objective), ...]``."""
    s = prob.structure
    row = {"shape": shape, "kind": kind, "N": int(s.rows), "P": int(s.dim), "n": int(prob.federation.n_clients),
           "K": int(s.n_outputs) + (1 if s.n_outputs == 1 else 0), "d": int(s.dim // max(s.n_outputs, 1)) - 1,
           "baselines": {}, "certified": {}}
    for gap, done in runs.items():
        sol = done[-1][0]
        row["certified"][gap] = {"seconds": float(np.median([t for _, t in done])), "status": sol.status,
                                 "route": sol.info.get("method"), "gap": float(sol.relative_gap),
                                 "L": float(sol.lower_bound), "U": float(sol.upper_bound)}
    for name, done in base.items():
        value = done[-1][1]
        row["baselines"][name] = {"seconds": float(np.median([t for t, _ in done])), "value": float(value),
                                  "place": {gap: placement(value, c["L"], c["U"]) for gap, c in row["certified"].items()}}
    fastest = min(row["baselines"].values(), key=lambda b: b["seconds"], default=None)
    row["fastest"] = fastest["seconds"] if fastest else float("nan")
    row["ratio"] = {gap: c["seconds"] / row["fastest"] for gap, c in row["certified"].items()}
    row["target"] = 1.5 if row["N"] < 10_000 else 1.0
    return row


def run_row(shape: str, kind: str, fed, pooled, repeats: int, args) -> dict:
    runs, base = {gap: [] for gap in GAPS}, {}
    for _ in range(repeats):                   # interleaved: ours at both gaps, then the baselines
        for gap in GAPS:
            prob, sol, seconds = certified_once(fed, kind, gap, pooled)
            runs[gap].append((sol, seconds))
        for name, (seconds, value) in baselines_once(fed, kind, prob, pooled, args.smoothed_max,
                                                      args.newton_cg_max).items():
            base.setdefault(name, []).append((seconds, value))
    row = summarize(shape, kind, prob, runs, base)
    row["federated"] = federated_column(shape, kind, fed, pooled, row["certified"][GAPS[0]],
                                        args.federated_max_entries, args.federated_max_seconds)
    return row


def federated_row(shape: str, kind: str, fed, pooled, args) -> dict:
    """``--federated-only``: one centralized solve at the default gap (its interval) and the federated
    column, no timings."""
    prob, sol, seconds = certified_once(fed, kind, GAPS[0], pooled)
    central = {"status": sol.status, "route": sol.info.get("method"), "gap": float(sol.relative_gap),
               "L": float(sol.lower_bound), "U": float(sol.upper_bound), "seconds": seconds}
    s = prob.structure
    return {"shape": shape, "kind": kind, "N": int(s.rows), "P": int(s.dim), "n": int(fed.n_clients),
            "central": central,
            "federated": federated_column(shape, kind, fed, pooled, central, args.federated_max_entries,
                                          args.federated_max_seconds)}


def federated_markdown(rows) -> str:
    """``--federated-only``'s table: the centralized interval and the federated column."""
    out = ["| shape | N (P), clients | kind | centralized route, status | federated auto, measured (LocalChannel): "
           "route (clients), exchanges, largest answer floats (bytes), bytes per client, status gap, [L, U] vs centralized | "
           "federated s |", "|---|---|---|---|---|---|"]
    for r in rows:
        c, f = r["central"], r["federated"]
        seconds = f"{f['seconds']:.2f}" if f["run"] else "-"
        out.append(f"| {r['shape']} | {r['N']:,} ({r['P']:,}), {r['n']} | {r['kind']} | {c['route']}, {c['status']} | "
                   f"{_grid_federated.cell(f)} | {seconds} |")
    return "\n".join(out)


def _flags(row: dict) -> str:
    bad = [f"{name} {p} ({'1e-8' if gap == GAPS[1] else 'default'})" for name, b in row["baselines"].items()
           for gap, p in b["place"].items() if p != "in"]
    return "; ".join(bad) if bad else ("all in" if row["baselines"] else "-")


def grid_markdown(rows) -> str:
    """The table: one line per shape x kind."""
    out = ["| shape | N x d x K (P), n | kind | route (default; 1e-8) | status | certified s (default; 1e-8) | "
           "fastest baseline s | ratio default | ratio 1e-8 | target | baselines outside [L, U] | "
           "federated auto, measured (LocalChannel): route (clients), exchanges, largest answer floats (bytes), "
           "bytes per client, status gap, [L, U] vs centralized |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = [r["certified"][g] for g in GAPS]
        fast = min(r["baselines"], key=lambda k: r["baselines"][k]["seconds"]) if r["baselines"] else None
        base = f"{r['fastest']:.3g} ({fast})" if fast else "not run"

        def ratio(g):
            v = r["ratio"][g]
            return "-" if not np.isfinite(v) else (f"**{v:.2f}**" if v > r["target"] else f"{v:.2f}")

        status = c[0]["status"] if c[0]["status"] == c[1]["status"] else f"{c[0]['status']}; {c[1]['status']}"
        out.append(f"| {r['shape']} | {r['N']:,} x {r['d']} x {r['K']} ({r['P']:,}), {r['n']} | {r['kind']} | "
                   f"{c[0]['route']}; {c[1]['route']} | {status} | {c[0]['seconds']:.3g}; {c[1]['seconds']:.3g} | "
                   f"{base} | {ratio(GAPS[0])} | {ratio(GAPS[1])} | {r['target']:g}x | {_flags(r)} | "
                   f"{_grid_federated.cell(r['federated']) if 'federated' in r else '-'} |")
    return "\n".join(out)


def _warm_up() -> None:
    """Import and first-call costs paid once, outside the timings."""
    fed = dm.datasets.gaussian_mixture(400, 5, 3, n_clients=4, alpha=5.0, seed=1)
    pooled = _pooled(fed)
    for kind in KINDS:
        prob, _, _ = certified_once(fed, kind, GAPS[0], pooled)
        baselines_once(fed, kind, prob, pooled, np.inf, np.inf)


def cold_start(repeats: int) -> str:
    """``benchmarks/bench_import.py --repeats N``'s table (fresh interpreters)."""
    here = pathlib.Path(__file__).resolve().parent
    done = subprocess.run([sys.executable, str(here / "bench_import.py"), "--repeats", str(repeats)],
                          check=True, capture_output=True, text=True)
    return done.stdout.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(GRID), help="comma-separated grid shapes (default: the 25 of GRID)")
    ap.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kinds: erm, chi2, cvar, afl")
    ap.add_argument("--large", action="store_true", help="add 1Mx20")
    ap.add_argument("--heads", action="store_true", help="add the float32 heads 100kx512x200 and 50kx2048x100")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats below --once-above (medians)")
    ap.add_argument("--once-above", type=float, default=2e7, help="entries N x P from which each row runs once")
    ap.add_argument("--small-repeats", type=int, default=21,
                    help="repeats below --small-below entries N x P (millisecond rows: a load spike moves a median of 5)")
    ap.add_argument("--small-below", type=float, default=1e6, help="entries N x P below which --small-repeats applies")
    ap.add_argument("--smoothed-max", type=float, default=1.5e7,
                    help="largest N x P at which the smoothed CVaR/AFL L-BFGS-B baselines run")
    ap.add_argument("--newton-cg-max", type=float, default=1e8, help="largest N x P at which newton-cg runs")
    ap.add_argument("--federated-max-entries", type=float, default=_grid_federated.FEDERATED_MAX_ENTRIES,
                    help="largest N x P at which the federated auto solve runs (above: 'not run' and the estimate)")
    ap.add_argument("--federated-max-seconds", type=float, default=None,
                    help="stop a federated run after this many seconds (the cell says 'stopped'; default: no bound)")
    ap.add_argument("--federated-only", action="store_true",
                    help="skip the timings and baselines: one centralized solve and the federated run per row")
    ap.add_argument("--cold-start", type=int, default=0, help="also run bench_import.py with this many repeats")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time every solve and baseline by the wall clock (default) or by the process's CPU time "
                         "(on a shared machine: not inflated by other processes' preemption; all runs one-threaded)")
    ap.add_argument("--markdown", help="also write the table to this file")
    ap.add_argument("--update-docs", action="store_true", help="write the table into docs/performance.md")
    args = ap.parse_args()
    if args.clock == "cpu":
        _scale_baselines.clock = time.process_time
    shapes = args.shapes.split(",") + (list(LARGE) if args.large else []) + (list(HEADS) if args.heads else [])
    kinds = args.kinds.split(",")
    for kind in kinds:
        if kind not in KINDS:
            raise SystemExit(f"unknown --kinds entry {kind!r}; valid: {', '.join(KINDS)}")
    if args.federated_max_entries < 0:
        raise SystemExit(f"--federated-max-entries must be >= 0; got {args.federated_max_entries}")
    if args.federated_max_seconds is not None and not args.federated_max_seconds > 0:
        raise SystemExit(f"--federated-max-seconds must be > 0; got {args.federated_max_seconds}")
    if args.federated_only and args.update_docs:
        raise SystemExit("--update-docs writes the whole grid: run without --federated-only")
    if args.federated_only:
        return federated_main(shapes, kinds, args)
    _warm_up()

    def timed(shape, kind, fed, pooled):
        size = int(sum(fed.sizes)) * grid_problem(fed, kind, pooled).dim
        repeats = args.small_repeats if size < args.small_below else args.repeats if size < args.once_above else 1
        return run_row(shape, kind, fed, pooled, repeats, args)

    rows = sweep(shapes, kinds, timed, grid_markdown)
    table = grid_markdown(rows)
    if args.cold_start:
        table += "\n\nCold start (`python benchmarks/bench_import.py --repeats %d`):\n\n%s" % (args.cold_start,
                                                                                             cold_start(args.cold_start))
    if args.markdown:
        pathlib.Path(args.markdown).write_text(table + "\n")
    if args.update_docs:
        update_docs(table, "OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/bench_grid.py "
                    + " ".join(a for a in sys.argv[1:] if a != "--update-docs"), GRID_MARKERS)
    print()
    print(table)


def sweep(shapes, kinds, make_row, markdown) -> list:
    """``make_row(shape, kind, fed, pooled)`` for every shape x kind, each line printed as it is done."""
    rows = []
    print(markdown([]), flush=True)
    for shape in shapes:
        fed = grid_federation(shape)
        pooled = _pooled(fed) if "erm" in kinds else None
        for kind in kinds:
            rows.append(make_row(shape, kind, fed, pooled))
            print(markdown(rows[-1:]).splitlines()[-1], flush=True)
    return rows


def federated_main(shapes, kinds, args) -> None:
    """``--federated-only`` (module docstring): prints (and with ``--markdown`` writes) the federated table."""
    rows = sweep(shapes, kinds, lambda shape, kind, fed, pooled: federated_row(shape, kind, fed, pooled, args),
                 federated_markdown)
    table = federated_markdown(rows)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(table + "\n")


if __name__ == "__main__":
    main()
