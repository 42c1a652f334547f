"""Plots (optional extra ``drflmodel[plot]``): convergence curves, Lorenz curves, parameter sweeps.

Legends sit beside the axes, never over the curves.

Every function draws onto ``ax`` if given, else a new figure; if ``path`` is given the figure is
saved there (PNG/PDF by extension) and closed. matplotlib is imported lazily with the
non-interactive ``Agg`` backend when no display is configured.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .errors import InvalidParameterError

__all__ = ["plot_report", "plot_convergence", "plot_lorenz", "plot_lorenz_panels", "plot_sweep",
           "plot_error_bar_panels", "plot_against_optimum", "panels", "save_figure"]


def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("plots need matplotlib: pip install 'drflmodel[plot]'") from exc
    if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg") and not _has_display():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _has_display() -> bool:
    import os
    return bool(os.environ.get("DISPLAY") or os.environ.get("MPLBACKEND"))


def _finish(fig, ax, path):
    if path is not None:
        fig.tight_layout()
        fig.savefig(path, dpi=120, bbox_inches="tight")  # "tight": the legend beside the axes is kept
        _pyplot().close(fig)
    return ax


def _legend(ax):
    """The legend beside the axes (to the right), so it never covers a curve."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize="small")


def _axes(ax):
    plt = _pyplot()
    if ax is None:
        fig, ax = plt.subplots(figsize=(8.5, 4))  # room for the legend beside the axes
    else:
        fig = ax.figure
    return fig, ax


def plot_report(report, path=None, ax=None):
    """Error curves of one :class:`~drflmodel.verification.Report` (log scale)."""
    return plot_convergence({report.solver or "iterates": report}, path=path, ax=ax)


def plot_convergence(reports: Mapping[str, object], metric: str | None = None, path=None, ax=None,
                     title: str | None = None):
    """Convergence of several solvers against one oracle: ``{label: Report}`` → log-scale curves
    of ``metric`` (default: each report's own error metric) against rounds; on
    ``dist_theta_sq``, a dashed curve for the theorem's explicit bound where the report checked one."""
    if not reports:
        raise InvalidParameterError("reports must contain at least one Report")
    fig, ax = _axes(ax)
    plotted = set()
    for label, rep in reports.items():
        m = metric or rep.error_metric
        plotted.add(m)
        r = np.array([row["round"] for row in rep.rows])
        e = np.abs(np.array([row.get(m, np.nan) for row in rep.rows], dtype=float))
        e = np.where(e > 0, e, np.nan)
        line, = ax.semilogy(r, e, label=label)
        if m == "dist_theta_sq" and "theory_bound" in rep.rows[0]:       # the theorem's bound, every round
            b = np.array([row.get("theory_bound", np.nan) for row in rep.rows], dtype=float)
            theorem = (rep.diagnosis.get("bound") or {}).get("theorem", "theorem")
            ax.semilogy(r, b, color=line.get_color(), ls="--", lw=1, label=f"{label}: {theorem}'s bound")
    # a tolerance line only when every report was judged on the plotted metric with one tolerance
    judged = {(rep.error_metric, rep.tol) for rep in reports.values()}
    if len(judged) == 1 and plotted == {next(iter(judged))[0]}:
        tol = next(iter(judged))[1]
        ax.axhline(tol, color="gray", ls=":", lw=1, label=f"tol {tol:g}")
    ax.set_xlabel("communication round")
    ax.set_ylabel(", ".join(sorted(plotted)))
    ax.set_title(title or "distance to the certified optimum")
    _legend(ax)
    return _finish(fig, ax, path)


def plot_lorenz(losses: Mapping[str, Sequence[float]], path=None, ax=None, transformed: bool = False,
                units: str = "clients", title: str | None = None):
    """Lorenz curves of client losses, one per label (``transformed`` plots :math:`\\ell - x/2`).

    Overlay only models that belong together (the same clients, e.g. ERM vs AFL vs FAFL on one
    data set); :func:`plot_lorenz_panels` puts several such groups in one figure."""
    from .metrics import lorenz
    fig, ax = _axes(ax)
    for label, f in losses.items():
        out = lorenz(np.asarray(f, float))
        x, ell = out[0], out[2] if transformed else out[1]
        ax.plot(x, ell, marker="o", ms=3, label=label)
    if not transformed:
        ax.plot([0, 1], [0, 1], color="gray", ls=":", lw=1, label="equality")
    ax.set_xlabel(f"cumulative fraction of {units} (ascending loss)")
    ax.set_ylabel("cumulative share of loss")
    if title:
        ax.set_title(title, fontsize="medium")
    _legend(ax)
    return _finish(fig, ax, path)


def plot_lorenz_panels(panels: Mapping[str, Mapping[str, Sequence[float]]], path=None,
                       title: str | None = None, units: str = "clients"):
    """One figure, one Lorenz panel per group (``{panel title: {label: client losses}}``, e.g.
    one panel per data set), panels stacked vertically, each legend beside its panel. Returns
    the axes."""
    if not panels:
        raise InvalidParameterError("panels must contain at least one group of client losses")
    plt = _pyplot()
    fig, axes = plt.subplots(len(panels), 1, figsize=(8.5, 3.6 * len(panels)), squeeze=False)
    axes = list(axes[:, 0])
    for ax, (name, losses) in zip(axes, panels.items()):
        plot_lorenz(losses, ax=ax, units=units, title=name)
    if title:
        fig.suptitle(title)
    _finish(fig, axes[0], path)
    return axes


