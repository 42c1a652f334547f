"""Write clinics.csv: the small table of the README's CSV walk-through (200 patients of 3 clinics,
raw columns: age 25-85 years, BMI, smoker yes/no, a 0/1 outcome from a logistic model with a
clinic shift). Seeded, so the file is the same on every machine:

    python examples/data/make_clinics.py            # rewrites examples/data/clinics.csv

Then ``drflmodel verify examples/data/clinics.toml`` reproduces the README's output.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def clinics(n: int = 200, seed: int = 0):
    """The table as a pandas DataFrame (columns site, age, bmi, smoker, outcome)."""
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


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "clinics.csv"
    clinics().to_csv(out, index=False)
    print(f"wrote {out}")
