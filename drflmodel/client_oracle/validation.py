r"""Every client answer validated at the server, before any route uses it: :class:`CheckedChannel`
wraps a client-oracle channel and passes each reply through the checks of
:mod:`.checks` -- alone, and against the same client's earlier answers
(:class:`ClientBook`).

An answer that fails a check is treated as a failed answer: the channel asks that client again
(a one-off glitch -- a NaN, a garbled message -- is retried within the retry budget, like a lost
message) and only an answer that passes is kept. A client whose answers keep failing exhausts the
budget and the query raises :class:`~drflmodel.client_oracle.ClientFault` of kind ``"rejected"``,
with the check and its numbers (its reasons read ``"answer rejected by the server's check
'first-order convexity': ..."``); every rejection is also kept in :attr:`CheckedChannel.rejections`
(client, query, check, numbers).

**Adding a check** (e.g. for a new query kind): write it in :mod:`.checks` as one function returning
``None`` or a :class:`~.checks.Violation`, and call it from the :class:`ClientBook` handler of the
query (``_<query>``: ``_hvp`` for Hessian-vector products, which already runs the PSD, symmetry and
Hessian-agreement checks); :meth:`ClientBook.keep` stores what later answers are checked against.

What the checks cannot see: a client that answers, every time and consistently, for another convex
function -- other rows, rows scaled or duplicated -- passes them all. The certificate then holds for
the functions the clients answered for; the channel's locks (TLS, registered SuperNodes) and the
clients' policies decide who may answer at all.
"""

from __future__ import annotations

import json
from collections import OrderedDict

import numpy as np

from .._memory import HESSIAN_BYTES
from ..losses import Loss
from ..problems.registry import client_query
from . import checks as check
from .channel import Channel
from .protocol import REJECTED, ClientFault, unpack_symmetric

__all__ = ["ClientBook", "CheckedChannel", "validate_replies"]

#: answers kept per client for the consistency checks (the most recent points)
KEPT = 64
#: Hessian-vector products kept per point (the most recent: a conjugate-gradient solve asks hundreds at
#: one point, and each new one is checked against every kept one)
KEPT_PRODUCTS = 16


def _triu_size(n: int) -> int:
    return n * (n + 1) // 2


def _untriu(v, P: int) -> np.ndarray:
    return unpack_symmetric(np.asarray(v, float).reshape(-1), P)


