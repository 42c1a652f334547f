"""Smoke tests of the figures: each plot function writes a non-empty PNG (matplotlib Agg)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from drflmodel import plots  # noqa: E402
from drflmodel.errors import InvalidParameterError  # noqa: E402
from drflmodel.solution import Solution  # noqa: E402
from drflmodel.verify import verify_iterates  # noqa: E402


class _Toy:
    family = "toy"

    def objective(self, theta):
        return float(np.sum(np.asarray(theta) ** 2))


def _report(factor):
    sol = Solution(theta=np.zeros(2), weights=None, client_losses=None, value=0.0, lower_bound=0.0,
                   upper_bound=0.0, status="optimal", certificate="closed form")
    thetas = np.outer(factor ** np.arange(30), [1.0, 0.0])
    return verify_iterates(_Toy(), sol, thetas, tol=1e-6)


def _is_png(path):
    data = path.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


def test_convergence_plot_of_several_solvers(tmp_path):
    path = tmp_path / "conv.png"
    plots.plot_convergence({"fast": _report(0.5), "slow": _report(0.9)}, path=path)
    assert _is_png(path)


def test_report_plot_method(tmp_path):
    path = tmp_path / "one.png"
    _report(0.7).plot(path)
    assert _is_png(path)


def test_lorenz_plot(tmp_path):
    path = tmp_path / "lorenz.png"
    plots.plot_lorenz({"ERM": [1.0, 2.0, 5.0], "AFL": [2.0, 2.5, 3.0]}, path=path)
    assert _is_png(path)


def test_sweep_plot_and_length_check(tmp_path):
    path = tmp_path / "sweep.png"
    plots.plot_sweep([0.0, 0.01, 0.02], {"objective": [1.0, 1.1, 1.2], "R": [4.0, 2.0, 1.0]}, path=path)
    assert _is_png(path)
    with pytest.raises(InvalidParameterError, match="series 'R'"):
        plots.plot_sweep([0.0, 0.01], {"R": [1.0, 2.0, 3.0]})


def test_convergence_plot_needs_reports():
    with pytest.raises(InvalidParameterError, match="reports"):
        plots.plot_convergence({})
