"""Bad inputs of issue 43's list refused by name -- the argument and what is allowed -- before any
work starts (no solve, no process, no partition loaded): ``instances.certify``,
``Federation.from_partitions``, ``client_oracle.federated_solve``, ``flower.LocalDeployment`` and
``flower.run_app``."""

from __future__ import annotations

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.errors import InvalidDataError, InvalidParameterError


@pytest.fixture(scope="module")
def tiny():
    return dm.instances.fedprox_synthetic(0.0, 0.0, seed=2, n_devices=3, dim=4, n_classes=3)


def _no_solve(monkeypatch):
    """Any solve, partition load or process start fails the test: the refusal comes first."""
    def boom(*args, **kwargs):
        raise AssertionError("work started before the bad input was refused")
    monkeypatch.setattr(dm.instances.Instance, "problem", boom)


def _rows(n):
    datasets = pytest.importorskip("datasets")
    import pandas as pd

    return datasets.Dataset.from_pandas(pd.DataFrame({"a": np.arange(float(n)), "y": [0, 1] * (n // 2) + [0] * (n % 2)}))


def _partitioner(n_partitions, rows=None):
    pytest.importorskip("flwr_datasets")
    from flwr_datasets.partitioner import IidPartitioner

    part = IidPartitioner(num_partitions=n_partitions)
    if rows is not None:
        part.dataset = _rows(rows)
    return part


def _certify(**kw):
    return lambda inst: dm.instances.certify(inst, cache=False, **kw)


def _from_partitions(part, **kw):
    return lambda inst: dm.Federation.from_partitions(part(), "y", **kw)


def _federated_solve(inst):
    from drflmodel.client_oracle import federated_solve

    return federated_solve(inst.problem("erm"), "channel")


def _deployment(**kw):
    def make(inst):
        pytest.importorskip("flwr")
        from drflmodel.flower import LocalDeployment

        return LocalDeployment(2, **kw)
    return make


def _file(tmp):
    path = tmp / "not-a-dir"
    path.write_text("x")
    return path


CASES = {
    "certify families='ermx'": (_certify(families="ermx"), InvalidParameterError,
                                r"families: each family must be one of \('erm', 'afl', 'qffl'\).*got 'ermx'"),
    "certify unknown family after a good one": (_certify(families=["erm", "ermx"]), InvalidParameterError,
                                                r"families: each family must be one of .*got 'ermx'"),
    "certify q not a number": (_certify(families=[("qffl", "abc")]), InvalidParameterError,
                               r"q of \('qffl', q\) must be a real number"),
    "certify gap_tol=0": (_certify(gap_tol=0), InvalidParameterError, r"gap_tol must lie in \[1e-10, 0.1\]; got 0"),
    "certify gap_tol=nan": (_certify(gap_tol=float("nan")), InvalidParameterError, "gap_tol must be finite"),
    "from_partitions take returns a list": (
        _from_partitions(lambda: _partitioner(2, rows=6), take=lambda p: list(p)), InvalidParameterError,
        r"take must return a partition .* for partition 0 it returned a list"),
    "from_partitions more partitions than rows": (
        _from_partitions(lambda: _partitioner(8, rows=5)), InvalidDataError,
        r"source: 8 partitions of a 5-row dataset leave at least 3 partition\(s\) with no rows "
        r"\(an IidPartitioner: partitions 5 to 7\); use at most 5 partitions"),
    "from_partitions partitioner without a dataset": (
        _from_partitions(lambda: _partitioner(3)), InvalidParameterError,
        "source: the IidPartitioner has no dataset assigned"),
    "federated_solve channel a string": (_federated_solve, InvalidParameterError,
                                         r"channel must be a drflmodel.client_oracle.Channel .*got str"),
    "LocalDeployment start_timeout=-1": (_deployment(start_timeout=-1), InvalidParameterError,
                                         r"start_timeout must be a number of seconds in \(0, 3600\]; got -1"),
    "LocalDeployment start_timeout=nan": (_deployment(start_timeout=float("nan")), InvalidParameterError,
                                          r"start_timeout must be a number of seconds in \(0, 3600\]; got nan"),
    "LocalDeployment start_timeout='soon'": (_deployment(start_timeout="soon"), InvalidParameterError,
                                             r"start_timeout must be a number of seconds in \(0, 3600\]; got 'soon'"),
    "LocalDeployment workdir=5": (_deployment(workdir=5), InvalidParameterError,
                                  r"workdir must be a directory path \(str or Path\) or None .*got int 5"),
}


@pytest.mark.parametrize("name", [*CASES, "LocalDeployment workdir a file", "run_app seed='x'",
                                  "run_app app_dir not an app"])
def test_a_bad_input_is_refused_by_name_before_any_work(name, tiny, tmp_path, monkeypatch):
    if name == "LocalDeployment workdir a file":
        call, error, match = (_deployment(workdir=_file(tmp_path)), InvalidParameterError,
                              r"workdir must be a directory \(existing or to be made\); .*not-a-dir is a file")
    elif name.startswith("run_app"):
        pytest.importorskip("flwr")
        from pathlib import Path

        from drflmodel.flower import run_app

        app = Path(__file__).resolve().parents[1] / "examples" / "flower_sklearn"
        if name == "run_app seed='x'":
            call, error, match = (lambda inst: run_app(app, 3, seed="x")), InvalidParameterError, \
                "seed must be an integer; got 'x'"
        else:
            call, error, match = (lambda inst: run_app(tmp_path, 3)), InvalidParameterError, \
                r"app_dir must be a Flower App directory \(holding a pyproject.toml\)"
    else:
        call, error, match = CASES[name]
    inst = tiny
    if name.startswith("certify"):
        _no_solve(monkeypatch)
    with pytest.raises(error, match=match):
        call(inst)
    if name.startswith("LocalDeployment"):
        assert not any(p.name.startswith("drflmodel-flower-") for p in tmp_path.iterdir())


def test_a_single_family_name_is_one_family_and_progress_names_it(tiny, capsys):
    """families="erm" is the family "erm" (it was read as the characters 'e', 'r', 'm'); with
    progress each family's start and end are one line on stderr (nothing on stdout), none without."""
    out = dm.instances.certify(tiny, families="erm", cache=False, progress=True)
    assert list(out.results) == ["erm"] and out.results["erm"].status == "optimal"
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert captured.out == "" and len(lines) == 2, captured
    assert lines[0].startswith(f"certify {tiny.name}: erm (1 of 1; 3 clients,")
    assert lines[1].startswith(f"certify {tiny.name}: erm optimal in ")
    dm.instances.certify(tiny, families="erm", cache=False, progress=False)
    assert capsys.readouterr().err == ""
