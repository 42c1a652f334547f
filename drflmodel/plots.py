"""Plots (optional extra ``drflmodel[plot]``): convergence curves, Lorenz curves, parameter sweeps.

Every function draws onto ``ax`` if given, else a new figure; if ``path`` is given the figure is
saved there (PNG/PDF by extension) and closed. matplotlib is imported lazily with the
non-interactive ``Agg`` backend when no display is configured.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .errors import InvalidParameterError

__all__ = ["plot_report", "plot_convergence", "plot_lorenz", "plot_sweep"]


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
        fig.savefig(path, dpi=120)
        _pyplot().close(fig)
    return ax


def _axes(ax):
    plt = _pyplot()
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 4))
    else:
        fig = ax.figure
    return fig, ax


def plot_report(report, path=None, ax=None):
    """Error curves of one :class:`~drflmodel.verify.Report` (log scale)."""
    return plot_convergence({report.solver or "iterates": report}, path=path, ax=ax)


def plot_convergence(reports: Mapping[str, object], metric: str | None = None, path=None, ax=None,
                     title: str | None = None):
    """Convergence of several solvers against one oracle: ``{label: Report}`` → log-scale curves
    of ``metric`` (default: each report's own error metric) against rounds."""
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
        ax.semilogy(r, e, label=label)
    # a tolerance line only when every report was judged on the plotted metric with one tolerance
    judged = {(rep.error_metric, rep.tol) for rep in reports.values()}
    if len(judged) == 1 and plotted == {next(iter(judged))[0]}:
        tol = next(iter(judged))[1]
        ax.axhline(tol, color="gray", ls=":", lw=1, label=f"tol {tol:g}")
    ax.set_xlabel("communication round")
    ax.set_ylabel(", ".join(sorted(plotted)))
    ax.set_title(title or "distance to the certified optimum")
    ax.legend()
    return _finish(fig, ax, path)


def plot_lorenz(losses: Mapping[str, Sequence[float]], path=None, ax=None, transformed: bool = False):
    """Lorenz curves of client losses, one per label (``transformed`` plots :math:`\\ell - x/2`)."""
    from .metrics import lorenz
    fig, ax = _axes(ax)
    for label, f in losses.items():
        out = lorenz(np.asarray(f, float))
        x, ell = out[0], out[2] if transformed else out[1]
        ax.plot(x, ell, marker="o", ms=3, label=label)
    if not transformed:
        ax.plot([0, 1], [0, 1], color="gray", ls=":", lw=1, label="equality")
    ax.set_xlabel("cumulative fraction of clients (ascending loss)")
    ax.set_ylabel("cumulative share of loss")
    ax.legend()
    return _finish(fig, ax, path)


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
    ax.legend()
    return _finish(fig, ax, path)
