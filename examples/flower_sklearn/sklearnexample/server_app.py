"""sklearnexample: the ServerApp (FedAvg over the clients' LogisticRegression epochs)."""

from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from sklearnexample.task import create_log_reg_and_instantiate_parameters, get_model_params

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    model = create_log_reg_and_instantiate_parameters(context.run_config["penalty"])
    nodes = context.run_config.get("min-nodes", 2)        # every supernode takes part in every round
    strategy = FedAvg(fraction_train=1.0, fraction_evaluate=1.0, min_train_nodes=nodes,
                      min_evaluate_nodes=nodes, min_available_nodes=nodes)
    result = strategy.start(grid=grid, initial_arrays=ArrayRecord(get_model_params(model)),
                            num_rounds=context.run_config["num-server-rounds"])
    print(result.arrays.to_numpy_ndarrays()[0].round(3))