class ClientBook:
    """One client's declaration and answers so far, and the checks of a new answer against them.

    ``loss`` is the server problem's loss (the client declared the same one, or the setup refused it)."""

    def __init__(self, loss: Loss | None = None):
        self.loss = loss
        self.rows: int | None = None
        self.features: int | None = None
        self.outputs = 1
        self.ones_columns: list[int] = []
        self.row_norm: float | None = None
        self.zero_msn: float | None = None            # mean ||x||^2 read off the Hessian at theta = 0 (softmax)
        self.records: OrderedDict[bytes, check.AnswerRecord] = OrderedDict()
        self._last_hessian: tuple | None = None       # the Hessian the checks just unpacked (see _hessian)

    # ------------------------------------------------------------------ what is known
    @property
    def dim(self) -> int | None:
        return None if self.features is None else self.features * self.outputs

    def _record(self, theta) -> check.AnswerRecord:
        theta = np.asarray(theta, float)
        key = theta.tobytes()
        if key not in self.records:
            self.records[key] = check.AnswerRecord(theta.copy())
            while len(self.records) > KEPT:
                self.records.popitem(last=False)
        self.records.move_to_end(key)
        return self.records[key]

    def _zero_level(self) -> float | None:
        """:math:`\\ell(0)` when a classification loss takes one value at score 0 for every label."""
        loss = self.loss
        if loss is None or loss.task == "regression":
            return None
        K = self.outputs
        S = np.zeros((2 if K == 1 else K, max(K, 1)))
        labels = np.array([-1.0, 1.0]) if K == 1 else np.arange(K, dtype=float)
        levels = np.asarray(loss.block_value(S, labels), float)
        return float(levels[0]) if np.allclose(levels, levels[0], rtol=0, atol=0) else None

    @property
    def magnitudes(self) -> check.Magnitudes:
        """What the checks' rounding allowances are made of (:class:`.checks.Magnitudes`)."""
        loss = self.loss
        return check.Magnitudes(rows=self.rows or 1, dim=self.dim or 1, outputs=self.outputs,
                                row_norm=self.row_norm_used, mean_squared_norm=self.zero_msn,
                                lipschitz=float(getattr(loss, "lipschitz", np.inf)),
                                smoothness=float(getattr(loss, "smoothness", np.inf)))

    @property
    def row_norm_used(self) -> float | None:
        r"""The row norm the allowances use: the declared :math:`R`, capped by what the client's own
        Hessian at :math:`\theta=0` reveals when it does (softmax: its trace is
        :math:`\frac{K-1}K q`, :math:`q=\frac1N\sum_j\|x_j\|^2`): :math:`\max_j\|x_j\|^2\le\sum_j\|x_j\|^2=Nq`,
        so :math:`R\le\sqrt{Nq}`. An honest client's :math:`R` is never above the cap; a client that
        inflates its row norm to loosen its own checks gains at most :math:`\sqrt{Nq}/R_{\rm true}\le\sqrt N`
        once the cap is known. Without it (scalar losses, no Hessian at zero) the declared :math:`R` is
        used as it is: inflating it by :math:`c` loosens the value and gradient allowances by :math:`c` and
        the Hessian ones by :math:`c^2` (all of them rounding-sized, :math:`\gamma_m` times the magnitudes),
        and only makes the self-concordance bounds that read it more conservative."""
        if self.row_norm is None or self.zero_msn is None or self.rows is None:
            return self.row_norm
        cap = float(np.sqrt(self.rows * self.zero_msn)) * (1.0 + check.gamma(self.rows + (self.dim or 1) + 16))
        return min(self.row_norm, cap)

    # ------------------------------------------------------------------ one new answer
    def validate(self, query: str, request: dict, options: dict, answer: dict) -> check.Violation | None:
        """The first failed check of ``answer`` (to ``query`` at ``request``), or ``None``."""
        for name, value in answer.items():
            if isinstance(value, str):
                continue
            bad = check.finite(name, value)
            if bad:
                return bad
        declared = client_query(query)            # a family's own query: its declared sizes and check
        if declared is not None:
            known = {"features": self.features, "outputs": self.outputs} if self.features is not None else None
            for name, size in declared.sizes(known).items():
                bad = (check.Violation("shape", f"the {query!r} answer has no {name!r}") if name not in answer
                       else check.shape(name, answer[name], size) if size is not None else None)
                if bad:
                    return bad
            why = declared.validate(request, options, answer)
            return None if why is None else check.Violation("declared", f"{query}: {why}")
        handler = getattr(self, f"_{query}", None)
        return handler(request, options, answer) if handler is not None else None

    def _hessian(self, answer: dict, P: int, *, checked: bool = False) -> np.ndarray:
        """The full Hessian of an answer's upper triangle. The checks unpack it; ``checked=True`` (the
        record of the answer just checked, with no client code run in between) reuses that matrix
        instead of a second P x P pass, once."""
        triangle = answer["hessian"]
        cached, self._last_hessian = self._last_hessian, None
        if checked and cached is not None and cached[0] is triangle:
            return cached[1]
        H = _untriu(triangle, P)
        if not checked:
            self._last_hessian = (triangle, H)
        return H

    def keep(self, query: str, request: dict, options: dict, answer: dict) -> None:
        """Remember an answer that passed (its point, value, gradient, Hessian, HVP; the declaration)."""
        if query == "describe":
            self.rows = int(np.asarray(answer["rows"]).reshape(-1)[0])
            self.features = int(np.asarray(answer["features"]).reshape(-1)[0])
            self.outputs = int(np.asarray(answer.get("outputs", [1])).reshape(-1)[0])
            self.ones_columns = [int(c) for c in np.asarray(answer.get("ones_columns", []), float).reshape(-1)]
            if self.loss is None and "loss" in answer:
                from ..losses import get

                spec = json.loads(str(answer["loss"]))
                spec.pop("task", None)
                self.loss = get(spec.pop("name"), **spec)
        elif query == "row_norm":
            self.row_norm = float(np.asarray(answer["max_row_norm"]).reshape(-1)[0])
        elif query == "values":
            points = np.asarray(request["theta"], float).reshape(-1, self.dim or np.size(request["theta"]))
            for t, v in zip(points, np.asarray(answer["value"], float).reshape(-1)):
                self._record(t).value = float(v)
        elif query == "evaluate":
            rec = self._record(request["theta"])
            rec.value = float(np.asarray(answer["value"]).reshape(-1)[0])
            rec.gradient = np.asarray(answer["gradient"], float).reshape(-1)
            if "hessian" in answer:
                rec.hessian = self._hessian(answer, rec.gradient.size, checked=True)
                if self.zero_msn is None and not np.any(rec.theta):
                    self.zero_msn = check.mean_squared_norm_at_zero(rec.hessian, self.outputs)
                self._bound_hessians()
            if "hvp" in answer and "directions" in request:      # products asked with the evaluation
                V = np.asarray(request["directions"], float).reshape(-1, rec.gradient.size)
                rec.hvps += list(zip(V, np.asarray(answer["hvp"], float).reshape(V.shape)))
                del rec.hvps[:-KEPT_PRODUCTS]
        elif query == "hvp":
            rec = self._record(request["theta"])
            rec.hvps.append((np.asarray(request["direction"], float).reshape(-1),
                             np.asarray(answer["hvp"], float).reshape(-1)))
            del rec.hvps[:-KEPT_PRODUCTS]

    def _bound_hessians(self) -> None:
        """Drop the Hessians of older records beyond :data:`HESSIAN_BYTES` (newest first; the latest is
        always kept). What is checked against them afterwards: the later answers are still checked
        alone and against the kept values, gradients and products; only the comparisons with a dropped
        Hessian (curvature against gradient differences, products against it) are no longer made."""
        kept = 0
        for rec in reversed(self.records.values()):
            if rec.hessian is None:
                continue
            if kept and kept + rec.hessian.nbytes > HESSIAN_BYTES:
                rec.hessian = None
            else:
                kept += rec.hessian.nbytes

    # ------------------------------------------------------------------ per query
    def _describe(self, request, options, answer):
        rows = np.asarray(answer.get("rows", [np.nan]), float).reshape(-1)
        if rows.size != 1 or rows[0] < 1 or rows[0] != np.round(rows[0]):
            return check.Violation("declaration", f"rows = {rows.tolist()} is not one positive integer")
        return None

    def _row_norm(self, request, options, answer):
        r = np.asarray(answer["max_row_norm"], float).reshape(-1)
        return check.shape("max_row_norm", r, 1) or (
            check.Violation("declaration", f"max_j ||x_j|| = {r[0]:.6g} < 0") if r[0] < 0 else None)

    def _value_checks(self, theta, value) -> check.Violation | None:
        mags = self.magnitudes
        bad = check.value_range(value, magnitudes=mags, theta=theta)
        if bad:
            return bad
        if not np.any(theta):
            level = self._zero_level()
            if level is not None:
                bad = check.value_at_zero(value, level, mags)
                if bad:
                    return bad
        key = np.asarray(theta, float).tobytes()
        old = self.records.get(key)
        if old is not None and old.value is not None:
            bad = check.same_value(theta, old.value, value, mags)
            if bad:
                return bad
        lip = getattr(self.loss, "lipschitz", np.inf)
        for rec in self.records.values():
            if rec.value is not None and self.row_norm is not None and np.isfinite(lip):
                bad = check.value_lipschitz(rec.theta, rec.value, theta, value, lip, self.row_norm_used, mags)
                if bad:
                    return bad
            if rec.gradient is not None:
                bad = check.first_order_convexity(rec.theta, rec.value, rec.gradient, theta, value, mags)
                if bad:
                    return bad
        return None

    def _values(self, request, options, answer):
        P = self.dim or np.size(request["theta"])
        points = np.asarray(request["theta"], float).reshape(-1, P)
        values = np.asarray(answer["value"], float).reshape(-1)
        bad = check.shape("value", values, points.shape[0])
        if bad:
            return bad
        for t, v in zip(points, values):
            bad = self._value_checks(t, float(v))
            if bad:
                return bad
        return None

    def _evaluate(self, request, options, answer):
        theta = np.asarray(request["theta"], float).reshape(-1)
        P = theta.size
        value = np.asarray(answer["value"], float).reshape(-1)
        grad = np.asarray(answer["gradient"], float).reshape(-1)
        bad = check.shape("value", value, 1) or check.shape("gradient", grad, P)
        if options.get("hessian") or "hessian" in answer:
            bad = bad or check.shape("hessian (upper triangle)", answer.get("hessian", []), _triu_size(P))
        if bad:
            return bad
        if "directions" in request or "hvp" in answer:         # products asked with the evaluation
            V = np.asarray(request.get("directions", []), float).reshape(-1, P)
            hv = np.asarray(answer.get("hvp", []), float).reshape(-1)
            bad = check.shape("hvp", hv, V.size)
            for v, h in ([] if bad else zip(V, hv.reshape(V.shape))):
                bad = bad or check.hvp_psd(v, h, self.magnitudes)
            if bad:
                return bad
        loss, R = self.loss, self.row_norm_used
        mags = self.magnitudes
        bad = self._value_checks(theta, float(value[0])) or check.gradient_length(
            grad, getattr(loss, "lipschitz", np.inf), R, mags, theta, float(value[0]))
        if bad:
            return bad
        H = self._hessian(answer, P) if "hessian" in answer else None
        if H is not None:
            bad = check.hessian_psd(H, mags) or check.hessian_size(H, getattr(loss, "smoothness", np.inf), R, mags)
            if not bad and not np.any(theta) and self.row_norm is not None:
                bad = check.row_norm_covers_mean(self.row_norm, H, self.outputs)
            if bad:
                return bad
        if "allowance" in answer or options.get("bound_terms"):     # the bound terms asked with the evaluation
            bad = self._riding_bound_terms(theta, options, answer, float(value[0]), grad)
            if bad:
                return bad
        M = getattr(loss, "self_concordance", None)
        mine = self.records.get(theta.tobytes())        # products already answered at this point
        products = list(mine.hvps) if mine is not None else []
        for rec in self.records.values():
            if np.array_equal(rec.theta, theta):
                continue
            if rec.value is not None:                   # the new tangent under every kept value
                bad = check.first_order_convexity(theta, float(value[0]), grad, rec.theta, rec.value, mags)
            if not bad and rec.gradient is not None:
                vals = (rec.value if rec.value is not None else 0.0, float(value[0]))
                bad = check.monotone_gradients(rec.theta, rec.gradient, theta, grad, mags, vals)
                if not bad and H is not None:
                    bad = check.curvature_matches_gradients(theta, grad, H, rec.theta, rec.gradient, M, R, mags,
                                                            vals[::-1])
                if not bad and rec.hessian is not None:
                    bad = check.curvature_matches_gradients(rec.theta, rec.gradient, rec.hessian, theta, grad, M, R,
                                                            mags, vals)
                for u, hu in ([] if bad else rec.hvps):
                    bad = bad or check.hvp_matches_gradients(rec.theta, u, hu, rec.gradient, theta, grad, M, R,
                                                             mags, vals)
                for u, hu in ([] if bad else products):
                    bad = bad or check.hvp_matches_gradients(theta, u, hu, grad, rec.theta, rec.gradient, M, R,
                                                             mags, vals[::-1])
            if bad:
                return bad
        return None

    def _hvp(self, request, options, answer):
        v = np.asarray(request["direction"], float).reshape(-1)
        hv = np.asarray(answer["hvp"], float).reshape(-1)
        mags = self.magnitudes
        bad = check.shape("hvp", hv, v.size) or check.hvp_psd(v, hv, mags)
        if bad:
            return bad
        rec = self.records.get(np.asarray(request["theta"], float).tobytes())
        if rec is not None:
            if rec.hessian is not None:
                bad = check.hvp_matches_hessian(rec.hessian, v, hv, mags)
            for u, hu in rec.hvps:
                bad = bad or check.hvp_symmetry(u, hu, v, hv, mags)
            if rec.gradient is not None:                # against the gradient differences to every kept point
                M, R = getattr(self.loss, "self_concordance", None), self.row_norm_used
                for other in self.records.values():
                    if bad or other.gradient is None or other is rec:
                        continue
                    vals = (rec.value or 0.0, other.value or 0.0)
                    bad = check.hvp_matches_gradients(rec.theta, v, hv, rec.gradient, other.theta, other.gradient, M, R,
                                                      mags, vals)
        return bad

    def _riding_bound_terms(self, theta, options, answer, value, grad):
        """:func:`.checks.bound_terms` of the bound terms carried by an ``evaluate`` answer, against that
        answer's own value and gradient (the checks of a ``bound_terms`` answer at a point already
        evaluated)."""
        j0 = int(options.get("intercept_column", -1) if options.get("intercept_column") is not None else -1)
        intercepts = None
        if j0 >= 0 and self.features is not None:
            intercepts = grad[j0 + self.features * np.arange(self.outputs)]
        elif j0 >= 0:
            return check.Violation("shape", "bound terms before the client's declaration")
        smoothness = getattr(self.loss, "smoothness", float("inf"))
        return check.bound_terms(answer, self.outputs, smoothness, value, intercepts, theta, self.rows, self.features)

    def _bound_terms(self, request, options, answer):
        """:func:`.checks.bound_terms`, against this client's ``evaluate`` answer at the same point."""
        rec = self.records.get(np.asarray(request["theta"], float).tobytes())
        value = rec.value if rec is not None else None
        grad = None
        j0 = int(options.get("intercept_column", -1) if options.get("intercept_column") is not None else -1)
        if rec is not None and rec.gradient is not None and j0 >= 0 and self.features is not None:
            grad = rec.gradient[j0 + self.features * np.arange(self.outputs)]
        smoothness = getattr(self.loss, "smoothness", float("inf"))
        return check.bound_terms(answer, self.outputs, smoothness, value, grad, request["theta"], self.rows,
                                 self.features)

    def _statistics(self, request, options, answer):
        d = self.features
        gram, moment, yy = (np.asarray(answer[k], float).reshape(-1) for k in ("gram", "moment", "yy"))
        if d is not None:
            bad = (check.shape("gram (upper triangle)", gram, _triu_size(d)) or check.shape("moment", moment, d)
                   or check.shape("yy", yy, 1))
            if bad:
                return bad
        d = moment.size
        if gram.size != _triu_size(d) or yy.size != 1:
            return check.Violation("shape", f"gram has {gram.size} entries and yy {yy.size} for {d} features; "
                                            f"expected {_triu_size(d)} and 1")
        ones = self.ones_columns[0] if self.ones_columns else None
        return check.statistics_gram(_untriu(gram, d), moment, float(yy[0]), self.rows, ones,
                                     check.Magnitudes(rows=self.rows or 1, dim=d + 1))


