r"""Reproduce the Scaff-PD synthetic convergence comparison (Yu et al. 2023, §C.1, Figure 2).

Setup (the paper's §C.1): :math:`N = 5` clients, :math:`d = 10` features, :math:`m = 100` samples
each, :math:`a \sim \mathcal N(0, I)`, a shared :math:`\hat x \sim \mathcal N(0, I)`, a per-client
shift :math:`\delta_i \sim \mathcal N(0, 0.1^2 I)`, :math:`y = \langle a, \hat x + \delta_i\rangle`;
:math:`f_i(x)` = the mean squared residual :math:`+\,\frac{\mu_x}{2}\|x\|^2` with :math:`\mu_x = 0.1`;
the :math:`\chi^2` penalty with :math:`\rho \in \{0.01, 0.05, 0.1\}`. The exact optimum :math:`x^\star`
comes from the certified oracle.

Printed: the paper's quantity :math:`\|x^R - x^\star\|^2` at several rounds for Scaff-PD (the step sizes of the
strongly-convex-strongly-concave case, Condition 3.2 and Theorem 3.5 of the paper, J local steps)
and DRFA (same J, default steps), then the paper's two claims, each with a verdict computed from
the printed runs:

* "Scaff-PD converges linearly in all three settings": holds for a ρ when the error converges and
  its observed fall matches Theorem 3.5's linear bound (``dm.verify(..., verdict="rate")``); whether
  it met 1e-8 is printed too;
* "DRFA is much slower": per ρ, the rounds at which each method is ahead (Scaff-PD is ahead from
  the first round after which its error stays below DRFA's); DRFA, without control variates, is
  ahead at first and then stalls at its client-drift floor, so the claim holds only from that
  round on ("partly" unless Scaff-PD is ahead from the start).

Run: ``python examples/scaffpd_synthetic.py`` (10-20 s on 2 cores) or ``--quick``. On a terminal each
run longer than a couple of seconds shows its rounds, its current ||x^r − x*||² and the elapsed
time (``--no-progress`` turns this off; never shown in CI or when the output is not a terminal).
"""

from __future__ import annotations

import argparse

import numpy as np

import drflmodel as dm
from drflmodel._progress import ErrorProbe, progress_enabled


def run(rho: float, rounds: int, local_steps: int, seed: int = 0, progress: bool | None = None) -> dict:
    fed = dm.datasets.synthetic_regression(n_clients=5, dim=10, samples=100, heterogeneity=0.1, seed=seed)
    prob = dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.ChiSquare(5, rho=rho), l2=0.1)
    sol = prob.solve(gap_tol=1e-12)      # the reference: certified well below the 1e-8 verified
    out = {"rho": rho, "status": sol.status, "gap": sol.relative_gap, "value": sol.value, "solution": sol}
    for name, solver in (("Scaff-PD", dm.solvers.ScaffPD(rounds=rounds, local_steps=local_steps)),
                         ("DRFA", dm.solvers.DRFA(rounds=rounds, local_steps=local_steps))):
        # the progress display shows ||x^r - x*||^2 (a probe that never stops the run)
        probe = ErrorProbe(dm.Verifier(sol, tol=1e-8).error) if progress_enabled(progress) else None
        trace = solver.run(prob, seed=seed, callback=probe, progress=progress)
        out[name] = dm.verify(trace, sol, tol=1e-8, verdict="rate" if name == "Scaff-PD" else "tol")
    return out


def ahead_from(scaffpd, drfa) -> int | None:
    """The first round after which Scaff-PD's error stays strictly below DRFA's (``None``: never)."""
    behind = np.nonzero(np.asarray(scaffpd) >= np.asarray(drfa))[0]
    if behind.size == 0:
        return 0
    return None if behind[-1] == len(scaffpd) - 1 else int(behind[-1] + 1)


def claims(res: dict) -> dict:
    """The paper's two claims for one rho, decided from the runs (module docstring)."""
    spd, drfa = res["Scaff-PD"], res["DRFA"]
    e_s = np.array([row["dist_theta_sq"] for row in spd.rows])
    e_d = np.array([row["dist_theta_sq"] for row in drfa.rows])
    linear = spd.diagnosis["behaviour"] in ("converged", "converging") and bool(spd.diagnosis["comparison"]["matches"])
    start = ahead_from(e_s, e_d)
    slower = "holds" if start == 0 else ("does not hold" if start is None else "partly")
    return {"linear": linear, "scaffpd_ahead_from": start, "drfa_floor": float(np.median(e_d[len(e_d) // 2:])),
            "drfa_much_slower": slower}


def figure(results: list[dict], path) -> None:
    """Figure 2 as the paper draws it: the squared distance to the optimum per round, Scaff-PD and
    DRFA, one panel per rho -- and below, the objective with the certified optimum marked."""
    from drflmodel.plots import plot_against_optimum

    panels = {f"rho = {res['rho']}": (res["solution"], {k: res[k] for k in ("Scaff-PD", "DRFA")})
              for res in results}
    plot_against_optimum(panels, path=path, title="Scaff-PD vs DRFA on the synthetic chi^2 problem (Figure 2)")


def main(quick: bool = False, progress: bool | None = None, out=None) -> list[dict]:
    rounds = 400 if quick else 3000
    checkpoints = [r for r in (50, 200, 400, 1000, 3000) if r <= rounds]
    results = []
    print("Scaff-PD vs DRFA on the synthetic chi^2 problem (N=5, d=10, m=100, mu_x=0.1, J=10)")
    print("paper (Fig. 2): \"SCAFF-PD achieves linear convergence rates in all three settings. In contrast, "
          "DRFA converges much more slowly\"\n")
    for rho in (0.01, 0.05, 0.1):
        res = run(rho, rounds, local_steps=10, progress=progress)
        res["claims"] = c = claims(res)
        results.append(res)
        print(f"rho = {rho}: oracle {res['status']} (value {res['value']:.6f}, rel. gap {res['gap']:.1e})")
        header = "  round " + "".join(f"{r:>12d}" for r in checkpoints)
        print(header)
        for name in ("Scaff-PD", "DRFA"):
            rows = res[name].rows
            vals = "".join(f"{rows[r]['dist_theta_sq']:12.3e}" for r in checkpoints)
            print(f"  {name:8s}{vals}")
        spd = res["Scaff-PD"]
        print(f"  Scaff-PD: {spd.diagnosis['comparison']['text']}")
        print(f"  claim 'linear convergence': {'holds' if c['linear'] else 'does not hold'} "
              f"(1e-8 {'met at round ' + str(spd.rounds_to_tol) if spd.rounds_to_tol is not None else 'not met'})")
        start = c["scaffpd_ahead_from"]
        where = ("Scaff-PD is ahead at every round" if start == 0 else
                 "Scaff-PD never stays ahead" if start is None else
                 f"DRFA is ahead until round {start - 1}, then stalls at its client-drift floor "
                 f"~{c['drfa_floor']:.1e}; Scaff-PD is ahead from round {start}")
        print(f"  claim 'DRFA converges much more slowly': {c['drfa_much_slower']} -- {where}\n")
    if out is not None:
        from pathlib import Path

        Path(out).mkdir(parents=True, exist_ok=True)
        figure(results, Path(out) / "scaffpd_figure2.png")
        print(f"figure: {Path(out) / 'scaffpd_figure2.png'}")
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="400 rounds instead of 3000")
    parser.add_argument("--no-progress", action="store_true", help="no progress display")
    parser.add_argument("--out", help="directory for the figure (PNG; needs matplotlib)")
    args = parser.parse_args()
    main(quick=args.quick, progress=False if args.no_progress else None, out=args.out)
