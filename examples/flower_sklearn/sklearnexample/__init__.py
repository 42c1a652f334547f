"""sklearnexample: a Flower / scikit-learn app (federated logistic regression on iris), in the shape of
Flower's scikit-learn quickstart (``examples/quickstart-sklearn`` of the Flower repository)."""
