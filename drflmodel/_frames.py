"""Tables of results as pandas DataFrames when pandas is installed (extra ``drflmodel[pandas]``).

Two accessors with one meaning everywhere (:class:`~drflmodel.verification.Report` and
:class:`SweepResult`):

* ``.table`` -- a ``pandas.DataFrame`` when pandas is importable, else the plain list of row
  dicts (so code written without pandas keeps working);
* ``.to_frame()`` -- always a DataFrame; without pandas an ``ImportError`` that names the extra.

pandas is imported only when a table is asked for, never by ``import drflmodel``.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["to_frame", "table", "SweepResult"]


def to_frame(rows: list[dict]):
    """``pandas.DataFrame(rows)``; an ``ImportError`` naming the extra when pandas is missing."""
    try:
        import pandas as pd
    except ImportError as exc:
        raise ImportError("tables as DataFrames need pandas: pip install 'drflmodel[pandas]'") from exc
    return pd.DataFrame(rows)


def table(rows: list[dict]):
    """A DataFrame of ``rows`` when pandas is installed, else ``rows`` itself."""
    try:
        return to_frame(rows)
    except ImportError:
        return rows


class SweepResult(list):
    """What :meth:`Problem.sweep` returns: the list of certified
    :class:`~drflmodel.solution.Solution` s, one per swept value (a plain ``list`` in every way:
    indexing, unpacking, ``len``), plus ``param``, ``values`` and a one-row-per-value ``table``.
    """

    #: the columns of :meth:`rows` after the swept parameter
    COLUMNS = ("status", "value", "lower_bound", "upper_bound", "relative_gap", "certificate", "solver",
               "method")

    def __init__(self, param: str, values: Iterable = (), solutions: Iterable = ()):
        super().__init__(solutions)
        self.param = param
        self.values = list(values)

    def rows(self) -> list[dict]:
        """One dict per solution: the swept value, then :attr:`COLUMNS` (``solver`` and ``method``
        from ``Solution.info``, ``None`` when the route does not record them)."""
        out = []
        for v, sol in zip(self.values, self):
            row = {self.param: v}
            for col in self.COLUMNS:
                row[col] = sol.info.get(col) if col in ("solver", "method") else getattr(sol, col)
            out.append(row)
        return out

    @property
    def table(self):
        """:meth:`rows` as a DataFrame when pandas is installed, else the list of dicts."""
        return table(self.rows())

    def to_frame(self):
        """:meth:`rows` as a DataFrame (``ImportError`` without pandas)."""
        return to_frame(self.rows())

    def to_dict(self) -> dict:
        from .solution import jsonable
        return jsonable({"param": self.param, "values": self.values,
                         "solutions": [sol.to_dict() for sol in self]})
