"""The app's data, offline: scikit-learn's bundled iris written once as a local Hugging Face data set
folder, which Flower Datasets loads like a hub name (``FederatedDataset(dataset=<folder>)``: no
network, no account).

Flower's own scikit-learn quickstart loads ``hitorilabs/iris`` from the Hugging Face Hub; this app
loads :func:`local_iris` instead, so that it runs as written on a machine without network access and
prints the same numbers everywhere. The copy is scikit-learn's iris (150 rows, in scikit-learn's
order) with the columns ``sepal_length, sepal_width, petal_length, petal_width`` and ``species`` (a
``ClassLabel``: 0 setosa, 1 versicolor, 2 virginica); it stands in for the hub copy and is not a
byte-for-byte download of it. To load the hub copy as Flower's quickstart does, set
``sklearnexample.task.DATASET = "hitorilabs/iris"`` (and the same name in ``graded.py``).

    python examples/flower_sklearn/offline_iris.py DIR     # writes DIR/hitorilabs/iris/data/*.parquet

writes the same copy under ``DIR`` in the layout of the hub name: run code that loads
``"hitorilabs/iris"`` from ``DIR`` with the environment the command prints (``HF_DATASETS_OFFLINE=1``:
``datasets.load_dataset("hitorilabs/iris")`` then reads the local folder of that name).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
PARQUET = "train-00000-of-00001.parquet"
#: where :func:`local_iris` writes the copy (ignored by git): ``data/iris`` next to this file
LOCAL = Path(__file__).resolve().parent / "data" / "iris"


def _write(path: Path) -> None:
    """scikit-learn's iris as ``path`` (a parquet file), written atomically (parallel clients)."""
    import datasets
    from sklearn.datasets import load_iris

    iris = load_iris()
    columns = {name: iris.data[:, j].tolist() for j, name in enumerate(FEATURES)}
    columns["species"] = iris.target.tolist()
    features = datasets.Features({**{name: datasets.Value("float64") for name in FEATURES},
                                  "species": datasets.ClassLabel(names=list(iris.target_names))})
    path.parent.mkdir(parents=True, exist_ok=True)
    datasets.disable_progress_bars()
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    try:
        datasets.Dataset.from_dict(columns, features=features).to_parquet(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def local_iris(folder=LOCAL) -> str:
    """The local data set folder holding iris (written on first use); pass it as Flower Datasets'
    ``dataset``."""
    folder = Path(folder)
    if not (folder / "data" / PARQUET).is_file():
        _write(folder / "data" / PARQUET)
    return str(folder)


def write_offline_iris(folder) -> dict:
    """Write the copy as ``folder/hitorilabs/iris``; return the environment that keeps Hugging Face
    offline with its cache in ``folder`` (module docstring)."""
    local_iris(Path(folder) / "hitorilabs" / "iris")
    return {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HOME": str(Path(folder).resolve() / "hf-home"), "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}


if __name__ == "__main__":
    env = write_offline_iris(sys.argv[1] if len(sys.argv) > 1 else ".")
    print(" ".join(f"{k}={v}" for k, v in env.items()))
