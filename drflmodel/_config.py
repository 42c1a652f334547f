"""TOML problem/solver configurations for ``drflmodel solve`` and ``drflmodel verify``.

A configuration has five tables ([solve] and [solver] optional); unknown or missing keys, wrong
types and missing files are errors naming the key and the expected type (one line each)::

    [data]                      # where the federation comes from
    source = "synthetic_regression"   # penguins | synthetic_regression | synthetic_classification
                                      # | breast_cancer | diabetes | adult | synthetic_vertical | npz
    options = { n_clients = 5, seed = 0 }   # keyword arguments of the dataset function
    path = "clients.npz"        # only for source = "npz": arrays X0, y0, X1, y1, ...
    task = "regression"         # npz (default "regression"); csv/parquet (default: the loss's task:
                                # "multiclass" for the multinomial loss)

    # source = "csv" or "parquet" (pandas; pyarrow for parquet): one table, one row per sample
    path = "clinics.csv"        # relative to the config file
    target = "outcome"          # label column (classification: exactly two classes -> -1/+1;
                                # multinomial loss: two or more classes -> 0..K-1, sorted)
    client = "site"             # horizontal families: the column naming each row's client
    features = ["age", "bmi"]   # optional, default every other column; string columns are
                                # one-hot encoded (recorded in the solution's info["data"])
    group = "sex"               # family = "deo" instead of client: the protected-group column
    parties = [["age"], ["bmi", "smoker"]]   # family = "deo": the columns of each party
    active = [0]                # family = "deo": active parties (default [0])
    add_intercept = true        # prepend the constant column (default false)
    standardize = true          # divide numeric features by their sd (and centre them when
                                # add_intercept): well-conditioned steps; the scaling and the
                                # coefficients in the file's units go to the solution's info["data"]
    pos_label = "yes"           # optional: the class mapped to +1 (default the larger class)

    [loss]
    name = "squared"            # squared | huber | epsilon_insensitive | pinball | hinge | smooth_hinge | logistic
                                # | multinomial
    options = {}                # e.g. { eps = 0.5 }

    [problem]
    family = "dro"              # dro | fafl | wasserstein | relative | deo (drflmodel.problems.registry)
    options = { l2 = 0.1 }      # keyword arguments of the problem class
    weights = { name = "chi_square", rho = 0.1 }   # dro / wasserstein weight set; relative uses A and B

    [solve]                     # optional: how the problem is solved (Problem.solve's arguments)
    method = "auto"             # auto | a route of the family (e.g. "sqp", "conic", "level_bundle")
    solver = "CLARABEL"         # the CVXPY solver to try first (an installed one)
    gap_tol = 1e-6              # relative certificate gap below which the status is "optimal"
    options = { max_steps = 200 }   # the route's own options (e.g. relative's time_limit)

    [solver]                    # optional; needed by `drflmodel verify`
    name = "ScaffPD"
    options = { rounds = 300 }
    seed = 0
    tol = 1e-6                  # on the report's error metric (the squared distance ||theta - theta*||^2
                                # when the optimum is unique, else the relative objective gap)
    verdict = "tol"             # tol: the final error meets tol | rate: the error falls at least
    rate_margin = 0.25          #   (1 - rate_margin) times as fast as the theory's bound
    engine = "simulator"        # simulator | flower (Flower's simulation engine, Ray)
                                # | flower-inprocess (the same Flower apps on an in-process Grid)

Every error names the key it is about (``'problem.weights.alpha'``, ``'data.features'``, ...).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InvalidParameterError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["ConfigError", "load_config", "build_federation", "build_problem", "build_solver", "solve_arguments",
           "SCHEMA", "ENGINES", "KEY_HELP", "FAMILY_CLASSES", "FAMILIES", "WEIGHT_SETS"]


class ConfigError(InvalidParameterError):
    """A configuration file that cannot be used (the message is one line naming the key)."""


DATA_SOURCES = ("penguins", "synthetic_regression", "synthetic_classification", "breast_cancer",
                "diabetes", "adult", "synthetic_vertical", "npz", "csv", "parquet")
#: [data] keys of the table sources (csv, parquet) only
TABLE_KEYS = ("target", "client", "features", "group", "parties", "active", "add_intercept", "standardize",
              "pos_label")


def __getattr__(name: str):
    """The family and weight-set names, read from their one home when asked (so a family added to
    the registry is seen here): ``FAMILY_CLASSES`` (family -> class name), ``FAMILIES`` (the
    names), ``WEIGHT_SETS`` (weight-set name -> class name of drflmodel.sets)."""
    if name == "FAMILY_CLASSES":
        return {f.name: f.cls for f in _families().values()}
    if name == "FAMILIES":
        return tuple(_families())
    if name == "WEIGHT_SETS":
        from .sets import WEIGHT_SET_NAMES

        return dict(WEIGHT_SET_NAMES)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _families() -> dict:
    from .problems.registry import FAMILIES as registered

    return registered

#: where ``drflmodel verify`` runs the [solver]: drflmodel's simulator, or Flower (drflmodel.flower)
ENGINES = ("simulator", "flower", "flower-inprocess")
#: what ``drflmodel verify`` judges (:func:`drflmodel.verify`'s ``verdict``)
VERDICTS = ("tol", "rate")
#: the [data] key each column role of a table error concerns
_ROLE_KEYS = {"target": "data.target", "client": "data.client", "feature": "data.features",
              "group": "data.group"}

#: allowed keys and their types per table
SCHEMA: dict[str, dict[str, tuple]] = {
    "data": {"source": (str,), "options": (dict,), "path": (str,), "task": (str,),
             "target": (str,), "client": (str,), "features": (list,), "group": (str,), "parties": (list,),
             "active": (int, list), "add_intercept": (bool,), "standardize": (bool,),
             "pos_label": (str, int, float)},
    "loss": {"name": (str,), "options": (dict,)},
    "problem": {"family": (str,), "options": (dict,), "weights": (dict,), "A": (dict,), "B": (dict,)},
    "solve": {"method": (str,), "solver": (str,), "gap_tol": (float, int), "options": (dict,)},
    "solver": {"name": (str,), "options": (dict,), "seed": (int,), "tol": (float, int),
               "expected_rate": (str,), "engine": (str,), "verdict": (str,), "rate_margin": (float, int)},
}
_REQUIRED = {"data": ("source",), "loss": ("name",), "problem": ("family",), "solve": (), "solver": ("name",)}
#: what each key means and its default; the configuration reference of the documentation is generated
#: from SCHEMA, this table, the tuples above and the signatures of the functions and classes they name
KEY_HELP: dict[str, dict[str, str]] = {
    "data": {
        "source": "where the federation comes from: a built-in data set (a function of drflmodel.datasets), "
                  "an npz file of per-client arrays, or one csv/parquet table",
        "options": "keyword arguments of the data-set function (built-in sources only)",
        "path": "the npz, csv or parquet file, relative to the configuration file (required for those sources)",
        "task": "\"regression\", \"classification\" or \"multiclass\"; npz default \"regression\", "
                "csv/parquet default: the loss's task (\"multiclass\" for the multinomial loss)",
        "target": "csv/parquet: the label column (classification: exactly two classes, mapped to -1/+1; "
                  "multiclass: two or more classes, mapped to 0..K-1 in sorted order, as scikit-learn "
                  "orders classes)",
        "client": "csv/parquet, horizontal families: the column naming each row's client (one client per "
                  "value, in sorted order)",
        "features": "csv/parquet, horizontal families: the feature columns (default every other column; "
                    "string columns are one-hot encoded)",
        "group": "csv/parquet, family \"deo\": the protected-group column",
        "parties": "csv/parquet, family \"deo\": the columns of each party, e.g. [[\"age\"], [\"bmi\"]]",
        "active": "csv/parquet, family \"deo\": the active parties (default [0])",
        "add_intercept": "csv/parquet: prepend the constant column (default false)",
        "standardize": "csv/parquet, horizontal families: divide the numeric feature columns by their standard "
                       "deviation, centring them when add_intercept (default false); the scaling and theta in "
                       "the file's units go to the solution's info[\"data\"]",
        "pos_label": "csv/parquet, classification: the class mapped to +1 (default the larger class)",
    },
    "loss": {
        "name": "the loss (drflmodel.losses)",
        "options": "keyword arguments of the loss class, e.g. { eps = 0.5 }",
    },
    "problem": {
        "family": "the formulation family",
        "options": "keyword arguments of the family's class (e.g. l2, alpha, radius, eps)",
        "weights": "families dro and wasserstein: the client-weight set, { name = ..., <its options> } "
                   "(default simplex)",
        "A": "family relative: the first weight set of the integrated set (default simplex)",
        "B": "family relative: the second weight set of the integrated set (default simplex)",
    },
    "solve": {
        "method": "\"auto\" (default: the first of the family's routes that applies) or the name of one of "
                  "the family's routes (Problem.solve's method; the error lists the family's routes)",
        "solver": "the CVXPY solver to try first, case-insensitive; an installed one (default: the "
                  "documented order, Clarabel first)",
        "gap_tol": "relative certificate gap below which the status is \"optimal\", > 0 (default 1e-6)",
        "options": "the route's own options (e.g. { max_steps = 200 }; relative's branch and bound takes "
                   "time_limit in seconds), or the first solver's settings for a conic route",
    },
    "solver": {
        "name": "the distributed solver (drflmodel.solvers); required by drflmodel verify",
        "options": "keyword arguments of the solver class, e.g. { rounds = 300 }",
        "seed": "seed of the solver's random choices (default 0)",
        "tol": "verification tolerance on the report's error metric: the squared distance to the certified "
               "optimum when it is unique, else the relative objective gap (default 1e-6)",
        "expected_rate": "the rate kind the fit expects: \"auto\" (the solver's paper, default), \"linear\" "
                         "or \"sublinear\"",
        "verdict": "\"tol\" (default): the final error meets tol; \"rate\": the error falls at least "
                   "(1 - rate_margin) times as fast as the theory's bound for the run",
        "rate_margin": "the margin of verdict = \"rate\", in [0, 1) (default 0.25)",
        "engine": "where drflmodel verify runs the solver (default \"simulator\")",
    },
}
_TYPE_NAMES = {str: "string", dict: "table", int: "integer", float: "number", list: "array",
               bool: "boolean"}


def _check_table(cfg: dict, table: str, required: bool) -> dict:
    if table not in cfg:
        if required:
            raise ConfigError(f"missing table [{table}]")
        return {}
    section = cfg[table]
    if not isinstance(section, dict):
        raise ConfigError(f"[{table}] must be a table")
    for key, value in section.items():
        if key not in SCHEMA[table]:
            raise ConfigError(f"unknown key '{table}.{key}' (allowed: {', '.join(sorted(SCHEMA[table]))})")
        types = SCHEMA[table][key]
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            expected = " or ".join(_TYPE_NAMES[t] for t in types)
            raise ConfigError(f"'{table}.{key}' must be a {expected}; got {type(value).__name__} {value!r}")
    for key in _REQUIRED[table]:
        if key not in section:
            raise ConfigError(f"missing key '{table}.{key}'")
    return section


def load_config(path, need_solver: bool = False) -> dict:
    """Read and validate a TOML configuration; return the dict of tables."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}")
    try:
        cfg = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from None
    for table in cfg:
        if table not in SCHEMA:
            raise ConfigError(f"unknown table [{table}] (allowed: {', '.join(SCHEMA)})")
    out = {t: _check_table(cfg, t, required=(t not in ("solve", "solver") or (t == "solver" and need_solver)))
           for t in SCHEMA}
    if out["data"]["source"] not in DATA_SOURCES:
        raise ConfigError(f"'data.source' must be one of {', '.join(DATA_SOURCES)}; got {out['data']['source']!r}")
    if out["problem"]["family"] not in _families():
        raise ConfigError(f"'problem.family' must be one of {', '.join(_families())}; got {out['problem']['family']!r}")
    _check_problem_keys(out["problem"])
    gap_tol = out["solve"].get("gap_tol", 1e-6)
    if not (np.isfinite(gap_tol) and gap_tol > 0):
        raise ConfigError(f"'solve.gap_tol' must be a positive number; got {gap_tol!r}")
    _check_loss_name(out["loss"]["name"])     # before any data is read: the task comes from the loss
    if out["solver"].get("engine", "simulator") not in ENGINES:
        raise ConfigError(f"'solver.engine' must be one of {', '.join(ENGINES)}; got {out['solver']['engine']!r}")
    if out["solver"].get("verdict", "tol") not in VERDICTS:
        raise ConfigError(f"'solver.verdict' must be one of {', '.join(VERDICTS)}; got {out['solver']['verdict']!r}")
    if out["solver"].get("expected_rate", "auto") not in ("auto", "linear", "sublinear"):
        raise ConfigError("'solver.expected_rate' must be one of auto, linear, sublinear; got "
                          f"{out['solver']['expected_rate']!r}")
    margin = out["solver"].get("rate_margin", 0.25)
    if not 0.0 <= margin < 1.0:
        raise ConfigError(f"'solver.rate_margin' must lie in [0, 1); got {margin!r}")
    if "tol" in out["solver"] and not out["solver"]["tol"] > 0:
        raise ConfigError(f"'solver.tol' must be positive; got {out['solver']['tol']!r}")
    _check_table_keys(out["data"], out["problem"]["family"])
    if out["data"]["source"] in ("npz", "csv", "parquet"):
        if "path" not in out["data"]:
            raise ConfigError(f"missing key 'data.path' (required when data.source = "
                              f"\"{out['data']['source']}\")")
        data_path = Path(out["data"]["path"])
        if not data_path.is_absolute():
            data_path = p.parent / data_path
        if not data_path.is_file():
            raise ConfigError(f"'data.path': file not found: {data_path}")
        out["data"]["path"] = str(data_path)
    return out


