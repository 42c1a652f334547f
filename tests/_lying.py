"""A client that lies in its answers, for the fault-injection tests of the server's answer checks."""

from __future__ import annotations

import numpy as np

from drflmodel.client_oracle import Site


class Lying(Site):
    """``site`` whose answers pass through ``corrupt(query, answer, call)`` (``call`` counts its
    answers from 1, the row norm -- a declaration the server may ask at any time -- not counted); its
    declaration and row norm stay honest."""

    def __init__(self, site: Site, corrupt):
        self.__dict__.update(site.__dict__)
        self.corrupt, self.calls = corrupt, 0

    def answer(self, query, arrays=None, options=None):
        self.calls += query != "row_norm"
        out = dict(Site.answer(self, query, arrays, options))
        return out if query in ("describe", "row_norm") else self.corrupt(query, out, self.calls)


def edit(key: str, change):
    """A corruption replacing answer array ``key`` by ``change(array)`` wherever it is answered."""
    def corrupt(query, out, call):
        if key in out:
            out[key] = change(np.asarray(out[key], float))
        return out
    return corrupt
