"""sklearnexample: a Flower / scikit-learn app (federated logistic regression on iris)."""
