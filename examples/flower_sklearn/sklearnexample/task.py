"""sklearnexample: the model and the data of Flower's scikit-learn quickstart (iris, loaded with
Flower Datasets, split IID into the run's partitions, shuffled with Flower's seed 42; each partition
trains on its first 80% of rows and evaluates on the rest). Flower's quickstart loads
``hitorilabs/iris`` from the Hugging Face Hub; this copy loads scikit-learn's iris from a local
folder (``offline_iris.local_iris``), so it runs without network access: set ``DATASET =
"hitorilabs/iris"`` (here and in ``graded.py``) for the hub copy."""

import numpy as np
from flwr_datasets import FederatedDataset
from flwr_datasets.partitioner import IidPartitioner
from offline_iris import local_iris
from sklearn.linear_model import LogisticRegression

DATASET = local_iris()          # Flower's quickstart: "hitorilabs/iris" (from the Hugging Face Hub)
UNIQUE_LABELS = [0, 1, 2]
FEATURES = ["petal_length", "petal_width", "sepal_length", "sepal_width"]
TARGET = "species"

_fds = None          # one FederatedDataset per process (it downloads and shuffles once)


def get_model_params(model):
    """The arrays a client ships: [coef_, intercept_] (scikit-learn's shapes)."""
    return [model.coef_, model.intercept_] if model.fit_intercept else [model.coef_]


def set_model_params(model, params):
    model.coef_ = params[0]
    if model.fit_intercept:
        model.intercept_ = params[1]
    return model


def set_initial_params(model, n_classes: int, n_features: int):
    """Zeros: the parameters exist before the first fit (the server sends them in round 1)."""
    model.classes_ = np.arange(n_classes)
    model.coef_ = np.zeros((n_classes, n_features))
    if model.fit_intercept:
        model.intercept_ = np.zeros((n_classes,))


def create_log_reg_and_instantiate_parameters(penalty: str) -> LogisticRegression:
    """One SAGA epoch per round, continuing from the global model (warm start)."""
    model = LogisticRegression(penalty=penalty, max_iter=1, warm_start=True, solver="saga")
    set_initial_params(model, n_classes=len(UNIQUE_LABELS), n_features=len(FEATURES))
    return model


def load_data(partition_id: int, num_partitions: int):
    """This partition's rows: ``X_train, y_train, X_test, y_test`` (the first 80% train)."""
    global _fds
    if _fds is None:
        _fds = FederatedDataset(dataset=DATASET, partitioners={"train": IidPartitioner(num_partitions=num_partitions)})
    frame = _fds.load_partition(partition_id, "train").with_format("pandas")[:]
    X, y = frame[FEATURES].to_numpy(), frame[TARGET].to_numpy()
    cut = int(0.8 * len(X))
    return X[:cut], y[:cut], X[cut:], y[cut:]
