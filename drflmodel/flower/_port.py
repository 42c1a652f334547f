"""The base of a Flower port: the server-side round of one simulator solver."""

from __future__ import annotations

from ..errors import InvalidParameterError

__all__ = ["Port", "batch_size"]


class Port:
    """Server-side round of one simulator solver on Flower."""

    #: the simulator solver class this ports (``drflmodel.solvers`` name)
    solver: str = ""
    #: solver parameters handled; any other parameter must be ``None`` (not ported yet)
    handled: frozenset = frozenset()

    def check(self, solver) -> None:
        """Raise if ``solver`` uses an option this port does not implement."""
        extra = {k: v for k, v in solver.params.items() if k not in self.handled and v is not None}
        if extra:
            raise InvalidParameterError(
                f"{self.solver} on Flower does not implement the option(s) "
                f"{', '.join(f'{k}={v!r}' for k, v in extra.items())}; run it on the simulator")

    def setup(self, state: dict, ex, solver, problem) -> None:
        """Before the first round, after the supernodes connected (default: nothing)."""

    def round(self, r: int, state: dict, ex, solver, rng) -> dict:
        """Round ``r``: update and return ``state`` (the simulator solver's state keys)."""
        raise NotImplementedError


def batch_size(solver) -> int:
    """The solver's minibatch size for the clients' config (0 = exact gradients)."""
    b = solver.minibatch_size()
    return 0 if b is None else int(b)
