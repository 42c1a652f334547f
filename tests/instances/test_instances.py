"""Benchmark instances: the generators against their published recipes (LEAF's Table 1 exactly; the
FedProx and LEAF scripts transcribed here with numpy's global generator, draw for draw; the recipes'
statistics), the Adult protocol against UCI's counts, certified optima with accuracies recomputed
here, the versioned cache, and the benchopt export evaluated at the certified optimum."""

import importlib.util
import json

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidParameterError
from drflmodel.instances import adult_doctorate, certify, export_benchopt, fedprox_synthetic, leaf_synthetic


# --------------------------------------------------------------------------- published recipes
def test_leaf_default_reproduces_the_published_statistics():
    """LEAF paper, Table 1, Synthetic: 1,000 devices, 107,553 samples, 107.55 per device (std 213.22)."""
    st = leaf_synthetic().statistics()
    assert st["devices"] == 1000 and st["samples"] == 107553
    assert round(st["mean"], 2) == 107.55 and round(st["std"], 2) == 213.22


def _leaf_script(num_tasks, num_classes, num_dim, seed, commit="54669fd"):
    """LEAF's data/synthetic recipe, written here with numpy's global generator as the script runs it
    (main seeds, draws the sizes; the dataset seeds again); the labels of LEAF's code at ``commit``:
    54669fd (HEAD, "fixes softmax bug") ``scipy.special.softmax(..., axis=1)``, 15681b5 (its first
    commit) ``np.exp(x) / sum(np.exp(x))``, Python's sum over a task's rows."""
    from scipy.special import softmax

    np.random.seed(seed)
    sizes = [min(s + 5, 1000) for s in np.random.lognormal(3, 2, (num_tasks)).astype(int)]
    np.random.seed(seed)
    Q = np.random.normal(loc=0.0, scale=1.0, size=(num_dim + 1, num_classes, 1))
    Sigma = np.diag([(i + 1) ** (-1.2) for i in range(num_dim)])
    loc0 = np.random.normal(loc=0, scale=1., size=None)
    mean = np.random.normal(loc=loc0, scale=1., size=1)
    out = []
    for n in sizes:
        np.random.choice(range(1), size=None, replace=True, p=[1.0])
        B = np.random.normal(loc=0.0, scale=1.0, size=None)
        loc = np.random.normal(loc=B, scale=1.0, size=num_dim)
        x = np.ones((n, num_dim + 1))
        x[:, 1:] = np.random.multivariate_normal(mean=loc, cov=Sigma, size=n)
        w = np.matmul(Q, np.random.normal(loc=mean, scale=0.1, size=mean.shape))
        s = np.matmul(x, w) + np.random.normal(loc=0., scale=0.1, size=(n, num_classes))
        if commit == "54669fd":
            out.append((x[:, 1:], np.argmax(softmax(s, axis=1), axis=1)))
        else:
            z = np.exp(s)
            out.append((x[:, 1:], np.argmax(z / sum(z), axis=1)))
    return out


@pytest.mark.parametrize("commit", ["54669fd", "15681b5"])
def test_leaf_generator_is_the_published_script_draw_for_draw(commit):
    """The default labels are LEAF's at HEAD (54669fd); labels="15681b5" gives its first commit's."""
    kwargs = {} if commit == "54669fd" else {"labels": commit}
    inst = leaf_synthetic(n_tasks=25, n_classes=5, dim=12, seed=17, train_fraction=1.0, **kwargs)
    assert inst.recipe["labels"] == commit and commit in inst.notes[0]
    ref = _leaf_script(25, 5, 12, 17, commit)
    for client, (X, y) in zip(inst.train.clients, ref):
        assert np.array_equal(client.X[:, 1:], X) and np.array_equal(np.asarray(client.y).astype(int), y)
    other = _leaf_script(25, 5, 12, 17, "15681b5" if commit == "54669fd" else "54669fd")
    assert any(np.any(y != y2) for (_, y), (_, y2) in zip(ref, other))      # the two commits differ


