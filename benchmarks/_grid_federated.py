"""``bench_grid.py``'s federated column, measured: one federated solve with ``method="auto"`` over the
in-process :class:`~drflmodel.client_oracle.LocalChannel`, counting what the channel carried.

:class:`CountingChannel` is a ``LocalChannel`` that counts, at every round of messages, the arrays
each client was sent and the arrays it answered, as the server receives them (``nbytes`` of each
array, a string by its UTF-8 length; the options -- a few scalars -- are not counted). From it
:func:`measure` reports the route ``auto`` took, the exchanges (rounds of messages, retries
included), the largest single answer of one client in floats and bytes (every array of it, the
protocol's own included, so at least the reveal ledger's ``largest_answer_floats``), the bytes the
busiest client sent over the solve, the status, the gap, and whether the federated certified interval
[L, U] meets the centralized one (both bound the same optimum, so they must meet; ``None`` when the
federated solve has no finite interval). A fallback is shown as ``block_newton then sqp``.

A run can be bounded in time (``max_seconds``): the channel stops it at the first round of messages
after the budget (:class:`Stopped`, a ``BaseException`` so no route's error handling takes it for a
client's failure); the row then says ``stopped`` with what was carried until then, and no interval.

Flags (the targets of the round): an answer above :data:`FLOATS_PER_P` x P floats, and more exchanges
than :data:`EXCHANGE_TARGETS` allows for the shape (digits: 40; the largest published heads: 100).
"""

from __future__ import annotations

import time

import numpy as np

from drflmodel.client_oracle import LocalChannel, federated_solve
from drflmodel.client_oracle.site import Site

#: an answer of one client above this many floats per parameter is flagged
FLOATS_PER_P = 4
#: shape -> the most exchanges a federated ``auto`` solve may take there (flagged above)
EXCHANGE_TARGETS = {"digits": 40, "100kx512x200": 100, "50kx2048x100": 100}
#: the default largest N x P at which the federated solve runs (the default grid's largest shape,
#: 50k x 512 x 10, is 2.6e8 entries; the float32 heads, about 1e10, are above it)
FEDERATED_MAX_ENTRIES = 3e8
#: a federated bound beyond the centralized interval by more than this (relative to max(1, |U|))
#: means the intervals do not meet
MEET_SLACK = 1e-12
#: characters of a failed solve's reason shown in the table cell
WHY_CHARS = 100


class Stopped(BaseException):
    """The time budget of a measured run is spent (module docstring)."""


def payload(arrays: dict) -> tuple[int, int]:
    """``(floats, bytes)`` of one message's arrays: numbers counted by ``np.size``, bytes by
    ``nbytes`` (a string: its UTF-8 length, no floats)."""
    floats = nbytes = 0
    for value in arrays.values():
        if isinstance(value, str):
            nbytes += len(value.encode())
        else:
            value = np.asarray(value)
            floats += int(value.size)
            nbytes += int(value.nbytes)
    return floats, nbytes


class CountingChannel(LocalChannel):
    """A :class:`LocalChannel` that counts what it carries (module docstring): ``sends`` (rounds of
    messages), ``largest`` (``floats``, ``bytes`` and ``query`` of the single answer of one client with
    the most floats), ``largest_bytes`` (the most bytes of any one answer, text included), ``sent[i]`` / ``received[i]`` (bytes client ``i`` answered / was sent over the solve)."""

    def __init__(self, sites, retries: int = 2, max_seconds: float | None = None):
        super().__init__(sites, retries)
        self.deadline = None if max_seconds is None else time.perf_counter() + max_seconds
        self.sends = 0
        self.largest = {"floats": 0, "bytes": 0, "query": None}
        self.largest_bytes = 0
        self.sent = [0] * self.n_clients
        self.received = [0] * self.n_clients

    @classmethod
    def from_problem(cls, problem, retries: int = 2, max_seconds: float | None = None) -> "CountingChannel":
        return cls([Site.from_problem(problem, i) for i in range(problem.n_clients)], retries, max_seconds)

    def _send(self, query: str, contents: dict):
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise Stopped(query)
        self.sends += 1
        for i, (arrays, _) in contents.items():
            self.received[i] += payload(arrays)[1]
        replies, errors = super()._send(query, contents)
        for i, arrays in replies.items():
            floats, nbytes = payload(arrays)
            self.sent[i] += nbytes
            if (floats, nbytes) > (self.largest["floats"], self.largest["bytes"]):
                self.largest = {"floats": floats, "bytes": nbytes, "query": query}
            self.largest_bytes = max(self.largest_bytes, nbytes)
        return replies, errors


