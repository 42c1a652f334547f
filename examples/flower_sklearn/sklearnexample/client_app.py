"""sklearnexample: the ClientApp (one local LogisticRegression epoch per round)."""

import warnings

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from sklearn.metrics import log_loss

from sklearnexample.task import (UNIQUE_LABELS, create_log_reg_and_instantiate_parameters, get_model_params,
                                 load_data, set_model_params)

app = ClientApp()


def _model(msg: Message, context: Context):
    model = create_log_reg_and_instantiate_parameters(context.run_config["penalty"])
    return set_model_params(model, msg.content["arrays"].to_numpy_ndarrays())


@app.train()
def train(msg: Message, context: Context):
    model = _model(msg, context)
    X_train, y_train, _, _ = load_data(context.node_config["partition-id"], context.node_config["num-partitions"])
    with warnings.catch_warnings():          # one local epoch does not converge (by design)
        warnings.simplefilter("ignore")
        model.fit(X_train, y_train)
    metrics = {"num-examples": len(X_train),
               "train_logloss": log_loss(y_train, model.predict_proba(X_train), labels=UNIQUE_LABELS),
               "train_accuracy": model.score(X_train, y_train)}
    content = RecordDict({"arrays": ArrayRecord(get_model_params(model)), "metrics": MetricRecord(metrics)})
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context):
    model = _model(msg, context)
    _, _, X_test, y_test = load_data(context.node_config["partition-id"], context.node_config["num-partitions"])
    metrics = {"num-examples": len(X_test), "accuracy": model.score(X_test, y_test),
               "test_logloss": log_loss(y_test, model.predict_proba(X_test), labels=UNIQUE_LABELS)}
    return Message(content=RecordDict({"metrics": MetricRecord(metrics)}), reply_to=msg)
