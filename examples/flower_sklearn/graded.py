"""The app in sklearnexample/, graded by drflmodel without editing it (the recipe works next to Flower's own quickstart)."""

from drflmodel import flower as dmf
from flwr_datasets.partitioner import IidPartitioner
from sklearnexample import client_app, server_app, task                      # the app, not edited
rows = dmf.FlowerDatasets(task.DATASET, IidPartitioner, target="species", features=task.FEATURES, take=0.8)
model = task.create_log_reg_and_instantiate_parameters("l2")                # what each client trains
server = dmf.graded(server_app.app, estimator=model)                        # run config trace-out: saved
client = dmf.answering(client_app.app, estimator=model, rows=rows, classes=task.UNIQUE_LABELS)
