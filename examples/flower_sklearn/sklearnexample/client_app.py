"""sklearnexample: the ClientApp (a local LogisticRegression fit per round)."""

import warnings

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from sklearn.metrics import log_loss

from sklearnexample.task import (UNIQUE_LABELS, get_model, get_model_params, load_data,
                                 set_initial_params, set_model_params)

app = ClientApp()


def _model(msg: Message, context: Context):
    model = get_model(context.run_config["penalty"], context.run_config["local-epochs"])
    set_initial_params(model)
    set_model_params(model, msg.content["arrays"].to_numpy_ndarrays())
    return model


@app.train()
def train(msg: Message, context: Context):
    model = _model(msg, context)
    X_train, _, y_train, _ = load_data(context.node_config["partition-id"], context.node_config["num-partitions"])
    with warnings.catch_warnings():          # one local epoch does not converge (by design)
        warnings.simplefilter("ignore")
        model.fit(X_train, y_train)
    metrics = {"num-examples": len(X_train),
               "train_logloss": log_loss(y_train, model.predict_proba(X_train), labels=UNIQUE_LABELS)}
    content = RecordDict({"arrays": ArrayRecord(get_model_params(model)), "metrics": MetricRecord(metrics)})
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context):
    model = _model(msg, context)
    _, X_test, _, y_test = load_data(context.node_config["partition-id"], context.node_config["num-partitions"])
    metrics = {"num-examples": len(X_test), "test_accuracy": model.score(X_test, y_test),
               "test_logloss": log_loss(y_test, model.predict_proba(X_test), labels=UNIQUE_LABELS)}
    return Message(content=RecordDict({"metrics": MetricRecord(metrics)}), reply_to=msg)
