"""Bad input is refused early with a one-line drflmodel error naming the argument (DESIGN.md §4.3).

Two parts: the cases an audit found accepted or failing deep inside a solver (each test fails on
the code before the fix), and a property test (hypothesis) that feeds random wrong types, values
and shapes to every public constructor, to ``solve``, to the estimators' ``fit`` and to the command
line, and asserts a :class:`~drflmodel.errors.DrflmodelError` whose message names the argument.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import drflmodel as dm
from drflmodel import losses, sets, solvers
from drflmodel._config import ConfigError, build_problem, load_config
from drflmodel.cli import main
from drflmodel.errors import DrflmodelError, InvalidDataError, InvalidParameterError


def _small_regression():
    return dm.datasets.synthetic_regression(n_clients=3, dim=3, samples=20, seed=0)


def _vertical():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = np.where(rng.random(40) < 0.5, 1.0, -1.0)
    g = np.arange(40) % 2
    return dm.VerticalFederation([X[:, :2], X[:, 2:]], y, g)


def _one_line(exc) -> str:
    text = str(exc)
    assert "\n" not in text, text
    return text


# =============================================================================================
# the audit's cases
# =============================================================================================
@pytest.mark.parametrize("solver, option, value, kind", [
    ("ECOS", "max_iters", "ten", "an integer"),
    ("ECOS", "abstol", "tiny", "a real number"),
    ("CLARABEL", "max_iter", 2.5, "an integer"),
    ("CLARABEL", "tol_gap_abs", True, "a real number"),
    ("CLARABEL", "equilibrate_enable", "yes", "True or False"),
    ("SCS", "eps_abs", [1e-6], "a real number"),
    ("SCS", "normalize", 1, "True or False"),
])
def test_solver_option_types_are_checked_before_any_solver_runs(monkeypatch, solver, option, value, kind):
    """Before: ECOS raised ``TypeError: 'str' object cannot be interpreted as an integer`` from
    inside the solver (only the option's name was checked)."""
    prob = dm.FederatedDRO(_small_regression(), losses.Squared(), sets.ChiSquare(3, 0.1), l2=0.1)

    def no_solve(*args, **kwargs):                  # the check must happen before any solve
        raise AssertionError("a solver was called")

    monkeypatch.setattr("cvxpy.Problem.solve", no_solve)
    with pytest.raises(InvalidParameterError) as exc:
        prob.solve(solver=solver, **{option: value})
    text = _one_line(exc.value)
    assert repr(option) in text and kind in text and solver in text


def test_solver_options_of_the_right_type_still_pass():
    prob = dm.FederatedDRO(_small_regression(), losses.Squared(), sets.ChiSquare(3, 0.1), l2=0.1)
    sol = prob.solve(solver="CLARABEL", max_iter=np.int64(400), tol_gap_abs=1e-9)   # numpy ints are ints
    assert sol.status == "optimal"
    sol = prob.solve(solver="ECOS", abstol=1e-9, max_iters=300)
    assert sol.status == "optimal"


@pytest.mark.parametrize("where", ["X", "y"])
def test_complex_input_is_refused(where):
    """Before: accepted, the imaginary part dropped with only numpy's ComplexWarning."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((10, 2)), np.where(rng.random(10) < 0.5, 1.0, -1.0)
    args = {"X": X, "y": y}
    args[where] = args[where] + 1j
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # no ComplexWarning either: refused first
        with pytest.raises(InvalidDataError) as exc:
            dm.Federation.from_arrays([args["X"]], [args["y"]], task="classification")
    text = _one_line(exc.value)
    assert where in text and "complex" in text


def test_complex_blocks_of_a_vertical_federation_are_refused():
    vf = _vertical()
    with pytest.raises(InvalidDataError, match=r"blocks\[0\] must be real"):
        dm.VerticalFederation([vf.blocks[0] * (1 + 0j), vf.blocks[1]], vf.y, vf.group)


@pytest.mark.parametrize("value", ["no", "False", 1, 0, None, 1.0])
def test_estimator_booleans_are_checked_as_booleans(value):
    """Before: ``fit_intercept="no"`` was accepted and fitted an intercept (a non-empty string is
    true)."""
    from drflmodel.sklearn import FederatedDROClassifier

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((12, 2)), np.arange(12) % 2
    with pytest.raises(InvalidParameterError) as exc:
        FederatedDROClassifier(fit_intercept=value).fit(X, y)
    assert "fit_intercept must be True or False" in _one_line(exc.value)


def test_estimator_solve_options_must_be_a_mapping():
    from drflmodel.sklearn import FederatedDRORegressor

    rng = np.random.default_rng(0)
    with pytest.raises(InvalidParameterError, match="solve_options must be a dict"):
        FederatedDRORegressor(solve_options="fast").fit(rng.standard_normal((8, 2)), rng.standard_normal(8),
                                                        clients=np.arange(8) % 2)


CSV_CONFIG = """
[data]
source = "csv"
path = "table.csv"
target = "outcome"
client = "site"

[loss]
name = "cauchy"

[problem]
family = "dro"
options = { l2 = 0.1 }
"""


def test_cli_reports_an_unknown_loss_before_reading_the_data(tmp_path, capsys):
    """Before: ``target column 'outcome' is not numeric; regression needs numbers`` (the unknown
    loss was taken for a regression loss and the table read first)."""
    (tmp_path / "table.csv").write_text("site,x,outcome\na,1.0,yes\na,2.0,no\nb,0.5,yes\nb,1.5,no\n")
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(CSV_CONFIG)
    with pytest.raises(ConfigError) as exc:
        load_config(cfg)
    assert "'loss.name' must be one of" in _one_line(exc.value) and "'cauchy'" in str(exc.value)
    assert main(["solve", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "'loss.name'" in err and "outcome" not in err


# =============================================================================================
# property test: random wrong inputs everywhere, always a drflmodel error naming the argument
# =============================================================================================
#: examples per property (DRFLMODEL_BAD_INPUT_EXAMPLES raises it for a longer search)
MAX_EXAMPLES = int(os.environ.get("DRFLMODEL_BAD_INPUT_EXAMPLES", "150"))
OBJ = object()
#: values of the wrong type for any numeric, boolean or choice parameter
JUNK = st.one_of(st.text(min_size=1, max_size=4), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
                 st.complex_numbers(allow_nan=False, allow_infinity=False).filter(lambda z: z.imag != 0),
                 st.just(OBJ), st.just(float("nan")), st.just(b"1"))
BOOLS = st.booleans()


def real(low=None, high=None, low_open=False, none_ok=False, inf_ok=False):
    """Wrong values of a real parameter in ``[low, high]``: junk, booleans, out-of-range numbers,
    infinities (unless allowed) and ``None`` (unless allowed)."""
    out = [JUNK, BOOLS]
    if low is not None:
        below = st.floats(max_value=low, allow_nan=False, allow_infinity=False, exclude_max=not low_open)
        out.append(below.filter(lambda v: v < low or (low_open and v == low)))
    if high is not None:
        out.append(st.floats(min_value=high, allow_nan=False, allow_infinity=False, exclude_min=True))
    if not inf_ok:
        out.append(st.sampled_from([float("inf"), float("-inf")]))
    if not none_ok:
        out.append(st.none())
    return st.one_of(*out)


def integer(low=None, none_ok=False):
    out = [JUNK, BOOLS, st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: v != int(v))]
    if low is not None:
        out.append(st.integers(max_value=low - 1))
    if not none_ok:
        out.append(st.none())
    return st.one_of(*out)


def choice(valid):
    return st.one_of(st.text(max_size=6).filter(lambda s: s not in valid), st.integers(), st.none(), BOOLS,
                     st.just(OBJ))


def flag():
    return st.one_of(st.text(min_size=1, max_size=4), st.integers(), st.none(), st.floats(allow_nan=False),
                     st.just(OBJ))


def matrix(rows=None):
    """Wrong values of a 2-D float array: junk, 1-D and 3-D arrays, NaN/inf entries, complex ones."""
    def with_bad_entry(bad):
        return st.integers(2, 5).map(lambda n: np.where(np.eye(n, 2) > 0, bad, 1.0))
    return st.one_of(st.text(min_size=1, max_size=4), st.just(OBJ), st.none(),
                     st.integers(1, 5).map(lambda n: np.ones(n)), st.integers(1, 3).map(lambda n: np.ones((n, 2, 2))),
                     with_bad_entry(np.nan), with_bad_entry(np.inf),
                     st.integers(2, 5).map(lambda n: np.ones((n, 2)) + 1j))


def vector():
    return st.one_of(st.text(min_size=1, max_size=4), st.just(OBJ), st.none(),
                     st.integers(1, 3).map(lambda n: np.ones((n, 2))),
                     st.integers(1, 4).map(lambda n: np.r_[np.ones(n), np.nan]),
                     st.integers(1, 4).map(lambda n: np.ones(n) + 1j))


def _fed():
    return _small_regression()


def _cls_fed():
    return dm.datasets.synthetic_classification(n_clients=3, dim=3, samples=20, seed=0)


#: every public constructor: (callable, valid keyword arguments, {argument: (wrong values, names
#: the message may use for it)})
CONSTRUCTORS = {
    "Client": (dm.Client, lambda: {"X": np.ones((4, 2)), "y": np.ones(4)},
               {"X": (matrix(), ("X",)), "y": (vector(), ("y",))}),
    "Federation.from_arrays": (dm.Federation.from_arrays,
                               lambda: {"Xs": [np.ones((4, 2))], "ys": [np.ones(4)], "task": "regression"},
                               {"task": (choice(("regression", "classification")), ("task",))}),
    "VerticalFederation": (dm.VerticalFederation,
                           lambda: {"blocks": _vertical().blocks, "y": _vertical().y, "group": _vertical().group},
                           {"y": (vector(), ("y",)), "group": (vector(), ("group",))}),
    "Huber": (losses.Huber, lambda: {"eps": 1.0}, {"eps": (real(0.0, low_open=True), ("eps",))}),
    "EpsilonInsensitive": (losses.EpsilonInsensitive, lambda: {"eps": 0.1}, {"eps": (real(0.0), ("eps",))}),
    "Pinball": (losses.Pinball, lambda: {"tau": 0.5}, {"tau": (real(0.0, 1.0), ("tau",))}),
    "Simplex": (sets.Simplex, lambda: {"n": 3}, {"n": (integer(1), ("n",))}),
    "CVaR": (sets.CVaR, lambda: {"n": 3, "alpha": 0.5},
             {"n": (integer(1), ("n",)), "alpha": (real(1 / 3, 1.0), ("alpha",))}),
    "ChiSquare": (sets.ChiSquare, lambda: {"n": 3, "rho": 0.1},
                  {"n": (integer(1), ("n",)), "rho": (real(0.0), ("rho",))}),
    "LpBall": (sets.LpBall, lambda: {"center": np.full(3, 1 / 3), "radius": 0.1, "p": 2},
               {"center": (vector(), ("center",)), "radius": (real(0.0), ("radius",)),
                "p": (real(1.0, inf_ok=True), ("p",))}),
    "HCVaR": (sets.HCVaR, lambda: {"p": np.full(3, 1 / 3), "alpha": 0.5},
              {"p": (vector(), ("p",)), "alpha": (JUNK, ("alpha",))}),
    "QFFL": (sets.QFFL, lambda: {"n": 3, "q": 1.0},
             {"n": (integer(1), ("n",)), "q": (real(0.0, low_open=True), ("q",))}),
    "KLPenalty": (sets.KLPenalty, lambda: {"n": 3, "tau": 0.5},
                  {"n": (integer(1), ("n",)), "tau": (real(0.0, low_open=True), ("tau",))}),
    "FederatedDRO": (dm.FederatedDRO,
                     lambda: {"federation": _fed(), "loss": losses.Squared(), "weights": sets.Simplex(3), "l2": 0.1},
                     {"federation": (st.one_of(JUNK, st.none()), ("federation",)),
                      "loss": (st.one_of(JUNK, st.none()), ("loss",)),
                      "weights": (st.one_of(JUNK, st.none()), ("weights",)), "l2": (real(0.0), ("l2",))}),
    "FairnessAwareFL": (dm.FairnessAwareFL,
                        lambda: {"federation": _fed(), "loss": losses.Squared(), "alpha": 0.8, "l2": 0.1},
                        {"alpha": (st.one_of(JUNK, st.none(), BOOLS), ("alpha",)), "l2": (real(0.0), ("l2",)),
                         "alpha_below_p": (choice(("error", "clip")), ("alpha_below_p",))}),
    "WassersteinDRFL": (dm.WassersteinDRFL,
                        lambda: {"federation": _cls_fed(), "loss": losses.Logistic(), "radius": 0.1,
                                 "kappa": 1.0, "norm": 2, "weights": sets.Simplex(3), "l2": 0.0},
                        {"radius": (real(0.0), ("radius",)), "kappa": (real(0.0, low_open=True, inf_ok=True), ("kappa",)),
                         "norm": (st.one_of(JUNK, st.none(), st.sampled_from([0, 3, -1, 0.5])), ("norm",)),
                         "weights": (st.one_of(JUNK, st.none()), ("weights",)), "l2": (real(0.0), ("l2",))}),
    "RelativeFairness": (dm.RelativeFairness,
                         lambda: {"federation": _fed(), "loss": losses.Squared(), "A": sets.Simplex(3),
                                  "B": sets.Simplex(3), "phi": 0.1, "l2": 0.1},
                         {"A": (st.one_of(JUNK, st.none()), ("A",)), "B": (st.one_of(JUNK, st.none()), ("B",)),
                          "phi": (real(0.0, 1.0), ("phi",)), "l2": (real(0.0), ("l2",))}),
    "DEOConstrained": (dm.DEOConstrained,
                       lambda: {"vertical_federation": _vertical(), "loss": losses.Logistic(), "eps": 0.05, "l2": 0.1},
                       {"vertical_federation": (st.one_of(JUNK, st.none()), ("vertical_federation",)),
                        "eps": (real(0.0), ("eps",)), "l2": (real(0.0), ("l2",)),
                        "fairness_loss": (choice(("linear", "squared", "same")), ("fairness_loss",)),
                        "penalty_c": (real(0.0, low_open=True, none_ok=True), ("penalty_c",)),
                        "n_starts": (integer(0), ("n_starts",)),
                        "tolerance_convention": (choice(("deo", "donini")), ("tolerance_convention",))}),
    "ScaffPD": (solvers.ScaffPD, lambda: {"rounds": 5},
                {"rounds": (integer(1), ("rounds",)), "local_steps": (integer(1), ("local_steps",)),
                 "global_step": (real(0.0, low_open=True), ("global_step",)),
                 "control_variates": (flag(), ("control_variates",))}),
    "FedAvg": (solvers.FedAvg, lambda: {"rounds": 5},
               {"rounds": (integer(1), ("rounds",)), "local_steps": (integer(1), ("local_steps",))}),
}


def _assert_named(call, kwargs, arg, names):
    """``call(**kwargs)`` raises a one-line drflmodel error naming ``arg`` (one of ``names``)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call(**kwargs)
    except DrflmodelError as exc:
        text = _one_line(exc)
        assert any(name in text for name in names), f"{arg}: message does not name it: {text}"
    except Exception as exc:      # noqa: BLE001 - the point: nothing but a drflmodel error
        pytest.fail(f"{arg}={kwargs[arg]!r}: {type(exc).__name__}: {exc}")
    else:
        pytest.fail(f"{arg}={kwargs[arg]!r} was accepted")


@st.composite
def constructor_case(draw):
    name = draw(st.sampled_from(sorted(CONSTRUCTORS)))
    call, valid, bad = CONSTRUCTORS[name]
    arg = draw(st.sampled_from(sorted(bad)))
    values, names = bad[arg]
    return name, call, valid, arg, draw(values), names


@settings(max_examples=MAX_EXAMPLES * 2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=constructor_case())
def test_every_constructor_refuses_wrong_arguments_by_name(case):
    name, call, valid, arg, value, names = case
    kwargs = valid()
    kwargs[arg] = value
    _assert_named(call, kwargs, arg, names)


_PROBLEM = None


def _problem():
    global _PROBLEM
    if _PROBLEM is None:
        _PROBLEM = dm.FederatedDRO(_fed(), losses.Squared(), sets.ChiSquare(3, 0.1), l2=0.1)
    return _PROBLEM


SOLVE_ARGS = {
    "solver": (st.one_of(st.text(min_size=1, max_size=6).filter(lambda s: s.upper() not in
                                                                 ("CLARABEL", "ECOS", "SCS", "OSQP", "HIGHS")),
                         st.integers(), st.just(OBJ)), ("solver",)),
    "gap_tol": (real(0.0), ("gap_tol",)),
    "method": (choice(("auto", "conic", "newton")), ("method",)),
    "verbose": (flag(), ("verbose",)),
    "fallback": (flag(), ("fallback",)),
    "seed": (st.one_of(st.text(min_size=1, max_size=3), st.floats(allow_nan=False), st.just(OBJ)), ("seed",)),
    "max_iter": (st.one_of(JUNK, BOOLS, st.floats(allow_nan=False).filter(lambda v: v != int(v) if np.isfinite(v) else True)),
                 ("max_iter",)),
    "tol_feas": (st.one_of(JUNK.filter(lambda v: not isinstance(v, float)), BOOLS), ("tol_feas",)),
}


@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arg=st.sampled_from(sorted(SOLVE_ARGS)), data=st.data())
def test_solve_refuses_wrong_arguments_by_name(monkeypatch, arg, data):
    values, names = SOLVE_ARGS[arg]
    value = data.draw(values)
    kwargs = {"solver": "CLARABEL"} if arg in ("max_iter", "tol_feas") else {}
    kwargs[arg] = value
    with monkeypatch.context() as m:
        m.setattr("cvxpy.Problem.solve", lambda *a, **k: pytest.fail("a solver was called"))
        _assert_named(_problem().solve, kwargs, arg, names)