def test_leaf_default_labels_differ_from_the_first_commits_as_measured_upstream():
    """LEAF's own scripts run at 54669fd and at 15681b5 (issue 43's measurement, outside drflmodel):
    77,844 of the 107,553 labels (72.4%) differ; X is the same."""
    head, first = leaf_synthetic(train_fraction=1.0), leaf_synthetic(train_fraction=1.0, labels="15681b5")
    ya = np.concatenate([c.y for c in head.train.clients])
    yb = np.concatenate([c.y for c in first.train.clients])
    assert ya.size == 107553 and int(np.sum(ya != yb)) == 77844
    assert all(np.array_equal(a.X, b.X) for a, b in zip(head.train.clients, first.train.clients))


def _fedprox_script(alpha, beta, iid, seed, users=30, dimension=60, classes=10):
    """FedProx's generate_synthetic / generate_iid recipe with numpy's global generator seeded."""
    np.random.seed(seed)
    samples = np.random.lognormal(4, 2, (users)).astype(int) + 50
    cov = np.diag([np.power(j + 1, -1.2) for j in range(dimension)])
    out = []
    if iid:
        W = np.random.normal(0, 1, (dimension, classes))
        b = np.random.normal(0, 1, classes)
        for i in range(users):
            xx = np.random.multivariate_normal(np.zeros(dimension), cov, samples[i])
            out.append((xx, np.array([np.argmax(np.exp(r @ W + b) / np.exp(r @ W + b).sum()) for r in xx])))
        return out
    mean_W = np.random.normal(0, alpha, users)
    B = np.random.normal(0, beta, users)
    mean_x = [np.random.normal(B[i], 1, dimension) for i in range(users)]
    for i in range(users):
        W = np.random.normal(mean_W[i], 1, (dimension, classes))
        b = np.random.normal(mean_W[i], 1, classes)
        xx = np.random.multivariate_normal(mean_x[i], cov, samples[i])
        out.append((xx, np.array([np.argmax(np.exp(r @ W + b) / np.exp(r @ W + b).sum()) for r in xx])))
    return out


@pytest.mark.parametrize("alpha,beta,iid", [(0.0, 0.0, False), (1.0, 1.0, False), (0.0, 0.0, True)])
def test_fedprox_generator_is_the_published_script_seeded(alpha, beta, iid):
    inst = fedprox_synthetic(alpha, beta, iid=iid, seed=5, n_devices=6, dim=10, n_classes=3, train_fraction=1.0)
    ref = _fedprox_script(alpha, beta, iid, 5, users=6, dimension=10, classes=3)
    for client, (X, y) in zip(inst.train.clients, ref):
        assert np.array_equal(client.X[:, 1:], X) and np.array_equal(np.asarray(client.y).astype(int), y)


def test_fedprox_synthetic_has_the_recipes_statistics():
    """30 devices, 60 features, 10 classes; N_k = floor(LogNormal(4, 2)) + 50; within a device
    x ~ N(v_k, diag(j^-1.2)); across devices v_k ~ N(B_k, 1), B_k ~ N(0, beta^2)."""
    inst = fedprox_synthetic(1.0, 1.0, seed=0)
    assert inst.train.n_clients == 30 and inst.train.dim == 61 and inst.train.n_classes == 10
    sizes = np.concatenate([fedprox_synthetic(0.5, 0.5, seed=s, train_fraction=1.0).train.sizes for s in range(60)])
    assert sizes.min() >= 50
    from scipy.stats import norm

    # floor(e^(4 + 2Z)) >= k  <=>  Z >= (log k - 4) / 2: three quantiles of the recipe, 1,800 draws
    for k in (7, 54, 403):
        expected = norm.sf((np.log(k) - 4.0) / 2.0)
        assert abs(np.mean(sizes - 50 >= k) - expected) < 0.035, k
    big = max(inst.train.clients, key=lambda c: c.size)
    var = big.X[:, 1:].var(axis=0)
    expected = np.arange(1, 61, dtype=float) ** -1.2
    assert np.all(np.abs(var / expected - 1) < 6 / np.sqrt(big.size))
    means = []
    for s in range(25):
        try:
            clients = fedprox_synthetic(0.0, 3.0, seed=s, train_fraction=1.0).train.clients
        except InvalidParameterError:                   # a seed whose labels miss a class
            continue
        means += [c.X[:, 1:].mean(axis=0)[:3] for c in clients]
    assert len(means) >= 300 and 7.0 < np.var(means) < 13.0     # Var(v_kj) = beta^2 + 1 = 10


