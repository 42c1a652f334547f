"""Quiet by default: Flower's per-round INFO log kept off the terminal while drflmodel runs Flower.

Flower logs at INFO level on standard error for every round (configure, aggregate, evaluate: about
15 lines a round; 435 lines for 25 rounds of its scikit-learn quickstart graded in process).
drflmodel's Flower entry points (:class:`~drflmodel.flower.grid.LocalGrid`, ``run``,
``run_app``, ``simulate``, ``certified_solve``, ``graded``) run inside :func:`flower_logs`, which
lets through only Flower's warnings and errors and drflmodel's own lines (its messages start with
``[drflmodel]``: the oracle, one line per graded round, the verdict) -- **unless the user
configured Flower's logger**: a level other than the ``DEBUG`` Flower sets at import, or a console
handler at another level than Flower's ``INFO``, is the user's choice and is left alone.
``verbose=True`` shows Flower's log as it is; ``verbose=False`` filters it even when configured.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

__all__ = ["flower_logs", "user_configured", "DRFLMODEL_PREFIX"]

#: the prefix of drflmodel's own log lines on Flower's logger
DRFLMODEL_PREFIX = "[drflmodel]"
#: what Flower 1.41 sets at import: its logger at DEBUG, its console handler at INFO
_FLOWER_LOGGER_LEVEL = logging.DEBUG
_FLOWER_CONSOLE_LEVEL = logging.INFO


class _WarningsAndDrflmodel(logging.Filter):
    """Pass records at WARNING and above, and drflmodel's own lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or str(record.msg).startswith(DRFLMODEL_PREFIX)


def user_configured(logger: logging.Logger | None = None) -> bool:
    """Whether Flower's logger differs from what Flower sets at import (its level, or its console
    handler's level): then the user configured it."""
    logger = logging.getLogger("flwr") if logger is None else logger
    if logger.level != _FLOWER_LOGGER_LEVEL:
        return True
    console = [h for h in logger.handlers if type(h).__name__ == "ConsoleHandler"]
    return any(h.level != _FLOWER_CONSOLE_LEVEL for h in console)


@contextmanager
def flower_logs(verbose: bool | None = None):
    """Within the block, Flower's log shows only warnings, errors and drflmodel's lines (module
    docstring); ``verbose=None`` (default) does so unless the user configured Flower's logger,
    ``True`` never, ``False`` always."""
    if verbose not in (None, True, False):
        from ..errors import InvalidParameterError

        raise InvalidParameterError(f"verbose must be None, True or False; got {verbose!r}")
    logger = logging.getLogger("flwr")
    if verbose or (verbose is None and user_configured(logger)):
        yield
        return
    quiet = _WarningsAndDrflmodel()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)
