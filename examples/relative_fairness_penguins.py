"""The penguins experiment of the relative-fairness paper (Nakakita et al. 2024, §4.3), exactly.

Setup (the paper's §4.3 and Appendix J.1, with three readings of the printed text):

* palmerpenguins data, rows with a missing measurement dropped, the first 10 rows per species
  (``dm.datasets.penguins(n_per_species=10)``): 3 clients (Adelie, Chinstrap, Gentoo);
* model bill_length = theta_1 + theta_2 * bill_depth + theta_3 * flipper_length, with the
  **corrected sign** -theta_3 in the printed loss (the printed loss has +theta_3 against the
  stated model), i.e. the stated model;
* Theta = the box [-35, -25] x [0, 1]^2 (the convex hull of the paper's finite grid);
* A = B = the full simplex Delta^2, so the objective is (max_i f_i - phi min_i f_i)/(1 - phi)
  and R_{A,B} = max_i f_i / min_i f_i;
* phi in {0, 0.01, ..., 0.05}.

**Scaling.** The paper's f_i is the SUM of squared residuals over the client's 10 samples;
drflmodel's ``Squared`` loss gives the per-client MEAN. Every f_i is therefore exactly 1/10 of the
paper's, so the objective is 1/10 of the paper's, while theta* and R_{A,B} are identical. Both
scales are printed (``objective`` = mean convention, ``paper (sum)`` = 10 x objective).

For the paper's phi values the problem is NOT convex (the exact vertex test gives convexity only
for phi <= 0.0034), so each point is solved with the lifted SDP (R2) plus RLT cuts
from the box and certified a posteriori: the lifted matrix is rank one and the true objective at
the extracted theta equals the SDP lower bound (status "optimal"). phi = 0 is convex (vertex
SOCP, R1). Targets are objective values (relative tolerance ~1e-3), not theta*: the objective is
very flat along theta_1 + 190 theta_3.

Run ``python examples/relative_fairness_penguins.py [--quick]``. On a terminal, a sweep longer
than a couple of seconds shows the phi values solved so far and the elapsed time
(``--no-progress`` turns this off; never shown in CI or when the output is not a terminal).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import drflmodel as dm
from drflmodel._progress import Progress
from drflmodel.problems.relative import RelativeFairness
from drflmodel.sets import Simplex

PHIS = (0.0, 0.01, 0.02, 0.03, 0.04, 0.05)
BOX = (np.array([-35.0, 0.0, 0.0]), np.array([-25.0, 1.0, 1.0]))
SAMPLES_PER_CLIENT = 10


def build_problem(phi: float = 0.0) -> RelativeFairness:
    """The penguins relative-fairness problem (mean convention, see the module doc)."""
    fed = dm.datasets.penguins(n_per_species=SAMPLES_PER_CLIENT)
    return RelativeFairness(fed, dm.losses.Squared(), A=Simplex(3), B=Simplex(3), phi=phi, box=BOX)


def figure(rows: list[dict], path) -> None:
    """Figure 3 of the paper as it reads: the relative unfairness R_AB falls as phi grows (left),
    and what each species' loss does meanwhile, at the certified optima (right; the certified
    objective dashed)."""
    from drflmodel.plots import panels, save_figure

    phis = [r["phi"] for r in rows]
    fig, (left, right) = panels(2, width=6, height=4)
    left.plot(phis, [r["R"] for r in rows], marker="o")
    left.set_xlabel("phi")
    left.set_ylabel("relative unfairness R_AB")
    left.set_title("the unfairness measure decreases as phi increases", fontsize="small")
    losses = np.array([r["client_losses"] for r in rows])
    for k, name in enumerate(("Adelie", "Chinstrap", "Gentoo")):
        right.plot(phis, losses[:, k], marker="o", label=f"{name}'s loss")
    right.plot(phis, [r["objective"] for r in rows], "k--", label="objective (certified)")
    right.set_xlabel("phi")
    right.set_ylabel("mean squared loss")
    right.set_title("client losses at the certified optima", fontsize="small")
    right.legend(fontsize="x-small")
    save_figure(fig, path, "Relative fairness on penguins (relative-fairness paper, Figure 3)")


def main(quick: bool = False, phis=PHIS, verbose: bool = True, progress: bool | None = None,
         out=None) -> list[dict]:
    """Solve the sweep; return one record per phi (``quick`` only shortens the local searches
    used when a certificate does not close -- on this data every point certifies)."""
    prob = build_problem(phis[0])
    rows = []
    report = prob.convexity_report(max(phis))
    if verbose:
        print("Relative fairness on penguins (relative-fairness paper, §4.3): A = B = simplex, box "
              "[-35,-25]x[0,1]^2, corrected sign -theta_3")
        print(f"largest phi with a convex problem (exact vertex test): {report.max_convex_phi['vertex']:.6f};"
              f" Prop 10 (m_f/M_f): {report.max_convex_phi['prop10']:.3g}")
        print(f"{'phi':>5} {'objective':>12} {'paper (sum)':>12} {'lower bound':>12} {'rel.gap':>9} "
              f"{'f_Adelie':>9} {'f_Chinstr':>9} {'f_Gentoo':>9} {'R_AB':>8} {'method':>6} "
              f"{'status':>18} {'rank-1':>9} {'time[s]':>7}")
    bar = Progress(len(phis), "phi sweep", unit="solve", progress=progress)
    for phi in phis:
        prob.set_parameter("phi", phi)
        t0 = time.perf_counter()
        method = prob.choose_method()        # the route "auto" takes; only R2 / local search
        search = ({"n_starts": 2 if quick else 5, "max_iter": 20 if quick else 100}
                  if method in ("R2", "local") else {})
        sol = prob.solve(method=method, seed=0, **search)
        elapsed = time.perf_counter() - t0
        R = sol.info["indices"]["relative_unfairness"]
        row = {"phi": phi, "objective": sol.value, "objective_paper_sum": SAMPLES_PER_CLIENT * sol.value,
               "lower_bound": sol.lower_bound, "relative_gap": sol.relative_gap,
               "client_losses": sol.client_losses.tolist(), "R": R, "theta": sol.theta.tolist(),
               "status": sol.status, "certificate": sol.certificate, "method": sol.info["method"],
               "rank_one_ratio": sol.info.get("rank_one_ratio"), "time": elapsed,
               "indices": sol.info["indices"]}
        rows.append(row)
        if verbose:
            f = sol.client_losses
            rk = "-" if row["rank_one_ratio"] is None else f"{row['rank_one_ratio']:.1e}"
            bar.write(f"{phi:5.2f} {sol.value:12.6f} {row['objective_paper_sum']:12.5f} {sol.lower_bound:12.6f} "
                      f"{sol.relative_gap:9.1e} {f[0]:9.4f} {f[1]:9.4f} {f[2]:9.4f} {R:8.4f} "
                      f"{row['method']:>6} {sol.status:>18} {rk:>9} {elapsed:7.3f}")
        bar.update(len(rows))
    bar.close()
    if verbose:
        Rs = [r["R"] for r in rows]
        mono = all(b <= a * (1 + 1e-6) for a, b in zip(Rs, Rs[1:]))
        print(f"R_AB non-increasing in phi (Theorem 1): {mono}")
        print("certificate: " + rows[-1]["certificate"])
    if out is not None:
        from pathlib import Path

        Path(out).mkdir(parents=True, exist_ok=True)
        figure(rows, Path(out) / "relative_fairness_penguins.png")
        print(f"figure: {Path(out) / 'relative_fairness_penguins.png'}")
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="shorter local searches (for tests)")
    ap.add_argument("--no-progress", action="store_true", help="no progress display")
    ap.add_argument("--out", help="directory for the figure (PNG; needs matplotlib)")
    args = ap.parse_args()
    main(quick=args.quick, progress=False if args.no_progress else None, out=args.out)
