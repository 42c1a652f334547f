"""Time and certificate of landing points on a published benchmark instance.

FedProx's Synthetic(1, 1) (drflmodel.instances.fedprox_synthetic, seed 0: 30 clients, 22,349 rows,
P = 61 x 10 = 610), ERM weights N_i / N, ridge 1e-3: FedAvg's landing point with J = 10 local steps of
1/(L J) (from zero and from the certified optimum, as the conformance verdict starts), with J = 1 (the
optimum itself), and FedProx's with exact local solves (mu = 1). Printed per point: seconds, status,
certified radius, the round map's contraction q, Newton steps, GMRES iterations, and the distance to
the certified ERM optimum (the client drift). One process, one BLAS thread.

Run: ``python benchmarks/bench_landing.py`` (about 3 minutes on a loaded 2-core machine; the ERM
optimum comes from the cache of ``benchmarks/certified_instances.py`` or is solved first).
"""

from __future__ import annotations

import time

import numpy as np

import drflmodel as dm


def main() -> list[dict]:
    inst = dm.instances.fedprox_synthetic(1.0, 1.0, seed=0)
    prob = inst.problem("erm")
    optimum = dm.instances.certify(inst, families=["erm"]).results["erm"].theta
    L = float(np.max(prob.objectives.smoothness()))
    runs = [("FedAvg", dict(local_steps=10, step_size=1 / (10 * L)), None, "zero"),
            ("FedAvg", dict(local_steps=10, step_size=1 / (10 * L)), optimum, "the optimum"),
            ("FedAvg", dict(local_steps=1, step_size=1 / L), None, "zero"),
            ("FedProx", dict(mu=1.0, local_steps="exact"), None, "zero")]
    rows = []
    for name, config, start, label in runs:
        t0 = time.perf_counter()
        fp = dm.fixed_point(prob, name, theta0=start, **config)
        seconds = time.perf_counter() - t0
        row = {"strategy": name, **{k: v for k, v in config.items()}, "start": label, "seconds": seconds,
               "status": fp.status, "radius": fp.radius, "q": fp.contraction,
               "newton": fp.info.get("newton_steps"), "gmres": fp.info.get("gmres_iterations"),
               "drift": float(np.linalg.norm(fp.theta - optimum))}
        rows.append(row)
        print(f"{name:<8} {config}  from {label:<12} {seconds:7.1f} s  {fp.status}  radius {fp.radius:.1e}  "
              f"q {fp.contraction if fp.contraction is None else f'{fp.contraction:.7f}'}  "
              f"Newton {row['newton']}  GMRES {row['gmres']}  drift {row['drift']:.3e}", flush=True)
    return rows


if __name__ == "__main__":
    main()
