"""Import time of ``drflmodel`` (lazy submodules) against ``numpy`` and ``cvxpy`` in fresh processes.

Run: ``python benchmarks/bench_import.py``. Reports the median of 7 fresh-interpreter imports of
each module, and the ratios to the ``python -c pass`` baseline measured the same way.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time


def _median_seconds(code: str, repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    base = _median_seconds("pass")
    rows = [("python -c pass", base)]
    for mod in ("numpy", "drflmodel", "cvxpy", "drflmodel.problems.minmax.dro"):
        rows.append((f"import {mod}", _median_seconds(f"import {mod}")))
    print(f"{'command':32s} {'median s':>9s} {'minus baseline':>15s}")
    for name, t in rows:
        print(f"{name:32s} {t:9.3f} {t - base:15.3f}")
    t_np = dict(rows)["import numpy"] - base
    t_dm = dict(rows)["import drflmodel"] - base
    print(f"\nimport drflmodel costs {t_dm / max(t_np, 1e-9):.2f}x the import of numpy "
          "(drflmodel loads nothing heavy until a submodule is used)")


if __name__ == "__main__":
    main()