def _check_problem_keys(problem: dict) -> None:
    """The weight-set keys of ``[problem]`` are those the family declares (its registry entry)."""
    entry = _families()[problem["family"]]
    for key in ("weights", "A", "B"):
        if key in problem and key not in entry.weight_keys:
            uses = (f"its weight-set keys are {', '.join(entry.weight_keys)}" if entry.weight_keys
                    else "it takes no weight set")
            raise ConfigError(f"'problem.{key}' is not used with family = \"{entry.name}\" ({uses})")


def _check_loss_name(name: str) -> None:
    from .losses import ALL_LOSSES

    if name not in ALL_LOSSES:
        raise ConfigError(f"'loss.name' must be one of {', '.join(ALL_LOSSES)}; got {name!r}")


def _check_table_keys(data: dict, family: str) -> None:
    """The csv/parquet keys: present only for those sources; ``client`` for the horizontal
    families, ``group`` + ``parties`` for ``deo``."""
    source = data["source"]
    used = [k for k in TABLE_KEYS if k in data]
    if source not in ("csv", "parquet"):
        if used:
            raise ConfigError(f"'data.{used[0]}' is used only with data.source = \"csv\" or \"parquet\"")
        return
    if "options" in data:
        raise ConfigError(f"'data.options' is not used with data.source = \"{source}\" (use target, "
                          "client/group, features)")
    if "target" not in data:
        raise ConfigError(f"missing key 'data.target' (required when data.source = \"{source}\")")
    if _families()[family].vertical:
        for key in ("group", "parties"):
            if key not in data:
                raise ConfigError(f"missing key 'data.{key}' (required for family = \"{family}\" with a table source)")
        wrong = [k for k in ("client", "features", "task") if k in data]
        if wrong:
            raise ConfigError(f"'data.{wrong[0]}' is not used with family = \"{family}\" (use group and parties)")
        if not all(isinstance(p, list) and all(isinstance(c, str) for c in p) for p in data["parties"]):
            raise ConfigError("'data.parties' must be an array of arrays of column names")
    else:
        if "client" not in data:
            raise ConfigError(f"missing key 'data.client' (required for family = \"{family}\" with a table source)")
        wrong = [k for k in ("group", "parties", "active") if k in data]
        if wrong:
            vertical = " or ".join(f'"{f.name}"' for f in _families().values() if f.vertical)
            raise ConfigError(f"'data.{wrong[0]}' is used only with family = {vertical}")
        if "features" in data and not all(isinstance(c, str) for c in data["features"]):
            raise ConfigError("'data.features' must be an array of column names")


