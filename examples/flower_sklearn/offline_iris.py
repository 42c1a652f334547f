"""An offline copy of ``hitorilabs/iris``, the Hugging Face data set Flower's scikit-learn quickstart
loads with Flower Datasets, for machines without network access (tests, the documentation build):

    python examples/flower_sklearn/offline_iris.py DIR     # writes DIR/hitorilabs/iris/data/*.parquet

Run the app from ``DIR`` with ``HF_DATASETS_OFFLINE=1`` (the command prints the environment):
``datasets.load_dataset("hitorilabs/iris")`` then reads the local folder of that name. The copy is
scikit-learn's bundled iris (150 rows, in scikit-learn's order) with the columns ``sepal_length,
sepal_width, petal_length, petal_width`` and ``species`` (a ``ClassLabel``: 0 setosa, 1 versicolor,
2 virginica). It stands in for the hub copy; it is not a byte-for-byte download of it.
"""

from __future__ import annotations

import sys
from pathlib import Path

FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


def write_offline_iris(folder) -> dict:
    """Write the copy under ``folder``; return the environment that keeps Hugging Face offline with
    its cache in ``folder`` (module docstring)."""
    import datasets
    from sklearn.datasets import load_iris

    iris = load_iris()
    columns = {name: iris.data[:, j].tolist() for j, name in enumerate(FEATURES)}
    columns["species"] = iris.target.tolist()
    features = datasets.Features({**{name: datasets.Value("float64") for name in FEATURES},
                                  "species": datasets.ClassLabel(names=list(iris.target_names))})
    target = Path(folder) / "hitorilabs" / "iris" / "data"
    target.mkdir(parents=True, exist_ok=True)
    datasets.disable_progress_bars()
    datasets.Dataset.from_dict(columns, features=features).to_parquet(str(target / "train-00000-of-00001.parquet"))
    return {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HOME": str(Path(folder).resolve() / "hf-home"), "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}


if __name__ == "__main__":
    env = write_offline_iris(sys.argv[1] if len(sys.argv) > 1 else ".")
    print(" ".join(f"{k}={v}" for k, v in env.items()))
