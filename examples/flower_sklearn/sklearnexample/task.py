"""sklearnexample: the model and the data (iris, an IID split into partitions, 80% train / 20% test)."""

import numpy as np
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression

UNIQUE_LABELS = [0, 1, 2]
FEATURES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]


def get_model(penalty: str, local_epochs: int) -> LogisticRegression:
    return LogisticRegression(penalty=penalty, max_iter=local_epochs, warm_start=True)


def get_model_params(model):
    """The arrays a client ships: [coef_, intercept_] (scikit-learn's shapes)."""
    return [model.coef_, model.intercept_] if model.fit_intercept else [model.coef_]


def set_model_params(model, params):
    model.coef_ = params[0]
    if model.fit_intercept:
        model.intercept_ = params[1]
    return model


def set_initial_params(model):
    """Zeros: the parameters exist before the first fit."""
    model.classes_ = np.array(UNIQUE_LABELS)
    model.coef_ = np.zeros((len(UNIQUE_LABELS), len(FEATURES)))
    if model.fit_intercept:
        model.intercept_ = np.zeros((len(UNIQUE_LABELS),))


def load_data(partition_id: int, num_partitions: int):
    """This partition's rows: ``X_train, X_test, y_train, y_test``."""
    X, y = load_iris(return_X_y=True)
    order = np.random.default_rng(42).permutation(len(y))
    part = np.array_split(order, num_partitions)[partition_id]
    cut = int(0.8 * len(part))
    return X[part[:cut]], X[part[cut:]], y[part[:cut]], y[part[cut:]]