def _table_federation(data: dict, family: str, loss_task: str):
    """A Federation / VerticalFederation read from a csv or parquet file (:mod:`._tabular`)."""
    from ._tabular import read_table
    from .data import Federation, VerticalFederation
    from .errors import InvalidDataError

    try:
        df = read_table(data["path"], data["source"])
    except (InvalidDataError, InvalidParameterError) as exc:
        raise ConfigError(f"'data.path': {exc}") from None
    common = {"target": data["target"], "pos_label": data.get("pos_label"),
              "add_intercept": data.get("add_intercept", False)}
    try:
        if _families()[family].vertical:
            if data.get("standardize"):
                raise ConfigError(f"'data.standardize' is not used with family = \"{family}\" (the parties "
                                  "hold the columns)")
            fed = VerticalFederation.from_dataframe(df, group=data["group"], parties=data["parties"],
                                                    active=data.get("active", [0]), **common)
        else:
            fed = Federation.from_dataframe(df, client=data["client"], features=data.get("features"),
                                            task=data.get("task", loss_task),
                                            standardize=data.get("standardize", False), **common)
    except (InvalidDataError, InvalidParameterError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{_table_key(exc)}: {exc}") from None
    fed.table_info = {"source": data["source"], "path": data["path"], **fed.table_info}
    return fed


def _table_key(exc) -> str:
    """The [data] key a table error concerns (its column role; the file otherwise)."""
    role = getattr(exc, "role", "table")
    if role.startswith("party"):
        return "'data.parties'"
    key = _ROLE_KEYS.get(role)
    if key is None and str(exc).startswith("pos_label"):
        key = "data.pos_label"
    return f"'{key or 'data.path'}'"


def _keyed(exc, table_key: str, options: dict) -> ConfigError:
    """A ConfigError naming the TOML key of an argument error: ``'problem.weights.alpha': ...``
    when the message is about one of the table's ``options`` (it starts with the argument's
    name), else ``'problem.weights': ...``."""
    text = str(exc)
    name = text.split(" ", 1)[0].split("[", 1)[0].rstrip(":")
    key = f"{table_key}.{name}" if name in options else table_key
    return ConfigError(f"'{key}': {text}")


def _loss_task(name: str) -> str:
    from .losses import ALL_LOSSES

    return getattr(ALL_LOSSES.get(name), "task", "regression")


def data_info(problem) -> dict | None:
    """What a table source did to the data (columns, one-hot encodings, label map), for the
    solution's ``info["data"]``; ``None`` for the other sources."""
    fed = problem.federation
    info = getattr(fed, "table_info", None)
    return None if info is None else {**info, "feature_names": fed.feature_names}


def file_units(problem, theta) -> list | None:
    """``theta`` in the data file's units when ``[data] standardize = true`` (else ``None``)."""
    fed = problem.federation
    if not (getattr(fed, "table_info", None) or {}).get("standardized") or theta is None:
        return None
    return fed.theta_in_file_units(theta).tolist()


# --------------------------------------------------------------------------- builders
def _federation(data: dict, family: str = "dro", loss_task: str = "regression"):
    from . import datasets
    from .data import Federation
    from .errors import InvalidDataError

    source, options = data["source"], dict(data.get("options", {}))
    if source in ("csv", "parquet"):
        return _table_federation(data, family, loss_task)
    if source == "npz":
        arrays = np.load(data["path"])
        k = 0
        Xs, ys = [], []
        while f"X{k}" in arrays:
            if f"y{k}" not in arrays:
                raise ConfigError(f"'data.path': array y{k} missing for X{k}")
            Xs.append(arrays[f"X{k}"])
            ys.append(arrays[f"y{k}"])
            k += 1
        if not Xs:
            raise ConfigError("'data.path': the npz file must contain arrays X0, y0, X1, y1, ...")
        try:
            return Federation.from_arrays(Xs, ys, task=data.get("task", "regression"))
        except (InvalidParameterError, InvalidDataError) as exc:
            raise ConfigError(f"'{'data.task' if str(exc).startswith('task') else 'data.path'}': {exc}") from None
    fn = getattr(datasets, source)
    _check_keys(fn, options, "data.options", f"source = \"{source}\"")
    try:
        return fn(**options)
    except (InvalidParameterError, InvalidDataError) as exc:
        raise _keyed(exc, "data.options", options) from None


def _check_keys(fn, options: dict, key: str, what: str, skip: int = 0, ignore=()) -> None:
    """The keys of an ``options`` table are keyword parameters of ``fn`` (after its first ``skip``
    and except ``ignore``, which the configuration fills), and every required one is given:
    otherwise a ConfigError naming the TOML key -- not Python's ``__init__() got an unexpected
    keyword argument``."""
    import inspect

    params = [p for p in list(inspect.signature(fn).parameters.values())[skip:]
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in ignore]
    if any(p.kind == p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values()):
        return                                   # **kwargs: the callee checks its own keywords
    allowed = [p.name for p in params]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(f"unknown key '{key}.{unknown[0]}' for {what} (allowed: {', '.join(allowed) or 'none'})")
    missing = [p.name for p in params if p.default is p.empty and p.name not in options]
    if missing:
        raise ConfigError(f"missing key '{key}.{missing[0]}' (required by {what})")


def _weight_set(spec: dict, n: int, fed, key: str, allowed=None):
    """The weight set of a ``{ name = ..., <options> }`` table at ``key``; ``allowed``: the names the
    family accepts (default every one of :data:`drflmodel.sets.WEIGHT_SET_NAMES`)."""
    from . import sets
    from .errors import InvalidDataError

    spec = dict(spec)
    name = spec_name = spec.pop("name", None)
    allowed = tuple(sets.WEIGHT_SET_NAMES) if allowed is None else tuple(allowed)
    if not isinstance(name, str):
        raise ConfigError(f"'{key}.name' must be a string")
    try:
        name = sets.canonical_name(name, f"{key}.name")        # a former name warns
    except InvalidParameterError:
        name = None
    if name not in allowed:
        raise ConfigError(f"'{key}.name' must be one of {', '.join(allowed)}; got {spec_name!r}")
    unknown, missing = sets.option_mismatch(name, spec)
    if unknown:
        raise ConfigError(f"unknown key '{key}.{unknown}' for name = \"{name}\" (allowed: "
                          f"{', '.join(['name', *sum(sets.options_of(name), ())])})")
    if missing:
        raise ConfigError(f"missing key '{key}.{missing}' (required by name = \"{name}\")")
    try:
        return sets.from_name(name, n, fed.proportions, what=f"{key}.name", **spec)
    except (InvalidParameterError, InvalidDataError) as exc:
        raise _keyed(exc, key, spec) from None


def build_federation(cfg: dict):
    """The federation of a validated configuration's ``[data]`` section (its ``[problem]`` family
    decides horizontal or vertical, its ``[loss]`` the task) -- what a client process needs."""
    return _federation(cfg["data"], cfg["problem"]["family"], _loss_task(cfg["loss"]["name"]))


def build_problem(cfg: dict):
    """The drflmodel Problem described by a validated configuration: the class of the family's
    registry entry, its weight-set keys built from their tables (default ``simplex``), the
    ``problem.options`` as keyword arguments."""
    from . import losses
    from .errors import InvalidDataError

    fed = build_federation(cfg)
    loss_options = cfg["loss"].get("options", {})
    _check_keys(losses.ALL_LOSSES[cfg["loss"]["name"]], loss_options, "loss.options",
                f"name = \"{cfg['loss']['name']}\"")
    try:
        loss = losses.get(cfg["loss"]["name"], **loss_options)
    except (InvalidParameterError, InvalidDataError) as exc:
        if str(exc).startswith(("loss", "unknown")):
            raise ConfigError(f"'loss.name': {exc}") from None
        raise _keyed(exc, "loss.options", loss_options) from None
    prob = cfg["problem"]
    entry = _families()[prob["family"]]
    options = dict(prob.get("options", {}))
    cls = entry.load()
    _check_keys(cls, options, "problem.options", f"family = \"{entry.name}\"", skip=2,
                ignore=entry.weight_keys)
    n = getattr(fed, "n_clients", None)
    weights = {k: _weight_set(prob.get(k, {"name": "simplex"}), n, fed, f"problem.{k}", entry.weight_set_names())
               for k in entry.weight_keys}
    try:
        return cls(fed, loss, **weights, **options)
    except (InvalidParameterError, InvalidDataError) as exc:
        raise _keyed(exc, "problem.options", options) from None


def solve_arguments(cfg: dict, problem, method=None, solver=None, gap_tol=None) -> dict:
    """The keyword arguments of ``problem.solve`` from the ``[solve]`` table, each overridden by
    the command line's value when that is not ``None``; checked here, before any solve, with
    errors naming the TOML key and the allowed values (the family's routes, the installed
    solvers)."""
    from ._solver_sequence import check_solver

    table = cfg.get("solve", {})
    flags = {"method": method, "solver": solver, "gap_tol": gap_tol}

    def name(key):        # the key an error names: the flag when the command line set it
        return f"'--{key.replace('_', '-')}' (solve.{key})" if flags[key] is not None else f"'solve.{key}'"

    method = table.get("method", "auto") if method is None else method
    solver = table.get("solver") if solver is None else solver
    gap_tol = table.get("gap_tol", 1e-6) if gap_tol is None else gap_tol
    from .problems.engine.route import method_name

    routes = [r.name for r in problem.routes()]
    method = method_name(problem.routes(), method)
    if method != "auto" and method not in routes:
        raise ConfigError(f"{name('method')} must be one of auto, {', '.join(routes)} (the routes of family = "
                          f"\"{problem.family}\"); got {method!r}")
    try:
        solver = check_solver(solver)
    except InvalidParameterError as exc:
        raise ConfigError(f"{name('solver')}: {exc}") from None
    if isinstance(gap_tol, bool) or not isinstance(gap_tol, (int, float)) or not (np.isfinite(gap_tol) and gap_tol > 0):
        raise ConfigError(f"{name('gap_tol')} must be a positive number; got {gap_tol!r}")
    return {"method": method, "solver": solver, "gap_tol": float(gap_tol), **dict(table.get("options", {}))}


def solve(cfg: dict, problem, **overrides):
    """``problem.solve`` with :func:`solve_arguments`; the route's refusal of an option names
    ``solve.options``."""
    kwargs = solve_arguments(cfg, problem, **overrides)
    options = cfg.get("solve", {}).get("options", {})
    try:
        return problem.solve(**kwargs)
    except InvalidParameterError as exc:
        if any(f"'{key}'" in str(exc) for key in options):       # the route refused one of them
            raise ConfigError(f"'solve.options': {exc}") from None
        raise


def build_solver(cfg: dict):
    """The distributed solver described by the ``[solver]`` table."""
    from . import solvers

    spec = cfg["solver"]
    name = spec["name"]
    available = [s for s in getattr(solvers, "__all__", []) if s[0].isupper()]
    if not hasattr(solvers, name) or name not in available:
        raise ConfigError(f"'solver.name' must be one of {', '.join(sorted(available))}; got {name!r}")
    options = spec.get("options", {})
    _check_keys(getattr(solvers, name), options, "solver.options", f"name = \"{name}\"")
    try:
        return getattr(solvers, name)(**options)
    except InvalidParameterError as exc:
        raise _keyed(exc, "solver.options", options) from None


def describe(cfg: dict) -> dict[str, Any]:
    """A JSON-safe echo of the configuration (for result files)."""
    return {k: v for k, v in cfg.items() if v}
