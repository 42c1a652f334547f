"""Benchmark (issue 7): per-round time of Scaff-PD, vectorized across clients versus a
straightforward per-client loop of the same algorithm.

Instance: 100 clients x 200 samples x 50 features (``synthetic_regression``, Scaff-PD recipe),
squared loss, ``l2 = 0.1``, chi-square penalty (rho = 0.1), J = 10 local steps, deterministic
gradients, a constant schedule (tau = 0.01, sigma = 0.001, extrapolation 1) so that both runs
do exactly the same arithmetic.

* vectorized: ``ScaffPD(...).run(problem)`` -- the batched client runtime (one array operation per
  local step for all clients, counted server crossings); per-round time = ``trace.round_time``;
* loop: :func:`drflmodel.solvers._loop.scaffpd_loop` -- a Python loop over clients, each a
  ``problem.client_view(i)``; per-round time = wall time / rounds.

Both produce the same iterates; the maximal difference is printed and must be <= 1e-10.
Runs alternate (vectorized, loop, vectorized, ...) in the same process; the median per-round
times and their ratio are reported.

Run: ``python benchmarks/bench_scaffpd.py [--rounds R] [--repeats K]``. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import drflmodel as dm
from drflmodel.solvers import ScaffPD
from drflmodel.solvers._loop import scaffpd_loop


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--dim", type=int, default=50)
    ap.add_argument("--local-steps", type=int, default=10)
    args = ap.parse_args(argv)

    fed = dm.datasets.synthetic_regression(n_clients=args.clients, dim=args.dim,
                                           samples=args.samples, seed=0)
    prob = dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.ChiSquare(args.clients, 0.1),
                           l2=0.1)
    solver = ScaffPD(rounds=args.rounds, local_steps=args.local_steps, schedule="constant",
                     step_size=0.01, dual_step=0.001, extrapolation=1.0)
    _ = prob.objectives.gradients(np.zeros(args.dim))          # build the stacked arrays once

    vec_times, loop_times, diffs = [], [], []
    for _ in range(args.repeats):
        tr = solver.run(prob, seed=0)
        vec_times.append(float(np.mean(tr.round_time)))
        t0 = time.perf_counter()
        th, la = scaffpd_loop(prob, solver)
        loop_times.append((time.perf_counter() - t0) / args.rounds)
        diffs.append(max(float(np.max(np.abs(th - tr.theta))), float(np.max(np.abs(la - tr.weights)))))

    v, lp = float(np.median(vec_times)), float(np.median(loop_times))
    print(f"instance: {args.clients} clients x {args.samples} samples x {args.dim} features, "
          f"J = {args.local_steps}, {args.rounds} rounds x {args.repeats} repeats")
    print(f"vectorized: {1e3 * v:8.2f} ms/round   (runs: {', '.join(f'{1e3 * t:.2f}' for t in vec_times)})")
    print(f"loop      : {1e3 * lp:8.2f} ms/round   (runs: {', '.join(f'{1e3 * t:.2f}' for t in loop_times)})")
    print(f"speed-up (loop / vectorized): {lp / v:.2f}x")
    print(f"max |iterate difference| (theta and lambda): {max(diffs):.2e}")
    comm = tr.total_communication()
    print(f"communication per round: {comm['messages_up'] // args.rounds} messages / "
          f"{comm['floats_up'] // args.rounds} floats up, {comm['messages_down'] // args.rounds} "
          f"messages / {comm['floats_down'] // args.rounds} floats down")
    ok = max(diffs) <= 1e-10
    if not ok:
        print("FAIL: the vectorized and loop iterates differ by more than 1e-10")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