def test_adult_doctorate_is_the_qffl_codes_protocol():
    """fair_flearn's data/adult/create_dataset.py on UCI adult.data (32,561 rows): 413 "phd" and
    32,148 "non-phd" training rows, 99 one-hot categorical features (the continuous ones dropped),
    a missing value an all-zero block -- UCI's counts of "?": workclass 1,836, occupation 1,843,
    native-country 583 -- and 7,841 rows (24.1%) above 50K; its test rows (adult.test) not shipped."""
    inst = adult_doctorate()
    assert [c.name for c in inst.train.clients] == ["doctorate", "non-doctorate"]
    assert inst.train.sizes.tolist() == [413, 32148] and inst.test is None
    assert inst.train.dim == 1 + 99 and inst.recipe["protocol"] == "qffl"
    X = np.vstack([c.X for c in inst.train.clients])
    y = np.concatenate([c.y for c in inst.train.clients])
    assert int(np.sum(y > 0)) == 7841 and round(float(np.mean(inst.train.clients[0].y > 0)), 3) == 0.741
    assert np.all(X[:, 0] == 1) and set(np.unique(X[:, 1:])) == {0.0, 1.0}
    blocks = {"workclass": 8, "education": 16, "marital-status": 7, "occupation": 14, "relationship": 6,
              "race": 5, "sex": 2, "native-country": 41}
    missing, j = {}, 1
    for name, width in blocks.items():
        rows = X[:, j:j + width].sum(axis=1)
        assert rows.max() == 1, name                          # one-hot: at most one 1 per block
        missing[name], j = int(np.sum(rows == 0)), j + width
    assert j == 100
    assert missing == {**{k: 0 for k in blocks}, "workclass": 1836, "occupation": 1843, "native-country": 583}


def test_adult_doctorate_a8a_protocol_is_libsvms_split():
    """protocol="a8a": LIBSVM's a8a (22,696 rows, 300 doctorates) held out a8a.t (9,865, 113)."""
    inst = adult_doctorate(protocol="a8a")
    assert inst.train.sizes.tolist() == [300, 22396] and inst.test.sizes.tolist() == [113, 9752]
    assert inst.train.dim == 124 and inst.statistics()["samples"] == 32561


@pytest.mark.parametrize("call,match", [
    (lambda: fedprox_synthetic(alpha=-1), "alpha must lie in"),
    (lambda: fedprox_synthetic(iid="yes"), "iid must be True or False"),
    (lambda: fedprox_synthetic(train_fraction=0.0), "train_fraction must lie in"),
    (lambda: leaf_synthetic(prob_clusters=(0.5, 0.2)), "prob_clusters must be a probability vector"),
    (lambda: leaf_synthetic(n_tasks=0), "n_tasks must be an integer"),
    (lambda: leaf_synthetic(labels="head"), "labels must be one of"),
    (lambda: adult_doctorate(protocol="afl"), "protocol must be one of"),
    (lambda: fedprox_synthetic(seed=5, n_devices=6, dim=10), "labels no row with class"),
])
def test_bad_generator_arguments_are_named(call, match):
    with pytest.raises(InvalidParameterError, match=match):
        call()


