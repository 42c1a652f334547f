"""The certified landing point of a strategy: :class:`FixedPoint`.

Status values (derived from the certificate, never from an iteration count):

``"certified"``                the true point lies within ``radius <= tol * max(1, ||theta||)``
``"certified_within_radius"``  a finite certified radius larger than that
``"uncertified"``              a point was computed but no radius holds (e.g. the local steps need
                               not contract); no uniqueness claim
``"failed"``                   no point was found (or the oracle it rests on failed)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..solution import jsonable

__all__ = ["FixedPoint", "FIXED_POINT_STATUSES"]

FIXED_POINT_STATUSES = ("certified", "certified_within_radius", "uncertified", "failed")


@dataclass
class FixedPoint:
    """Where a strategy lands on a problem, with its certificate.

    Attributes
    ----------
    strategy : the strategy's name.
    theta : the landing point (``None`` when ``status == "failed"``).
    status : one of :data:`FIXED_POINT_STATUSES` (module docstring).
    radius : certified bound on the distance from ``theta`` to the true landing point
        (``inf`` when none holds).
    certificate : how ``radius`` was obtained.
    characterization : the :class:`~drflmodel.landing.strategies.Characterization` (what the point
        is and the published result it comes from).
    config : the configuration the point depends on (local steps, step size, proximal weight,
        client weights).
    contraction : the Lipschitz constant of the strategy's round map (``"local_steps"`` points;
        ``None`` otherwise).
    value, lower_bound, upper_bound : the value of the convex problem the point minimizes and its
        certified bounds (``"moreau"`` and ``"optimum"`` points).
    info : the computation's diagnostics (iterations, residuals, per-client factors).
    """

    strategy: str
    theta: np.ndarray | None
    status: str
    radius: float
    certificate: str
    characterization: Any
    config: dict
    contraction: float | None = None
    value: float | None = None
    lower_bound: float | None = None
    upper_bound: float | None = None
    info: dict = field(default_factory=dict)
    problem: Any = field(default=None, repr=False, compare=False)

    @property
    def kind(self) -> str:
        """``"local_steps"``, ``"moreau"`` or ``"optimum"``."""
        return self.info.get("kind", self.characterization.kind)

    @property
    def source(self) -> str:
        """The published result the point comes from."""
        return self.characterization.source

    def round_factor(self, global_step: float = 1.0) -> float | None:
        r"""Per-round contraction of :math:`\theta^+=\theta-\eta_g(\theta-T(\theta))`:
        :math:`|1-\eta_g|+\eta_gq` (``None`` without a contraction constant)."""
        if self.contraction is None or not np.isfinite(self.contraction):
            return None
        g = float(global_step)
        return abs(1.0 - g) + g * float(self.contraction)

    def summary(self) -> str:
        lines = [f"{self.strategy} lands at a point: {self.status} ({self.kind}; {self.certificate})"]
        shown = {k: v for k, v in self.config.items() if k != "weights" and v is not None}
        if shown:
            lines.append("  configuration: " + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                                        for k, v in shown.items()))
        lines.append(f"  point: {self.characterization.statement}")
        if np.isfinite(self.radius):
            lines.append(f"  certified radius: {self.radius:.3e}")
        if self.contraction is not None:
            lines.append(f"  contraction of the round map: q = {self.contraction:.6f}")
        if self.lower_bound is not None and self.upper_bound is not None:
            lines.append(f"  value: [{self.lower_bound:.12g}, {self.upper_bound:.12g}]")
        if self.info.get("reason"):
            lines.append(f"  reason: {self.info['reason']}")
        lines.append(f"  source: {self.source}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return jsonable({"strategy": self.strategy, "theta": self.theta, "status": self.status,
                         "radius": self.radius, "certificate": self.certificate,
                         "characterization": self.characterization.to_dict(), "config": self.config,
                         "contraction": self.contraction, "value": self.value,
                         "lower_bound": self.lower_bound, "upper_bound": self.upper_bound, "info": self.info})

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)
