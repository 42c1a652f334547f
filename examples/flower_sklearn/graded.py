"""The app in sklearnexample/, graded by drflmodel without editing it (README: "Grade any Flower app")."""

from drflmodel import flower as dmf
from sklearnexample import client_app, server_app, task                      # the app, not edited
rows = lambda ctx: task.load_data(ctx.node_config["partition-id"], ctx.node_config["num-partitions"])[::2]  # noqa: E731
server = dmf.graded(server_app.app, estimator=task.get_model("l2", 1))        # run config trace-out: saved
client = dmf.answering(client_app.app, estimator=task.get_model("l2", 1), rows=rows, classes=task.UNIQUE_LABELS)