# --------------------------------------------------------------------------- certified optima
@pytest.fixture(scope="module")
def small(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cache")
    inst = fedprox_synthetic(1.0, 1.0, seed=3, n_devices=6, dim=8, n_classes=3)
    return inst, certify(inst, cache_path=folder), folder


def test_every_family_is_certified_with_accuracies_recomputed_here(small):
    inst, cert, _ = small
    assert set(cert.results) == {"erm", "afl", "qffl(q=1)"}
    for r in cert.results.values():
        assert r.status == "optimal" and r.lower_bound <= r.value <= r.upper_bound + 1e-12
        for part, fed in (("train", inst.train), ("test", inst.test)):
            W = r.theta.reshape(3, -1).T
            per = [np.mean(np.argmax(c.X @ W, axis=1) == np.asarray(c.y).astype(int)) for c in fed.clients]
            acc = r.accuracy[part]
            assert np.allclose(acc["per_client"], per) and acc["worst"] == pytest.approx(min(per))
            assert acc["pooled"] == pytest.approx(np.average(per, weights=fed.sizes))
    # by construction AFL minimizes the largest client loss: no other family's point has a smaller one
    worst = {k: np.max(inst.problem("erm").client_losses(r.theta)) for k, r in cert.results.items()}
    assert worst["afl"] <= min(worst.values()) + 1e-7


def test_the_cache_is_versioned_reused_and_not_trusted_blindly(small, monkeypatch):
    inst, cert, folder = small
    again = certify(inst, cache_path=folder)
    assert all(r.cached for r in again.results.values())
    assert all(np.array_equal(again.results[k].theta, cert.results[k].theta) for k in cert.results)
    path = cert.cache_files["erm"]
    stored = json.loads(open(path).read())
    stored["result"]["theta"] = (np.asarray(stored["result"]["theta"]) + 1e-3).tolist()
    open(path, "w").write(json.dumps(stored))
    redone = certify(inst, families=["erm"], cache_path=folder)
    assert not redone.results["erm"].cached and np.allclose(redone.results["erm"].theta, cert.results["erm"].theta)
    from drflmodel.instances import certified

    real = certified.versions()
    monkeypatch.setattr(certified, "versions", lambda: {**real, "numpy": "0.0.0"})
    other = certify(inst, families=["erm"], cache_path=folder)
    assert not other.results["erm"].cached and other.cache_files["erm"] != redone.cache_files["erm"]
    assert "drflmodel" in json.dumps(cert.to_dict()["versions"])


def test_the_default_cache_directory_is_outside_the_repository(monkeypatch, tmp_path):
    from pathlib import Path

    from drflmodel.instances import cache_dir

    monkeypatch.delenv("DRFLMODEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "drflmodel"
    monkeypatch.setenv("DRFLMODEL_CACHE", str(tmp_path / "x"))
    assert cache_dir() == tmp_path / "x"
    repo = Path(__file__).resolve().parents[2]
    assert repo not in cache_dir().parents


# --------------------------------------------------------------------------- benchopt
def _module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("family", ["erm", "qffl"])
def test_the_exported_objective_at_the_certified_optimum_equals_the_oracles_value(small, tmp_path, family):
    pytest.importorskip("benchopt")
    from benchopt.benchmark import Benchmark

    inst, cert, _ = small
    root = export_benchopt(cert, tmp_path / f"bench_{family}", family)
    bench = Benchmark(root)
    assert bench.get_solver_names() == ["scipy-lbfgs"] and len(bench.get_dataset_names()) == 1
    objective = bench.get_benchmark_objective().get_instance()
    dataset = bench.get_datasets()[0].get_instance()
    objective._set_dataset(dataset)
    result = [r for k, r in cert.results.items() if k.startswith(family)][0]
    out = objective(dict(theta=result.theta))[0]
    assert out["objective_value"] == pytest.approx(result.value, rel=1e-12)
    assert out["objective_suboptimality"] == pytest.approx(result.value - result.lower_bound, abs=1e-12)
    solver = bench.get_solvers()[0].get_instance()
    solver._set_objective(objective)
    solver.run(300)
    reached = objective(solver.get_result())[0]["objective_suboptimality"]
    assert -1e-12 <= reached <= 1e-8                     # never below the certified lower bound


def test_export_refuses_afl_and_uncertified_families(small, tmp_path):
    _, cert, _ = small
    with pytest.raises(InvalidParameterError, match="not smooth"):
        export_benchopt(cert, tmp_path / "a", "afl")
    one = certify(small[0], families=["erm"], cache=False)
    with pytest.raises(InvalidParameterError, match="was not certified"):
        export_benchopt(one, tmp_path / "b", "qffl")