def meets(lower: float, upper: float, central_lower: float, central_upper: float, slack: float = MEET_SLACK) -> bool:
    """Whether [lower, upper] and [central_lower, central_upper] intersect (up to ``slack`` relative to
    ``max(1, |central_upper|)``)."""
    scale = max(1.0, abs(central_upper))
    return bool(max(lower, central_lower) <= min(upper, central_upper) + slack * scale)


def measure(prob, central_lower: float, central_upper: float, shape: str = "",
            max_seconds: float | None = None) -> dict:
    """One federated ``auto`` solve of ``prob`` over a :class:`CountingChannel` (module docstring),
    against the centralized certified interval ``[central_lower, central_upper]``; stopped after
    ``max_seconds`` (``None``: no bound)."""
    channel = CountingChannel.from_problem(prob, max_seconds=max_seconds)
    t0 = time.perf_counter()
    try:
        sol = federated_solve(prob, channel, method="auto")
    except Stopped:
        sol = None
    seconds = time.perf_counter() - t0
    out = {"run": True, "clients": int(prob.n_clients), "exchanges": channel.sends,
           "largest_floats": channel.largest["floats"], "largest_bytes": channel.largest["bytes"],
           "largest_query": channel.largest["query"], "largest_answer_bytes": channel.largest_bytes,
           "bytes_per_client": max(channel.sent), "bytes_to_client": max(channel.received), "seconds": seconds}
    if sol is None:
        out.update({"route": None, "routes": ["-"], "status": "stopped", "gap": float("inf"), "L": -np.inf,
                    "U": np.inf, "ledger_exchanges": int(channel.ledger.exchanges),
                    "ledger_largest_floats": int(channel.ledger.largest_answer), "meets_central": None,
                    "why": f"time budget of {max_seconds:g} s spent (--federated-max-seconds)"})
    else:
        info = sol.info["federated"]
        tried = [a["method"] for a in sol.info.get("route_attempts", [])]
        finite = np.isfinite(sol.lower_bound) and np.isfinite(sol.upper_bound)
        out.update({"route": info["method"], "routes": tried + [info["method"]], "status": sol.status,
                    "gap": float(sol.relative_gap), "L": float(sol.lower_bound), "U": float(sol.upper_bound),
                    "ledger_exchanges": int(info["exchanges"]),
                    "ledger_largest_floats": int(info["largest_answer_floats"]),
                    "meets_central": meets(sol.lower_bound, sol.upper_bound, central_lower, central_upper)
                    if finite else None, "why": _why(sol)})
    out["flags"] = flags(out, int(prob.dim), shape)
    return out


def _why(sol) -> str | None:
    """Why a federated solve did not end ``optimal``: the fault's message, else the routes' own words
    (the strings of their histories)."""
    if sol.status == "optimal":
        return None
    fault = sol.info.get("fault")
    if fault:
        return fault.get("message")
    words = [v for a in sol.info.get("attempts", []) for h in a.get("history", []) for v in h.values()
             if isinstance(v, str)]
    return "; ".join(words) or None


def flags(row: dict, P: int, shape: str) -> list[str]:
    """What misses the round's targets (module docstring) or a certificate's promise."""
    out = []
    if row["largest_floats"] > FLOATS_PER_P * P:
        out.append(f"answer {row['largest_floats']:,} floats > {FLOATS_PER_P}P = {FLOATS_PER_P * P:,}")
    target = EXCHANGE_TARGETS.get(shape)
    if target is not None and row["exchanges"] > target:
        out.append(f"{row['exchanges']} exchanges > {target}")
    if row["status"] != "optimal":
        why = (row.get("why") or "").replace("|", "/")          # a table cell
        out.append(row["status"] + (f" ({why[:WHY_CHARS]}{'...' if len(why) > WHY_CHARS else ''})" if why else ""))
    if row["meets_central"] is False:
        out.append("misses the centralized [L, U]")
    return out


def cell(fed: dict) -> str:
    """The table cell: ``route (clients), exchanges, largest answer floats (bytes), bytes per client``, the
    status and gap, whether [L, U] meets the centralized interval, flags in bold; a row not run says
    so and shows the estimate, labelled."""
    if not fed["run"]:
        return (f"not run ({fed['reason']}); estimate: {fed['route']}, {fed['exchanges']} exch., "
                f"{fed['floats']:,} ({_bytes(fed['bytes'])})")
    interval = {True: "meets central", False: "misses central", None: "no interval"}[fed["meets_central"]]
    text = (f"{' then '.join(fed['routes'])} ({fed['clients']} clients), {fed['exchanges']} exch., "
            f"{fed['largest_floats']:,} ({_bytes(fed['largest_bytes'])}), "
            f"{_bytes(fed['bytes_per_client'])}/client, {fed['status']} {max(fed['gap'], 0.0):.0e}, "
            f"{interval}")
    return text + (f"; **{'; '.join(fed['flags'])}**" if fed["flags"] else "")


def _bytes(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"
