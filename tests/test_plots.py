"""Smoke tests of the figures: each plot function writes a non-empty PNG (matplotlib Agg)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import drflmodel as dm  # noqa: E402
from drflmodel import plots  # noqa: E402
from drflmodel.errors import InvalidParameterError  # noqa: E402
from drflmodel.solution import Solution  # noqa: E402
from drflmodel.verification import verify_iterates  # noqa: E402


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


def _legend_clear_of_every_axes(fig):
    """True when no legend of ``fig`` overlaps the plotting area of any of its axes."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [ax.get_window_extent(renderer) for ax in fig.axes]
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert legends
    return all(not leg.get_window_extent(renderer).overlaps(box) for leg in legends for box in boxes)


def test_lorenz_legend_never_covers_the_curves():
    ax = plots.plot_lorenz({"ERM": [1.0, 2.0, 5.0], "AFL": [2.0, 2.5, 3.0],
                            "a model with a long descriptive label": [1.0, 1.5, 2.0]})
    assert _legend_clear_of_every_axes(ax.figure)
    assert [ln.get_label() for ln in ax.get_lines()] == ["ERM", "AFL", "a model with a long descriptive label",
                                                       "equality"]


def test_lorenz_panels_one_figure_one_panel_per_group(tmp_path):
    path = tmp_path / "family.png"
    panels = {"data A": {"ERM": [1.0, 2.0, 5.0], "AFL": [2.0, 2.5, 3.0], "FAFL": [1.5, 2.5, 4.0]},
              "data B": {"DRO": [0.5, 1.0]}}
    plots.plot_lorenz_panels(panels, path=path, title="family", units="sensitive groups")
    assert _is_png(path)
    axes = plots.plot_lorenz_panels(panels, title="family", units="sensitive groups")
    assert [ax.get_title() for ax in axes] == ["data A", "data B"]
    assert [[ln.get_label() for ln in ax.get_lines() if ln.get_label() != "equality"] for ax in axes] == \
        [["ERM", "AFL", "FAFL"], ["DRO"]]
    assert "sensitive groups" in axes[0].get_xlabel()
    assert _legend_clear_of_every_axes(axes[0].figure)
    with pytest.raises(InvalidParameterError, match="panels"):
        plots.plot_lorenz_panels({})


def test_convergence_legend_beside_the_axes():
    ax = plots.plot_convergence({"fast": _report(0.5), "slow": _report(0.9)})
    assert _legend_clear_of_every_axes(ax.figure)


def test_plot_against_optimum_marks_the_certified_value(tmp_path):
    """The bottom row's dashed line is at the certified value, its band between L and U, and each
    run's objective curve is the report's objective column."""
    fed = dm.datasets.synthetic_regression(n_clients=3, dim=3, samples=20, seed=0)
    prob = dm.FederatedDRO(fed, dm.losses.Squared(), weights=dm.sets.ChiSquare(3, rho=0.1), l2=0.1)
    sol = prob.solve()
    reports = {name: dm.verify(solver.run(prob, seed=0), sol, tol=1e-8)
               for name, solver in (("Scaff-PD", dm.solvers.ScaffPD(rounds=60, local_steps=2)),
                                    ("DRFA", dm.solvers.DRFA(rounds=60, local_steps=2)))}
    path = tmp_path / "runs.png"
    axes = plots.plot_against_optimum({"rho = 0.1": (sol, reports), "again": (sol, reports)}, path=path)
    assert path.is_file() and axes.shape == (2, 2)
    bottom = axes[1, 0]
    (optimum,) = [line for line in bottom.lines if line.get_label() == "certified optimum"]
    assert optimum.get_ydata()[0] == pytest.approx(sol.value)
    curve = [line for line in bottom.lines if line.get_label() == "Scaff-PD"][0]
    np.testing.assert_allclose(curve.get_ydata(), [row["objective"] for row in reports["Scaff-PD"].rows])
    with pytest.raises(dm.InvalidParameterError):
        plots.plot_against_optimum({})
