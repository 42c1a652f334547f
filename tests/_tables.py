"""Realistic small tables shared by tests, generated from a seed (no file is shipped)."""

from __future__ import annotations

import numpy as np


def clinics_table(seed: int, n: int = 330) -> dict:
    """A clinics table of the kind the README's CSV example reads: ``n`` patients over three sites
    of unequal sizes (``site``), ``age`` in whole years (18-89), ``bmi``, a three-level text column
    ``smoker`` (never / former / current) and a binary ``outcome`` drawn from a logistic model with
    a site shift. Returned as a mapping of columns (pandas is optional)."""
    rng = np.random.default_rng(seed)
    sites = np.array(["north", "south", "east"])
    site = rng.choice(sites, n, p=rng.dirichlet(np.full(3, 3.0)))
    age = rng.integers(18, 90, n)
    bmi = rng.normal(27, 5, n).round(1)
    smoker = rng.choice(["never", "former", "current"], n, p=[0.5, 0.3, 0.2])
    shift = dict(zip(sites, rng.normal(0, 0.6, 3)))
    z = (-5 + 0.05 * age + 0.08 * bmi + np.where(smoker == "current", 1.0, np.where(smoker == "former", 0.4, 0.0))
         + np.array([shift[s] for s in site]))
    outcome = (rng.uniform(size=n) < 1 / (1 + np.exp(-z))).astype(int)
    return {"site": site, "age": age, "bmi": bmi, "smoker": smoker, "outcome": outcome}
