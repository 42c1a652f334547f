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
    """The README's CSV example as a table (3 sites, age 25-85 years): examples/data/make_clinics.py."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "data" / "make_clinics.py"
    spec = importlib.util.spec_from_file_location("make_clinics", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.clinics(n, seed)


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
