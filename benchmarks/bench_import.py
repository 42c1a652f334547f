"""Cold start: import time of ``drflmodel`` (lazy submodules) against ``numpy`` and ``cvxpy``, and the
first certified solve and the CLI's ``solve`` in fresh processes (issue 41).

Run: ``python benchmarks/bench_import.py [--repeats 7]``. Reports the median of ``--repeats``
fresh-interpreter runs of each command (the repeats interleaved over the commands), the same
minus the ``python -c pass`` baseline, and whether the command imported CVXPY:

* ``import numpy`` / ``import drflmodel`` / ``import cvxpy`` / ``import drflmodel.problems.minmax.dro``;
* ``first solve 240x15``: ``import drflmodel``, a 240 x 15 logistic ERM (one client,
  ``gaussian_mixture``), ``FederatedDRO(...).solve()`` -- what a user's first call costs;
* ``sklearn fit 240x15``: ``from sklearn.linear_model import LogisticRegression`` and ``fit`` on
  the same rows (the uncertified tool a user compares with);
* ``cli solve clinics``: ``drflmodel solve examples/data/clinics.toml`` (the CSV example: 4 sites,
  logistic, CVaR) with the JSON written to a temporary file.

Set ``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1`` on a shared machine; ratios between rows measured
in the same run are what to compare.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

_DATA = ("import drflmodel as dm\n"
         "fed = dm.datasets.gaussian_mixture(240, 14, 2, n_clients=1, alpha=0.5, seed=0)\n")
FIRST_SOLVE = (_DATA + "prob = dm.FederatedDRO(fed, dm.losses.Logistic(), dm.sets.Simplex(1), l2=1e-3, "
               "penalize_intercept=False)\nsol = prob.solve()\nassert sol.status == 'optimal', sol.status\n")
SKLEARN_FIT = (_DATA + "X, y, _ = fed.pooled()\nfrom sklearn.linear_model import LogisticRegression\n"
               "LogisticRegression().fit(X[:, :-1], y)\n")
REPORT = "\nimport sys; sys.stderr.write('CVXPY=%s' % ('cvxpy' in sys.modules))\n"


def _run_once(code: str) -> tuple[float, bool]:
    """Seconds of ``python -c code`` in a fresh interpreter, and whether it imported CVXPY."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code + REPORT], check=True, env=env, cwd=ROOT,
                          capture_output=True, text=True)
    return time.perf_counter() - t0, "CVXPY=True" in done.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    out = pathlib.Path(tempfile.mkdtemp()) / "solution.json"
    cli = ("import sys\nfrom drflmodel.cli import main\n"
           f"sys.argv = ['drflmodel', 'solve', 'examples/data/clinics.toml', '--out', {str(out)!r}]\n"
           "main()\n")
    commands = [("python -c pass", "pass"), ("import numpy", "import numpy"),
                ("import drflmodel", "import drflmodel"), ("import cvxpy", "import cvxpy"),
                ("import drflmodel.problems.minmax.dro", "import drflmodel.problems.minmax.dro"),
                ("first solve 240x15", FIRST_SOLVE), ("sklearn fit 240x15", SKLEARN_FIT),
                ("cli solve clinics", cli)]
    times, cvxpy = {name: [] for name, _ in commands}, {}
    for _ in range(args.repeats):         # interleaved: a load that varies over time hits every command alike
        for name, code in commands:
            seconds, cvxpy[name] = _run_once(code)
            times[name].append(seconds)
    rows = [(name, statistics.median(times[name]), cvxpy[name]) for name, _ in commands]
    base = rows[0][1]
    print(f"| command | median s | minus baseline | imports CVXPY |\n|---|---|---|---|")
    for name, t, cvxpy in rows:
        print(f"| {name} | {t:.3f} | {t - base:.3f} | {'yes' if cvxpy else 'no'} |")
    t = {name: s - base for name, s, _ in rows}
    print(f"\nfirst certified solve / scikit-learn import + fit: {t['first solve 240x15'] / t['sklearn fit 240x15']:.2f}")


if __name__ == "__main__":
    main()
