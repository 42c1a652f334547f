"""sklearnexample: the ServerApp (FedAvg over the clients' LogisticRegression fits)."""

from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from sklearnexample.task import get_model, get_model_params, set_initial_params

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    num_rounds = context.run_config["num-server-rounds"]
    model = get_model(context.run_config["penalty"], context.run_config["local-epochs"])
    set_initial_params(model)
    arrays = ArrayRecord(get_model_params(model))
    nodes = context.run_config.get("min-nodes", 2)
    strategy = FedAvg(fraction_train=1.0, fraction_evaluate=1.0, min_train_nodes=nodes,
                      min_evaluate_nodes=nodes, min_available_nodes=nodes)
    result = strategy.start(grid=grid, initial_arrays=arrays, num_rounds=num_rounds)
    print(result.arrays.to_numpy_ndarrays()[0].round(3))
