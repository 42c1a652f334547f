"""Progress display for long work: solver runs, sweeps, the examples and the tour.

One rule decides whether anything is shown (:func:`progress_enabled`):

* ``progress=False`` -- never;
* ``progress=True`` -- always (even when the stream is not a terminal);
* ``progress=None`` (the default) -- only when the stream (standard error) is a terminal and the
  ``CI`` environment variable is unset (or ``"0"``/``"false"``), so CI logs and captured output
  never carry progress lines.

Even when enabled, nothing appears before :data:`DELAY` seconds have passed, so short work stays
silent. The display is **transient**: it is erased when the work ends, leaving the program's own
output as it would be without it. It shows the count done out of the total, the current error when
a callback supplies one (a callback writes it on the round result as ``intermediate_result.error``,
as :class:`~drflmodel.verification.Verifier` and :class:`ErrorProbe` do) and the elapsed time.

``tqdm`` (extra ``drflmodel[progress]``) draws the bar when installed; otherwise a one-line plain
display is used. Neither this module nor ``import drflmodel`` imports tqdm until a display starts.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Iterable, Iterator

from .errors import InvalidParameterError

__all__ = ["progress_enabled", "Progress", "progress_iter", "progress_callback", "ErrorProbe", "DELAY"]

#: seconds of work before a display appears ("longer than a couple of seconds")
DELAY = 2.0
#: the plain display redraws at most this often (seconds)
REFRESH = 0.2


def _check(progress) -> None:
    if progress is not None and not isinstance(progress, bool):
        raise InvalidParameterError(f"progress must be True, False or None (automatic); got {progress!r}")


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def progress_enabled(progress: bool | None = None, stream=None) -> bool:
    """Whether to show progress on ``stream`` (default ``sys.stderr``); see the module docstring."""
    _check(progress)
    if progress is not None:
        return progress
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty()) and not _in_ci()
    except (ValueError, OSError):  # closed stream
        return False


def _tqdm_class():
    """The ``tqdm`` class, or ``None`` when tqdm is not installed (tests patch this)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


def _fmt_error(error) -> str:
    return "" if error is None else f"error {error:.3e}"


class Progress:
    """A transient progress display of ``total`` units of work (a no-op when disabled).

    ``update(n, error=None)`` sets the count done to ``n`` (absolute), ``write(text)`` prints a
    line of the program's own output without tearing the display, ``close()`` erases it (also on
    leaving a ``with`` block).
    """

    def __init__(self, total: int | None, desc: str, unit: str = "round", progress: bool | None = None,
                 stream=None):
        self.total, self.desc, self.unit = total, desc, unit
        self.stream = sys.stderr if stream is None else stream
        self.enabled = progress_enabled(progress, self.stream)
        self.n = 0
        self._start = time.perf_counter()
        self._bar = None
        self._drawn = 0          # width of the plain line on screen (0: nothing shown)
        self._last_draw = -float("inf")
        self._error = None
        if self.enabled:
            tqdm = _tqdm_class()
            if tqdm is not None:
                self._bar = tqdm(total=total, desc=desc, unit=unit, file=self.stream, leave=False,
                                 delay=DELAY, mininterval=REFRESH, dynamic_ncols=True)

    # ------------------------------------------------------------------ updates
    def update(self, n: int, error: float | None = None) -> None:
        if not self.enabled:
            return
        self.n = int(n)
        if error is not None:
            self._error = float(error)
        if self._bar is not None:
            if error is not None:
                self._bar.set_postfix_str(_fmt_error(self._error), refresh=False)
            self._bar.update(self.n - self._bar.n)
            return
        now = time.perf_counter()
        if now - self._start >= DELAY and (now - self._last_draw >= REFRESH or self.n == self.total):
            self._draw(now)

    def _line(self, now: float) -> str:
        count = f"{self.n}/{self.total}" if self.total is not None else f"{self.n}"
        parts = [f"{self.desc}: {count} {self.unit}s", _fmt_error(self._error), f"{now - self._start:.1f}s"]
        return ", ".join(p for p in parts if p)

    def _draw(self, now: float) -> None:
        line = self._line(now)
        self.stream.write("\r" + line.ljust(self._drawn))
        self.stream.flush()
        self._drawn = max(self._drawn, len(line))
        self._last_draw = now

    def _erase(self) -> None:
        if self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()

    # ------------------------------------------------------------------ output and end
    def write(self, text: str, file=None) -> None:
        """Print ``text`` (a line of the program's output, to ``file`` or stdout) above the display."""
        file = sys.stdout if file is None else file
        if self._bar is not None:
            self._bar.write(text, file=file)
            return
        self._erase()
        print(text, file=file, flush=self._drawn > 0)
        if self._drawn:
            self._drawn = 0
            self._draw(time.perf_counter())

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._erase()
        self._drawn = 0
        self.enabled = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # an exception inside the work must not leave a half line on screen
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass


def progress_iter(items: Iterable, desc: str, unit: str = "step", progress: bool | None = None,
                  stream=None) -> Iterator:
    """Yield the items of ``items`` while showing how many are done (``len`` known or not)."""
    try:
        total = len(items)  # type: ignore[arg-type]
    except TypeError:
        total = None
    with Progress(total, desc, unit=unit, progress=progress, stream=stream) as bar:
        for k, item in enumerate(items):
            yield item
            bar.update(k + 1)


def progress_callback(callback: Callable | None, total: int, desc: str, progress: bool | None = None,
                      stream=None) -> Callable | None:
    """Wrap a solver ``callback`` so each round also updates a progress display.

    When progress is off the callback is returned unchanged (``None`` stays ``None``), so the
    solver's loop is exactly the one without progress. The display closes when the last round is
    done or when the wrapped callback stops the run (``StopIteration``).
    """
    _check(progress)
    if not progress_enabled(progress, stream):
        return callback
    bar = Progress(total, desc, unit="round", progress=True, stream=stream)

    def with_progress(result: Any) -> None:
        try:
            if callback is not None:
                callback(result)
        except BaseException:
            bar.close()
            raise
        bar.update(result.round, error=getattr(result, "error", None))
        if result.round >= total:
            bar.close()

    with_progress.progress = bar  # for tests and for callers that want to write above it
    return with_progress


class ErrorProbe:
    """A solver callback that never stops the run: every ``interval`` seconds it evaluates
    ``error(theta)`` (e.g. :meth:`~drflmodel.verification.Verifier.error`) and writes the latest value
    on the round result as ``intermediate_result.error``, for the progress display."""

    def __init__(self, error: Callable[[Any], float], interval: float = 0.5):
        self.error = error
        self.interval = float(interval)
        self.value: float | None = None
        self._last = -float("inf")

    def __call__(self, result: Any) -> None:
        now = time.perf_counter()
        if now - self._last >= self.interval:
            self.value = float(self.error(result.theta))
            self._last = now
        result.error = self.value
