"""What the explanations cost: ``dm.verify`` against the per-round table alone, same process.

``verify`` computes the per-round table (one exact objective per round -- the baseline here,
``drflmodel.verification._rows``), then describes the error, fits the rate, predicts the theory's rate
(``drflmodel._rates``), compares and extrapolates (``drflmodel._diagnosis``). For Scaff-PD runs
of 2,000 rounds on the README's CSV example (standardized; CVaR: the accelerated SC-C envelope,
whose extrapolation to the tolerance runs the schedule's recursion for 2^14 rounds; chi^2: a
linear factor), the script prints the median time of each and their ratio.

Run: ``python benchmarks/bench_verify.py`` (about half a minute).
"""

from __future__ import annotations

import time

import numpy as np

import drflmodel as dm
from drflmodel.verification import _rows


def clinics(n: int = 200, seed: int = 0):
    """The README's CSV example as a table (3 sites, age 25-85 years)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    site = rng.choice(["north", "south", "east"], n)
    age = rng.uniform(25, 85, n).round(0)
    bmi = rng.normal(27, 4.5, n).round(1)
    smoker = rng.choice(["no", "yes"], n, p=[0.7, 0.3])
    shift = {"north": -0.3, "south": 0.2, "east": 0.5}
    z = -6 + 0.06 * age + 0.1 * bmi + 0.8 * (smoker == "yes") + np.array([shift[s] for s in site])
    outcome = (rng.uniform(size=n) < 1 / (1 + np.exp(-z))).astype(int)
    return pd.DataFrame({"site": site, "age": age, "bmi": bmi, "smoker": smoker, "outcome": outcome})


def median_times(fns, repeats: int = 5) -> list[float]:
    """Median wall time of each of ``fns``, run interleaved (so that load changes hit all alike)."""
    times = [[] for _ in fns]
    for _ in range(repeats):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return [float(np.median(t)) for t in times]


def main() -> None:
    fed = dm.Federation.from_dataframe(clinics(), target="outcome", client="site",
                                       features=["age", "bmi", "smoker"], add_intercept=True, standardize=True)
    print(f"{'weights':<10}{'rows only (s)':>15}{'verify (s)':>12}{'verify / rows':>15}  theory")
    for name, weights in (("CVaR 0.5", dm.sets.CVaR(3, 0.5)), ("chi2 0.1", dm.sets.ChiSquare(3, 0.1))):
        prob = dm.FederatedDRO(fed, dm.losses.Logistic(), weights=weights, l2=0.01)
        sol = prob.solve()
        trace = dm.solvers.ScaffPD(rounds=2000).run(prob, seed=0)
        T = np.asarray(trace.theta)
        base, full = median_times([lambda: _rows(prob, sol, T, np.asarray(trace.weights), None),
                                   lambda: dm.verify(trace, sol, tol=1e-6)])
        theory = dm.verify(trace, sol, tol=1e-6).diagnosis["theory"]["statement"].split(" (")[0]
        print(f"{name:<10}{base:>15.3f}{full:>12.3f}{full / base:>15.2f}  {theory}")


if __name__ == "__main__":
    main()
