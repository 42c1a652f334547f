r"""A sum-only channel: the server receives **only** the sum over clients of the vectors they
compute, quantized exactly as Flower's SecAgg+ quantizes them, with a rigorous per-entry error.

**Flower's arithmetic** (``flwr`` 1.41, ``flwr/common/secure_aggregation/quantization.py`` and the
``secaggplus_mod`` / ``SecAggPlusWorkflow`` pair). With clipping range :math:`c` (default 8) and
target range :math:`T` (default :math:`2^{22}`), a client maps each entry :math:`z` to the integer

.. math::

    q=\mathrm{sround}\Big((\mathrm{clip}(z,-c,c)+c)\,\frac{T}{2c}\Big)\in\{0,\dots,T\},

with *stochastic* rounding (``ceil``, minus one with probability ``ceil(p) - p``), masks it and sends
it modulo :math:`M=2^{32}`. The masks cancel in the sum, and the server dequantizes the integer sum
:math:`Q=\sum_iq_i` (exact while :math:`nT<M`) as :math:`Q\,\frac{2c}{T}-c-(n-1)c`. SecAgg+ then
divides by the clients' summed weight factor; with every client's factor 1 (``num_examples =
max_weight``, so ``dq_ratio`` is exactly 1) that is :math:`n`, which the server multiplies back (one
more rounding, inside the :math:`u|\widehat S|` terms below); the simulation skips that pair and
returns :math:`\widehat S\approx\sum_iz_i`.

**The client rounds first.** Stochastic rounding would move each entry by up to one quantum
:math:`\Delta=2c/T` at random, by an amount the client cannot know, so nothing could correct it
later. Instead each client (:class:`SumClient`) rounds its scaled entry :math:`z` to the nearest grid
point :math:`d=k\Delta-c` itself. When :math:`\Delta` is a power of two dividing :math:`c` (Flower's
defaults: :math:`\Delta=2^{-18}`, :func:`grid_exact`) Flower's quantization of :math:`d` is exact
(:math:`(d+c)T/2c=k`, and the stochastic rounding of an integer never moves it), the dequantized
sum is exactly :math:`\sum_id_i`, and

.. math::

    \Big|\widehat S-\sum_iz_i\Big|\ \le\ n\,\frac\Delta2+\epsilon_{\mathrm{fp}},

:math:`\epsilon_{\mathrm{fp}}` the floating-point allowance of :meth:`SumOnlyChannel._error`
(the rounding's input, the residuals, the division by the scale; a few :math:`u\,nc` per stage,
:math:`u=2^{-53}`; :math:`Q` itself is an exact integer below :math:`2^{53}`). With Flower's
defaults :math:`\Delta=3.8\times10^{-6}`: far too coarse for a relative gap of :math:`10^{-6}`.

**Refinement** (``stages``). Each client knows its residual :math:`r_i=z_i-d_i`,
:math:`|r_i|\le\Delta/2`; a second secure sum of :math:`r_i/s_2`, :math:`s_2=\Delta/c`, gives
:math:`\sum_ir_i` to :math:`s_2\,n\Delta/2`: the error falls by the factor
:math:`\Delta/c\approx4.8\times10^{-7}` per stage, down to the floating-point floor. The server
learns :math:`\sum_id_i` and :math:`\sum_ir_i` -- sums over clients, nothing of one client.

**Clipping is detected, never silent.** Every client first divides its vector by a public scale
:math:`s` (per quantity) and adds one more entry: 1 if any of its scaled entries exceeds
:math:`c`, else 0. The sum of these flags (exact after rounding, since :math:`n\Delta<\tfrac12`) is
the *number* of clients that would clip; when it is positive the channel widens :math:`s` by
``widen`` and asks again, up to ``max_widenings`` times, then refuses by name. The server learns that
count (not who).

The quantization is exactly Flower's: :func:`flower_quantize` is ``flwr``'s formula with a seeded
generator (Flower draws from NumPy's global generator); a test checks it gives the same integers as
``flwr.common.secure_aggregation.quantization.quantize`` under the same seed. The masking itself is
not simulated here (it cancels in the modular sum, which is what the server dequantizes);
:mod:`drflmodel.flower.secure` sends the same :class:`SumClient` answers through Flower's real
SecAgg+.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import InvalidParameterError

__all__ = ["FLOWER_CLIPPING_RANGE", "FLOWER_QUANTIZATION_RANGE", "FLOWER_MODULUS_RANGE",
           "flower_quantize", "flower_dequantize_sum", "SecureSum", "SumOnlyChannel", "SumWithheld", "SumStillClips"]

#: SecAggPlusWorkflow's defaults (flwr 1.41)
FLOWER_CLIPPING_RANGE = 8.0
FLOWER_QUANTIZATION_RANGE = 2 ** 22
FLOWER_MODULUS_RANGE = 2 ** 32

_U = np.finfo(float).eps / 2


def flower_quantize(z: np.ndarray, clipping_range: float, target_range: int,
                    rng: np.random.RandomState) -> np.ndarray:
    """Flower's ``quantize`` of one array (stochastic rounding), drawing from ``rng`` (a
    ``numpy.random.RandomState``: the same stream as ``np.random.seed``; ``np.random.rand``)."""
    quantizer = target_range / (2 * clipping_range)
    pre = (np.clip(z, -clipping_range, clipping_range) + clipping_range) * quantizer
    q = np.ceil(pre).astype(np.int32)
    draw = rng.rand(*q.shape)
    if q.ndim == 0:
        return q - 1 if draw < q - pre else q
    q[draw < q - pre] -= 1
    return q


def flower_dequantize_sum(total: np.ndarray, n: int, clipping_range: float, target_range: int) -> np.ndarray:
    """What ``SecAggPlusWorkflow`` makes of the integer sum of ``n`` clients' quantized arrays
    (``dequantize`` then the offset :math:`-(n-1)c`), before its division by the weight factor."""
    vec = np.asarray(total).astype(float) * ((2 * clipping_range) / target_range) + (-clipping_range)
    vec += -(n - 1) * clipping_range
    return vec


@dataclass
class SecureSum:
    """One answer of the channel: ``value`` :math:`\\approx\\sum_ix_i` and ``error`` (per entry)
    with :math:`|\\texttt{value}-\\sum_ix_i|\\le\\texttt{error}` (module docstring); with the guard,
    ``floor_error`` is the part of ``error`` that the entries sent as zeros account for (the rest
    is the rounding: how well the server knows the sum of what the clients sent)."""

    value: np.ndarray
    error: np.ndarray
    query: str
    n_clients: int
    secure_sums: int          # secure-aggregation rounds it took (stages x attempts)
    widenings: int
    floor_error: np.ndarray | None = None   # the part of ``error`` from the guard's floor (entries sent as 0)
    dropped: np.ndarray | None = None       # entries every client sent as 0 on request (the guard's retry, module .cvar)

    @property
    def lower(self) -> np.ndarray:
        return self.value - self.error

    @property
    def upper(self) -> np.ndarray:
        return self.value + self.error

    def to_dict(self) -> dict:
        return {"query": self.query, "entries": int(self.value.size), "max_error": float(np.max(self.error, initial=0.0)),
                "n_clients": self.n_clients, "secure_sums": self.secure_sums, "widenings": self.widenings}


class SumWithheld(InvalidParameterError):
    """A guarded secure sum (``min_contributors``) that was not asked because some entry would
    hold between 1 and ``k - 1`` clients' nonzero terms; ``holders`` the count per entry (all the
    server learnt)."""

    def __init__(self, query: str, holders: np.ndarray, k: int):
        self.query, self.holders, self.k = query, np.asarray(holders), int(k)
        few = np.flatnonzero((self.holders >= 1) & (self.holders < k))
        super().__init__(f"the secure sum of {query!r} was withheld: entries {few[:8].tolist()} would hold "
                         f"fewer than min_contributors={k} clients' nonzero terms")


class SumStillClips(InvalidParameterError):
    r"""A secure sum in which some client's term still left the clipping range after every allowed
    widening of its scale: ``query``, ``clipped`` (how many clients clipped in the last try),
    ``widenings`` and ``widen`` (the factor per widening). A caller that can shift the terms (the KL
    route's :math:`\eta`) catches this type, never the message."""

    def __init__(self, query: str, clipped: int, widenings: int, widen: float):
        self.query, self.clipped, self.widenings, self.widen = query, int(clipped), int(widenings), float(widen)
        super().__init__(f"the secure sum of {query!r} still clips at {self.clipped} client(s) after {self.widenings} "
                         f"widenings of the scale by {self.widen:g}; raise max_widenings or the scale")


@dataclass
class _Seen:
    """What the server received in one secure-aggregation round."""

    query: str
    stage: int
    total: np.ndarray          # the dequantized sum (what SecAgg+ hands the server)
    clipped: int

    def to_dict(self) -> dict:
        return {"query": self.query, "stage": self.stage, "entries": int(self.total.size), "clipped": self.clipped}


def grid_exact(clipping_range: float, quantization_range: int) -> bool:
    r"""Whether :math:`\Delta=2c/T` is a power of two and :math:`c` a multiple of it: then a value
    on the grid :math:`k\Delta-c` passes Flower's quantization unchanged (module docstring)."""
    delta = 2.0 * clipping_range / quantization_range
    mantissa, _ = np.frexp(delta)
    return bool(mantissa == 0.5 and float(clipping_range / delta).is_integer())


class SumClient:
    r"""The client side of a secure sum, around one client (anything with ``contribution(query,
    **params)``): at stage 0 it computes its vector and divides it by the public ``scale``; at later
    stages it takes its own residual, divided by the stage's scale. It appends the clipping flag,
    rounds to the nearest grid point :math:`k\Delta-c` (so Flower's stochastic quantization leaves it
    unchanged) and keeps its residual for the next stage. Nothing but the rounded vector leaves it."""

    def __init__(self, client, clipping_range: float = FLOWER_CLIPPING_RANGE,
                 quantization_range: int = FLOWER_QUANTIZATION_RANGE):
        self.client = client
        self.c, self.T = float(clipping_range), int(quantization_range)
        self.delta = 2.0 * self.c / self.T
        self._residual = None
        self.sent = None
        self._computed = None      # the vector of the guard's count round, for the values round after it
        self.reuse = False

    def answer(self, query: str, stage: int, scale, params: dict, floor: float | None = None,
               holders: bool = False) -> np.ndarray:
        """This client's message for one round (class docstring). With ``floor`` (scaled units) it
        sends 0 for every entry below it in magnitude; with ``holders`` it sends, instead of its
        values, 1 for each entry it would send nonzero (the guard's round of
        :meth:`SumOnlyChannel.sum`) and keeps no residual; ``holders`` :math:`B\\ge2` (an integer)
        packs these flags in base :math:`B` (:func:`pack_flags`). With ``reuse`` set (the simulated
        transport's clients) the values round right after the count round of the same query and
        parameters reuses the vector the count round computed instead of asking the client again."""
        if stage == 0:
            last = self._computed
            if not holders and last is not None and last[0] == query and last[1] is params:
                v = last[2]                     # the guard's count round of this very sum computed it
            else:
                v = np.asarray(self.client.contribution(query, **params), float).ravel()
            # kept (with the parameters object itself, so its identity cannot be reused) for the
            # values round of the same sum only
            self._computed = (query, params, v) if holders and self.reuse else None
            s = np.asarray(scale, float)
            z = v / s
            if floor is not None:
                z = np.where(np.abs(z) >= floor, z, 0.0)
            if holders:
                flags = (z != 0).astype(float)
                if int(holders) >= 2:
                    return np.concatenate((pack_flags(flags, int(holders), self.c, self.T), [0.0]))
                return np.concatenate((flags, [0.0]))
            self.sent = z * s                   # its term, kept client-side
        else:
            z = self._residual / stage_scale(self.c, self.T)
        flag = float(np.any(np.abs(z) > self.c))
        d = np.rint((np.minimum(np.maximum(z, -self.c), self.c) + self.c) / self.delta) * self.delta - self.c
        self._residual = z - d
        return np.concatenate((d, [flag]))


def flags_per_entry(base: int, clipping_range: float, quantization_range: int) -> int:
    r"""How many holder flags :func:`pack_flags` puts in one entry: the largest :math:`b` with
    :math:`\sum_{j<b}B^j\le T/2`, so one client's packed entry :math:`\Delta\sum_jf_jB^j` stays
    within :math:`[0,c]` (:math:`\Delta=2c/T`)."""
    b, total = 0, 0
    while total + base ** b <= quantization_range // 2:
        total += base ** b
        b += 1
    if b < 1:
        raise InvalidParameterError(f"the holders' base {base} exceeds quantization_range / 2")
    return b


def pack_flags(flags: np.ndarray, base: int, clipping_range: float, quantization_range: int) -> np.ndarray:
    r"""One client's holder flags :math:`f\in\{0,1\}^m` packed :math:`b` (:func:`flags_per_entry`)
    an entry, in base :math:`B` (more than the clients in the sum): entry :math:`e` is
    :math:`\Delta\sum_{j<b}f_{eb+j}B^j`, a grid value, after the flags one more 1 (every client
    sends it: its count is the number of clients in the sum, public) marking where they end. The
    secure sum of the packed entries is :math:`\Delta\sum_jh_jB^j` with :math:`h_j\le n<B` the
    counts -- exact (integers on Flower's grid), no carry between digits: :func:`unpack_counts`
    reads back exactly the counts the unpacked round would give, nothing else."""
    b = flags_per_entry(base, clipping_range, quantization_range)
    f = np.append(np.asarray(flags, float), 1.0)
    f = np.append(f, np.zeros(-f.size % b)).reshape(-1, b)
    return (f @ (float(base) ** np.arange(b))) * (2.0 * clipping_range / quantization_range)


def unpack_counts(total: np.ndarray, base: int, clipping_range: float, quantization_range: int) -> np.ndarray:
    """The per-entry counts from the secure sum of :func:`pack_flags` vectors (the digits of
    each entry in base ``base``, up to the end mark)."""
    b = flags_per_entry(base, clipping_range, quantization_range)
    m = np.rint(np.asarray(total, float) / (2.0 * clipping_range / quantization_range)).astype(np.int64)
    digits = ((m[:, None] // (np.int64(base) ** np.arange(b))) % base).ravel()
    last = np.flatnonzero(digits)
    return digits[:last[-1]] if last.size else digits[:0]


def stage_scale(clipping_range: float, quantization_range: int) -> float:
    r"""The scale of a refinement stage: a residual (at most :math:`\Delta/2`) divided by it stays
    within :math:`[-c/2, c/2]`."""
    return 2.0 * clipping_range / quantization_range / clipping_range


@dataclass
class SumOnlyChannel:
    """The server's only way to the clients in private mode: :meth:`sum` broadcasts a query and
    public parameters, every client computes its vector (``clients[i].contribution(query, **params)``,
    through a :class:`SumClient`), and the server receives the sum, quantized, masked and summed
    by Flower's arithmetic (module docstring). ``seen`` records every array the server received;
    ``bytes_per_client`` counts the masked vectors a client uploads (4 bytes an entry, modulus
    :math:`2^{32}`; SecAgg+'s key and share exchange is not counted). ``min_contributors``: the
    guard of :meth:`sum` for every sum that does not set its own (0 or 1: none; the private routes
    set it). Subclasses replace :meth:`_transport` (e.g. Flower's real SecAgg+)."""

    clients: list
    clipping_range: float = FLOWER_CLIPPING_RANGE
    quantization_range: int = FLOWER_QUANTIZATION_RANGE
    modulus_range: int = FLOWER_MODULUS_RANGE
    stages: int = 2
    widen: float = 2.0 ** 10
    max_widenings: int = 6
    seed: int = 0
    min_contributors: int = 0
    seen: list = field(default_factory=list)
    bytes_per_client: int = 0
    secure_sums: int = 0

    def __post_init__(self):
        n = len(self.clients)
        if n < 2:
            raise InvalidParameterError(f"clients must hold at least 2 clients for a secure sum; got {n}")
        if not (np.isfinite(self.clipping_range) and self.clipping_range > 0):
            raise InvalidParameterError(f"clipping_range must be a positive finite number; got {self.clipping_range}")
        if int(self.quantization_range) != self.quantization_range or self.quantization_range < 2:
            raise InvalidParameterError(f"quantization_range must be an integer >= 2; got {self.quantization_range}")
        if not grid_exact(self.clipping_range, self.quantization_range):
            raise InvalidParameterError(
                f"clipping_range and quantization_range must make 2c / quantization_range a power of two that "
                f"divides c (Flower's defaults 8 and 2**22 do); got {self.clipping_range} and "
                f"{self.quantization_range}: otherwise Flower's stochastic rounding moves the clients' grid values "
                f"and their residuals are no longer exact")
        if n * (self.quantization_range + 1) >= self.modulus_range:
            raise InvalidParameterError(
                f"n * (quantization_range + 1) = {n * (self.quantization_range + 1)} must stay below "
                f"modulus_range = {self.modulus_range}, or the modular sum wraps around")
        if n * self.quantum >= 0.5:
            raise InvalidParameterError(
                f"n * 2c / quantization_range = {n * self.quantum:g} must be below 0.5 (the clipping count is read "
                f"by rounding); raise quantization_range")
        if not 1 <= int(self.stages) <= 4:
            raise InvalidParameterError(f"stages must be in 1..4; got {self.stages}")
        if not self.widen > 1:
            raise InvalidParameterError(f"widen must be > 1; got {self.widen}")
        self._sum_clients = [SumClient(c, self.clipping_range, self.quantization_range) for c in self.clients]
        for sc in self._sum_clients:        # in-process: the values round reuses the count round's vector
            sc.reuse = True
        self._rngs = [np.random.RandomState(np.random.SeedSequence([self.seed, i]).generate_state(1)[0])
                      for i in range(n)]

    @property
    def n(self) -> int:
        return len(self.clients)

    @property
    def quantum(self) -> float:
        """:math:`\\Delta=2c/T`."""
        return 2.0 * self.clipping_range / self.quantization_range

    def _transport(self, query: str, stage: int, scale, params: dict, floor=None,
                   holders: int = 0) -> tuple[np.ndarray, int]:
        """One secure-aggregation round: every client's :meth:`SumClient.answer`, quantized by
        Flower's ``quantize`` (a no-op on grid values), summed modulo :math:`M` (the masks cancel
        there) and dequantized as SecAgg+ does. Returns the sum with its last entry (the clip count)
        and the number of clients in it."""
        c, T = self.clipping_range, self.quantization_range
        total = None
        for i, client in enumerate(self._sum_clients):
            q = flower_quantize(client.answer(query, stage, scale, params, floor, holders), c, T, self._rngs[i])
            total = q.astype(np.int64) if total is None else total + q
        total %= self.modulus_range
        return flower_dequantize_sum(total, self.n, c, T), self.n

    def _aggregate(self, query: str, stage: int, scale, params: dict, floor=None,
                   holders: int = 0) -> tuple[np.ndarray, int, int]:
        out, n = self._transport(query, stage, scale, params, floor, holders)
        self.bytes_per_client += 4 * out.size
        self.secure_sums += 1
        clipped = int(np.rint(out[-1]))
        self.seen.append(_Seen(query + (" (holders)" if holders else ""), stage, out.copy(), clipped))
        return out[:-1], clipped, n

    def _error(self, n: int, s: np.ndarray, units: list, value: np.ndarray) -> np.ndarray:
        """The per-entry bound on :math:`|\\widehat S-\\sum_ix_i|`: the last stage's rounding to the
        nearest grid point, :math:`n\\Delta/2`, the floating point of every stage's residuals and
        dequantization, :math:`n(6uc+2u\\Delta)`, the division by the scale :math:`unc\\,s` and the
        accumulation :math:`2(k+1)u|\\widehat S|`, each in the units of its stage (module docstring)."""
        c, delta = self.clipping_range, self.quantum
        error = n * (0.5 * delta + 4 * _U * c) * units[-1]
        for unit in units:
            error = error + n * (6 * _U * c + 2 * _U * delta) * unit
        error = error + _U * n * c * s + 2 * (len(units) + 1) * _U * np.abs(value)
        return error * (1 + 16 * _U)

    def sum(self, query: str, scale=1.0, stages: int | None = None, min_contributors: int | None = None,
            **params) -> SecureSum:
        """:math:`\\sum_i` ``clients[i].contribution(query, **params)`` with its error bound; ``scale``
        (a number or one per entry, public) is the first guess of the entries' magnitude, widened
        while a client would clip; ``stages`` (default the channel's) the secure-aggregation rounds
        after the first (1 suffices for counts: the error :math:`n\\Delta/2<\\tfrac12`).

        ``min_contributors`` :math:`k` (**the guard**): every client sends 0 for an entry below the
        public floor :math:`\\phi` (4 times its share of the last stage's rounding, times the scale;
        the :math:`n\\phi` this moves the sum is in ``error``), and first, in a round of its own, a 1
        for each entry it would send nonzero (packed in base :math:`n+1`, :func:`pack_flags`: the
        server reads back exactly the counts). When some entry would hold between 1 and :math:`k-1`
        clients' nonzero terms the values are never asked: :class:`SumWithheld` (with the counts).
        Otherwise no entry of the sum is fewer than :math:`k` clients' terms, each at least
        :math:`\\phi` -- above the sum's resolution, so no entry equals one client's own term within
        its rounding. (A term far larger than the other :math:`k-1` still dominates its entry.)"""
        n_stages = int(self.stages if stages is None else stages)
        if not 1 <= n_stages <= 4:
            raise InvalidParameterError(f"stages must be in 1..4; got {stages}")
        k = int(self.min_contributors if min_contributors is None else min_contributors)
        if not 0 <= k <= self.n:
            raise InvalidParameterError(f"min_contributors must be in 0..{self.n} (the clients); got {k}")
        k = k if k >= 2 else None                      # 0 and 1: no guard (counts, or the user's choice)
        s = np.asarray(scale, float)
        if not np.all(np.isfinite(s) & (s > 0)):
            raise InvalidParameterError("scale must be positive and finite")
        step = stage_scale(self.clipping_range, self.quantization_range)
        # the floor (scaled units): 2.5 times the whole sum's error bound at unit scale, so a second
        # client's term in an entry always shows above the sum's resolution
        floor = None if k is None else 2.5 * float(self._error(self.n, np.ones(1), [step ** j for j in range(n_stages)],
                                                            np.zeros(1))[0])
        rounds = 0
        for widening in range(self.max_widenings + 1):
            if k is not None:
                # the counts packed n + 1 to a base, several an entry (pack_flags): the same counts, fewer bytes
                held, _, n_held = self._aggregate(query, 0, s, params, floor, holders=self.n + 1)
                rounds += 1
                held = unpack_counts(held, self.n + 1, self.clipping_range, self.quantization_range)
                if np.any((held >= 1) & (held < k)):
                    raise SumWithheld(query, held, k)
            first, clipped, n = self._aggregate(query, 0, s, params, floor)
            rounds += 1
            if k is not None and n != n_held:
                raise InvalidParameterError(
                    f"the secure sum of {query!r}: {n_held} clients answered the guard's count and {n} the values "
                    f"(a dropout in between); the count no longer describes the sum, so it is not used")
            if clipped == 0:
                break
            s = s * self.widen
        else:
            raise SumStillClips(query, clipped, self.max_widenings, self.widen)
        s = np.broadcast_to(s, first.shape).astype(float)
        value = first * s
        unit, units = s.copy(), [s.copy()]
        for stage in range(1, n_stages):
            unit = unit * step
            part, clipped, n_stage = self._aggregate(query, stage, None, params)
            rounds += 1
            if clipped or n_stage != n:
                raise InvalidParameterError(
                    f"stage {stage} of the secure sum of {query!r}: " +
                    (f"a residual left its range at {clipped} client(s)" if clipped else
                     f"{n_stage} clients answered, {n} at stage 0 (a dropout between stages)"))
            value = value + part * unit
            units.append(unit.copy())
        error = self._error(n, s, units, value)
        floor_error = np.zeros_like(error) if floor is None else n * floor * s * (1 + 4 * _U)
        return SecureSum(value, error + floor_error, query, n, rounds, widening, floor_error)

    def to_dict(self) -> dict:
        return {"clients": self.n, "clipping_range": self.clipping_range,
                "quantization_range": self.quantization_range, "modulus_range": self.modulus_range,
                "stages": int(self.stages), "secure_sums": self.secure_sums,
                "bytes_per_client": self.bytes_per_client,
                "seen": [s.to_dict() for s in self.seen]}