def validate_replies(books: dict, query: str, contents: dict, replies: dict) -> tuple[dict, dict, list]:
    """Split ``replies`` (``{client: answer}`` to ``contents[client] = (request, options)``) into the
    answers that pass, the rejected ones (``{client: reason}``) and the rejections' records."""
    passed, rejected, records = {}, {}, []
    for i, answer in replies.items():
        request, options = contents[i]
        book = books[i]
        try:
            bad = book.validate(query, request, options, answer)
        except (KeyError, ValueError, TypeError, IndexError) as exc:   # an answer missing or garbling an array
            bad = check.Violation("shape", f"the answer cannot be read ({type(exc).__name__}: {exc})")
        if bad is None:
            book.keep(query, request, options, answer)
            passed[i] = answer
        else:
            rejected[i] = f"{REJECTED} {bad.check!r}: {bad.detail}"
            records.append({"client": int(i), "query": query, **bad.to_dict()})
    return passed, rejected, records


class CheckedChannel(Channel):
    """``inner`` (any client-oracle channel) with every reply validated (module docstring). Keeps the
    inner channel's retry budget and ledger; ``rejections`` lists every rejected answer."""

    def __init__(self, inner, loss: Loss | None = None):
        self.inner = inner
        self.n_clients, self.retries, self.ledger = inner.n_clients, inner.retries, inner.ledger
        self.books = {i: ClientBook(loss) for i in range(inner.n_clients)}
        self.rejections: list[dict] = []
        self._unread = 0

    def _send(self, query: str, contents: dict):
        replies, errors = self.inner._send(query, contents)
        unread = getattr(self.inner, "rejections", None)       # replies the transport could not read
        if unread is not None:
            self.rejections.extend(dict(r) for r in unread[self._unread:])
            self._unread = len(unread)
        passed, rejected, records = validate_replies(self.books, query, contents, replies)
        self.rejections.extend(records)
        return passed, {**errors, **rejected}

    def fault(self, client: int, query: str, reasons: list) -> ClientFault:
        """The inner transport's fault, with the check and the numbers of the client's last rejected
        answer to ``query`` when its last attempt was rejected."""
        fault = self.inner.fault(client, query, reasons)
        if fault.kind == "rejected":
            last = next((r for r in reversed(self.rejections) if r["client"] == client and r["query"] == query), None)
            if last is not None:
                fault.check, fault.numbers = last["check"], dict(last.get("numbers") or {})
        return fault

    def __getattr__(self, name):                     # the transport's own attributes (node_of, ...)
        return getattr(self.__dict__["inner"], name)