def _estimators():
    from drflmodel import sklearn as sk

    return {"FederatedDROClassifier": sk.FederatedDROClassifier, "FederatedDRORegressor": sk.FederatedDRORegressor,
            "FairnessAwareClassifier": sk.FairnessAwareClassifier, "WassersteinDRClassifier": sk.WassersteinDRClassifier,
            "WassersteinDRRegressor": sk.WassersteinDRRegressor, "RelativeFairRegressor": sk.RelativeFairRegressor,
            "DEOClassifier": sk.DEOClassifier}


ESTIMATOR_ARGS = {
    "fit_intercept": (flag(), ("fit_intercept",)),
    "l2": (real(0.0), ("l2",)),
    "gap_tol": (real(0.0), ("gap_tol",)),
    "loss": (st.one_of(JUNK, st.none(), st.integers()), ("loss",)),
    "solver": (st.one_of(st.integers(), st.just(OBJ), st.text(min_size=1, max_size=4).filter(
        lambda s: s.upper() not in ("ECOS", "SCS", "OSQP"))), ("solver",)),
    "solve_options": (st.one_of(st.text(min_size=1, max_size=4), st.integers(), st.just(OBJ)), ("solve_options",)),
}


@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(_estimators())), arg=st.sampled_from(sorted(ESTIMATOR_ARGS)), data=st.data())
def test_fit_refuses_wrong_parameters_by_name(monkeypatch, name, arg, data):
    values, names = ESTIMATOR_ARGS[arg]
    est = _estimators()[name]()
    est.set_params(**{arg: data.draw(values)})
    rng = np.random.default_rng(0)
    X = rng.standard_normal((16, 2))
    y = rng.standard_normal(16) if name.endswith("Regressor") else np.arange(16) % 2
    fit_kw = {"sensitive_features": np.arange(16) // 8} if name == "DEOClassifier" else {"clients": np.arange(16) % 2}
    with monkeypatch.context() as m:
        m.setattr("cvxpy.Problem.solve", lambda *a, **k: pytest.fail("a solver was called"))
        _assert_named(lambda **_: est.fit(X, y, **fit_kw), {arg: getattr(est, arg)}, arg, names)


CLI_BASE = {"data": {"source": '"synthetic_regression"', "options": "{ n_clients = 3, dim = 3, samples = 20, seed = 0 }"},
            "loss": {"name": '"squared"'},
            "problem": {"family": '"dro"', "options": "{ l2 = 0.1 }", "weights": '{ name = "simplex" }'}}
#: TOML fragments of the wrong type (or an unknown name) for each key
CLI_WRONG = {
    ("data", "source"): st.sampled_from(['3', '"mars"', "true", "[1]"]),
    ("data", "options"): st.sampled_from(['3', '"x"', "[1, 2]"]),
    ("loss", "name"): st.sampled_from(['"cauchy"', "1", "false", '["squared"]', '"Squared"']),
    ("loss", "options"): st.sampled_from(['"eps"', "2", "[0.5]"]),
    ("problem", "family"): st.sampled_from(['"gan"', "0", "{ name = \"dro\" }"]),
    ("problem", "options"): st.sampled_from(["0.1", '"l2"', "[0.1]"]),
    ("problem", "weights"): st.sampled_from(['"simplex"', "1", '{ name = "box" }', "{ name = 3 }"]),
}


@settings(max_examples=MAX_EXAMPLES // 2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(sorted(CLI_WRONG)), data=st.data())
def test_cli_refuses_wrong_config_values_by_name(tmp_path, key, data):
    table, name = key
    tables = {t: dict(v) for t, v in CLI_BASE.items()}
    tables[table][name] = data.draw(CLI_WRONG[key])
    text = "\n".join(f"[{t}]\n" + "\n".join(f"{k} = {v}" for k, v in kv.items()) for t, kv in tables.items())
    path = tmp_path / "cfg.toml"
    path.write_text(text)
    try:
        build_problem(load_config(path))
    except ConfigError as exc:
        assert f"{table}.{name}" in _one_line(exc), str(exc)
    except Exception as exc:      # noqa: BLE001
        pytest.fail(f"{table}.{name}: {type(exc).__name__}: {exc}")
    else:
        pytest.fail(f"{table}.{name} = {tables[table][name]} was accepted")