def plot_sweep(values: Sequence[float], series: Mapping[str, Sequence[float]], xlabel: str = "phi",
               path=None, ax=None, logy: bool = False):
    """A parameter sweep (φ, ε, ρ, ...): one line per named series (objective, index, DEO, ...)."""
    fig, ax = _axes(ax)
    for label, ys in series.items():
        ys = np.asarray(ys, float)
        if ys.shape != (len(values),):
            raise InvalidParameterError(f"series {label!r} has {ys.size} values for {len(values)} sweep points")
        ax.plot(values, ys, marker="o", label=label)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    _legend(ax)
    return _finish(fig, ax, path)


def plot_error_bar_panels(panels: Mapping[str, tuple], ylabel: str, path=None, title: str | None = None):
    """One figure, panels side by side, each ``{panel title: (x label, x values, {label: (mean,
    standard error)})}`` drawn as lines with error bars (e.g. a metric against a noise level, one
    line per model); one shared legend beside the last panel. Returns the axes."""
    if not panels:
        raise InvalidParameterError("panels must contain at least one panel")
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 1.6, 3.6), squeeze=False)
    axes = list(axes[0])
    for ax, (name, (xlabel, xs, series)) in zip(axes, panels.items()):
        for label, (mean, se) in series.items():
            mean, se = np.asarray(mean, float), np.asarray(se, float)
            if mean.shape != (len(xs),) or se.shape != (len(xs),):
                raise InvalidParameterError(
                    f"panel {name!r}: series {label!r} needs {len(xs)} means and standard errors")
            ax.errorbar(xs, mean, yerr=se, marker="o", markersize=3, capsize=2, label=label)
        ax.set_title(name, fontsize="small")
        ax.set_xlabel(xlabel)
    axes[0].set_ylabel(ylabel)
    _legend(axes[-1])
    if title:
        fig.suptitle(title)
    _finish(fig, axes[0], path)
    return axes


def plot_against_optimum(panels: Mapping[str, tuple], path=None, title: str | None = None):
    """Convergence against the certified optimum, one column per setting: ``{panel title:
    (solution, {label: Report})}``. Top row: each report's error metric per round (log scale, the
    tolerance dotted); bottom row: the objective :math:`g(\\theta^r)` per round with the certified
    optimum marked -- the line at the certified value and the band between its lower and upper
    bound :math:`[L, U]` (thinner than the line when the gap is closed). One legend below the
    figure when every column shows the same runs, else each column's runs in its own legend.
    Returns the axes (2 x panels)."""
    if not panels:
        raise InvalidParameterError("panels must contain at least one (solution, reports) pair")
    plt = _pyplot()
    k = len(panels)
    fig, axes = plt.subplots(2, k, figsize=(4.3 * k + 0.6, 7.0), squeeze=False)
    for j, (name, (solution, reports)) in enumerate(panels.items()):
        if not reports:
            raise InvalidParameterError(f"panel {name!r} has no reports")
        top, bottom = axes[0, j], axes[1, j]
        tops, finals = [], []
        for label, rep in reports.items():
            r = np.array([row["round"] for row in rep.rows])
            e = np.abs(np.array([row.get(rep.error_metric, np.nan) for row in rep.rows], dtype=float))
            top.semilogy(r, np.where(e > 0, e, np.nan), label=label)
            g = np.array([row["objective"] for row in rep.rows], dtype=float)
            bottom.plot(r, g, label=label)
            tops.append(g[min(len(g) - 1, max(1, len(g) // 20))])
            finals.append(g[-1])
        tol = {rep.tol for rep in reports.values()}
        if len(tol) == 1:
            top.axhline(tol.pop(), color="gray", ls=":", lw=1, label="tolerance")
        value, low, up = float(solution.value), float(solution.lower_bound), float(solution.upper_bound)
        bottom.axhspan(low, up, color="black", alpha=0.15, lw=0)
        bottom.axhline(value, color="black", ls="--", lw=1, label="certified optimum")
        span = max(max(tops) - value, max(finals) - value, abs(value) * 1e-3, 1e-12)
        bottom.set_ylim(min(low, min(finals)) - 0.05 * span, value + 1.05 * span)
        top.set_title(name, fontsize="small")
        bottom.set_xlabel("communication round")
        metrics = sorted({rep.error_metric for rep in reports.values()})
        if j == 0:
            top.set_ylabel(", ".join(metrics))
            bottom.set_ylabel("objective g(theta^r)")
    runs = [tuple(reports) for _, reports in panels.values()]
    shared = all(r == runs[0] for r in runs)          # the same runs (and colours) in every column
    if not shared:                                    # each column names its own runs
        for j, names in enumerate(runs):
            axes[0, j].legend([h for h, lab in zip(*axes[0, j].get_legend_handles_labels()) if lab in names],
                              list(names), fontsize="x-small")
    handles, labels = [], []
    for ax in (axes[0, 0], axes[1, 0]):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels and (shared or lab not in runs[0]):
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), fontsize="small",
               bbox_to_anchor=(0.5, -0.01))
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
    return axes


def panels(n: int, width: float = 6.25, height: float = 4.2):
    """A new figure of ``n`` axes side by side (``width`` inches each), for an example's own
    figure: ``fig, axes = panels(2)``."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, n, figsize=(width * n, height), squeeze=False)
    return fig, list(axes[0])


def save_figure(fig, path, title: str | None = None) -> None:
    """Give ``fig`` its title, lay it out, save it to ``path`` (PNG/PDF by extension) and close it."""
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    _pyplot().close(fig)
