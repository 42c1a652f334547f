"""The certified optima of the benchmark instances (drflmodel.instances), as a Markdown table.

For each instance -- FedProx's Synthetic(0, 0), (0.5, 0.5), (1, 1) and IID (seed 0), LEAF's synthetic
data (LEAF's default command: 1000 tasks, seed 931231) and the Adult doctorate / non-doctorate
protocol -- and each objective family that applies (ERM weighted by sample counts, agnostic FL,
q-FFL with q = 1; LEAF: ERM only, see below), prints the certificate (status, value, gap) and the
accuracy at the certified optimum: pooled over the rows and on the worst client, training and
held-out rows, with the solve time. Results are cached (``drflmodel.instances.cache_dir()``), so a
second run only re-evaluates the stored optima.

LEAF with 1000 clients: the min-max families are not run -- q-FFL's certified solve grew to
3.4 GB at 400 clients and was killed at 23 GB with 1000 (measured on this machine).

Run: ``python benchmarks/certified_instances.py`` (about 6 minutes on one core the first time).
"""

from __future__ import annotations

import time

import drflmodel as dm


def instances():
    yield dm.instances.fedprox_synthetic(0.0, 0.0, seed=0)
    yield dm.instances.fedprox_synthetic(0.5, 0.5, seed=0)
    yield dm.instances.fedprox_synthetic(1.0, 1.0, seed=0)
    yield dm.instances.fedprox_synthetic(iid=True, seed=0)
    leaf = dm.instances.leaf_synthetic()
    leaf.families = ("erm",)
    yield leaf
    yield dm.instances.adult_doctorate()


def main() -> list[dict]:
    print("| instance | devices / samples | family | status | value | gap | train acc. (worst client) "
          "| held-out acc. (worst client) | solve s |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for inst in instances():
        t0 = time.perf_counter()
        cert = dm.instances.certify(inst)
        st = inst.statistics()
        for label, r in cert.results.items():
            tr, te = r.accuracy["train"], r.accuracy.get("test")
            held = f"{te['pooled']:.4f} ({te['worst']:.4f})" if te else "-"
            print(f"| {inst.name} | {st['devices']} / {st['samples']} | {label} | {r.status} | {r.value:.8f} "
                  f"| {r.upper_bound - r.lower_bound:.1e} | {tr['pooled']:.4f} ({tr['worst']:.4f}) | {held} "
                  f"| {r.seconds:.1f}{' (cached)' if r.cached else ''} |")
            rows.append({"instance": inst.name, "family": label, **r.to_dict()})
        print(f"<!-- {inst.name}: {time.perf_counter() - t0:.1f} s in this run -->")
    return rows


if __name__ == "__main__":
    main()
