r"""Reading a client's reply without trusting it: every array's declared size checked against what
the query asks **before** a byte is copied, then decoded as plain numbers (never a pickle, never
another framework's tensor), then its magnitude bounded -- so a malformed, oversized or garbled
reply is a named fault (:class:`Malformed`: the check and what was wrong), never a raw exception or
a gigabyte copy.

What a query's answer may hold (:func:`expected_sizes`), with :math:`P=dK` the model's size from
the client's own declaration, :math:`T(m)=m(m+1)/2` a triangle:

=============  ====================================================================================
query          arrays and their exact number of floats
=============  ====================================================================================
describe       rows 1, features 1, outputs 1, ones_columns :math:`\le d`, classes_present :math:`K`
row_norm       max_row_norm 1
values         value: one per point of the request (:math:`|\theta|/P`)
evaluate       value 1, gradient :math:`P`, hessian :math:`T(P)` (when asked), hvp :math:`qP` (with
               :math:`q` ``directions``), the arrays of ``bound_terms`` (with the option
               ``bound_terms``; ``column_squares`` with ``columns`` too)
hvp            hvp :math:`P`
statistics     gram :math:`T(d)`, moment :math:`d`, yy 1
bound_terms    allowance 4, feature_norm 1, intercept_value 1, intercept_gradient :math:`K`,
               intercept_hessian :math:`T(K)` (the last four with an intercept column),
               column_squares :math:`d` (when asked with ``columns``: the preconditioner)
a family's     every array its declaration names (:class:`~drflmodel.problems.registry.ClientQuery`),
own query      of the size declared in :math:`P`, :math:`d`, :math:`K` or as a count: read only
               after the client's declaration when the size depends on it
=============  ====================================================================================

An array is read from Flower's wire form (an ``Array``: ``stype``, ``shape``, ``dtype``, ``data``
holding NumPy's ``.npy`` bytes), duck-typed so that this module imports no Flower: the declared
shape is compared with the expected count (Python integers: a declared :math:`10^{300}` does not
overflow), then the ``.npy`` header alone is parsed (:func:`numpy.lib.format.read_array_header_1_0`,
no pickle) and must agree with the declared shape, hold a real numeric dtype and exactly the bytes
that shape needs; only then are the bytes viewed (:func:`numpy.frombuffer`, no copy) and converted
once to float64. Checking costs :math:`O(1)` time and memory before the conversion, whose size the
query fixed.

**Magnitude.** Every entry must be finite and at most :data:`MAX_MAGNITUDE` :math:`=10^{100}` in
absolute value: a route multiplies answers by each other and sums up to :math:`10^8` such products,
which stays below float64's :math:`1.8\cdot10^{308}` only if entries stay below about
:math:`10^{150}`; no data term of real rows comes near :math:`10^{100}`.
"""

from __future__ import annotations

import io
import json
import math

import numpy as np

from ..problems.registry import client_query

__all__ = ["Malformed", "MAX_MAGNITUDE", "MAX_ANSWER_FLOATS", "MAX_ROWS", "expected_sizes", "decode_array",
           "decode_answer", "check_declaration", "TEXT_KEYS"]

#: the largest absolute value an answer's entry may have (module docstring)
MAX_MAGNITUDE = 1e100
#: the default cap on one answer's floats (512 MiB of float64): a query asking more is refused by the
#: server before it is sent, an answer declaring more is rejected before it is read
MAX_ANSWER_FLOATS = 2**26
#: the most rows a client may declare (float64 counts integers exactly up to 2**53)
MAX_ROWS = 2**53
#: protocol text a reply may carry, per query, and the longest text accepted
TEXT_KEYS = {"describe": ("loss", "answers")}
MAX_TEXT = 4096
_SCALAR_KINDS = "fiub"                   # real numbers (and booleans) only: no object, text, complex


class Malformed(Exception):
    """A reply that cannot be read as the answer its query asks: ``check`` (``"decode"``,
    ``"shape"`` (not the number of entries the query asks), ``"size"`` (beyond the cap), ``"finite"``, ``"magnitude"``, ``"declaration"``, ``"identity"``), ``detail``
    (what was wrong, in words) and ``numbers``."""

    def __init__(self, check: str, detail: str, numbers: dict | None = None):
        self.check, self.detail, self.numbers = str(check), str(detail), dict(numbers or {})
        super().__init__(f"{self.check}: {self.detail}")


def _triangle(m: int) -> int:
    return m * (m + 1) // 2


def _size_of(request: dict, key: str) -> int:
    return int(np.size(request.get(key, [])))


def expected_sizes(query: str, request: dict | None, options: dict | None, declared: dict | None) -> dict:
    """``{array: (floats, required)}`` of the answer to ``query`` asked with ``request`` (its arrays)
    and ``options``, for a client that declared ``declared = {"features": d, "outputs": K}`` (module
    docstring). ``floats`` is ``None`` where it follows from another array of the answer or the request
    (``ones_columns``: at most :math:`d`; before any declaration: the values' count divides
    :math:`|\theta|`, the gram is the moment's triangle, the intercept Hessian the gradient's), checked
    by :func:`decode_answer` once those are read."""
    request, options, declared = request or {}, options or {}, declared or {}
    d, K = declared.get("features"), declared.get("outputs")
    P = None if d is None else int(d) * int(K or 1)
    if query == "describe":
        return {"rows": (1, True), "features": (1, True), "outputs": (1, True), "ones_columns": (None, True),
                "classes_present": (None, False)}
    if query == "row_norm":
        return {"max_row_norm": (1, True)}
    if query == "values":            # without a declaration: one value per point, P unknown (checked below)
        size = _size_of(request, "theta")
        return {"value": (size // P if P else None, True)}
    if query == "evaluate":
        size = _size_of(request, "theta")
        hessian = bool(options.get("hessian"))
        out = {"value": (1, True), "gradient": (size, True), "hessian": (_triangle(size), hessian),
               "hvp": (_size_of(request, "directions"), "directions" in request)}
        if options.get("bound_terms"):   # the bound terms asked with the evaluation: their own sizes
            out.update(expected_sizes("bound_terms", request, options, declared))
        return out
    if query == "hvp":
        return {"hvp": (_size_of(request, "direction"), True)}
    if query == "statistics":        # without a declaration: d from the moment (checked below)
        return {"gram": (None if d is None else _triangle(int(d)), True), "moment": (None if d is None else int(d), True),
                "yy": (1, True)}
    if query == "bound_terms":
        j0 = options.get("intercept_column")
        with_intercept = j0 is not None and int(j0) >= 0
        k = None if K is None else int(K)          # without a declaration: K from the gradient (checked below)
        return {"allowance": (4, True), "feature_norm": (1, with_intercept), "intercept_value": (1, with_intercept),
                "intercept_gradient": (k, with_intercept),
                "intercept_hessian": (None if k is None else _triangle(k), with_intercept),
                "column_squares": (None if d is None else int(d), bool(options.get("columns")))}
    family_query = client_query(query)        # a family's own query: the sizes it declared
    if family_query is not None:
        sizes = family_query.sizes(declared)
        unknown = [a for a, n in sizes.items() if n is None]
        if unknown:
            raise Malformed("declaration", f"the size of {', '.join(unknown)} in the {query!r} answer follows from "
                                           "the client's declaration, and the client has declared nothing yet")
        return {a: (n, True) for a, n in sizes.items()}
    raise Malformed("decode", f"unknown query {query!r}")


def _declared_shape(name: str, array) -> tuple:
    shape = getattr(array, "shape", None)
    if not isinstance(shape, (tuple, list)) or len(shape) > 8 or not all(
            isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0 for s in shape):
        raise Malformed("decode", f"{name}: declared shape {shape!r} is not a tuple of at most 8 non-negative integers")
    return tuple(int(s) for s in shape)


def decode_array(name: str, array, floats: int | None, cap: int = MAX_ANSWER_FLOATS) -> np.ndarray:
    """The float64 vector of one wire array (a Flower ``Array``, duck-typed) holding exactly
    ``floats`` numbers (``None``: any number up to ``cap``); :class:`Malformed` otherwise, raised
    before any copy when the declared size is wrong (module docstring)."""
    stype = getattr(array, "stype", None)
    if stype != "numpy.ndarray":
        raise Malformed("decode", f"{name}: serialization type {stype!r}; only NumPy's 'numpy.ndarray' is read",
                        {"stype": str(stype)[:80]})
    shape = _declared_shape(name, array)
    count = math.prod(shape)                         # Python integers: no overflow
    if floats is not None and count != floats:
        raise Malformed("shape", f"{name} declares {count} entries (shape {list(shape)}); the query asks {floats}",
                        {"declared": float(count), "expected": float(floats)})
    if count > cap:
        raise Malformed("size", f"{name} declares {count} entries; at most {cap} are read here",
                        {"declared": float(count), "cap": float(cap)})
    data = getattr(array, "data", None)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise Malformed("decode", f"{name}: its data is {type(data).__name__}, not bytes")
    stream = io.BytesIO(memoryview(data)[:65536 + 16].tobytes())   # the header only
    try:
        version = np.lib.format.read_magic(stream)
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        if version not in ((1, 0), (2, 0), (3, 0)):
            raise ValueError(f"unsupported .npy version {version}")
        header_shape, fortran, dtype = reader(stream)
    except Exception as exc:  # noqa: BLE001 - any unreadable header is the same fault, named
        raise Malformed("decode", f"{name}: not a .npy array ({type(exc).__name__}: {str(exc)[:200]})") from None
    if tuple(header_shape) != shape:
        raise Malformed("decode", f"{name}: its bytes hold shape {list(header_shape)} but it declares {list(shape)}")
    if dtype.kind not in _SCALAR_KINDS or dtype.hasobject or dtype.fields is not None or dtype.itemsize > 16:
        raise Malformed("decode", f"{name}: dtype {dtype.str!r} is not a real number type (pickled objects, text "
                                  "and structured records are not read)", {"dtype": dtype.str})
    offset = stream.tell()
    if len(data) - offset != count * dtype.itemsize:
        raise Malformed("decode", f"{name}: {len(data) - offset} data bytes for {count} entries of {dtype.itemsize} "
                                  "bytes (truncated or padded)",
                        {"bytes": float(len(data) - offset), "expected": float(count * dtype.itemsize)})
    view = np.frombuffer(data, dtype=dtype, count=count, offset=offset)
    out = (view.reshape(shape, order="F") if fortran and len(shape) > 1 else view).astype(np.float64).reshape(-1)
    finite = np.isfinite(out)
    if not finite.all():
        k = int(np.flatnonzero(~finite)[0])
        raise Malformed("finite", f"{name} has {int((~finite).sum())} non-finite entr"
                                  f"{'y' if (~finite).sum() == 1 else 'ies'} (first {out[k]} at {k})",
                        {"count": float((~finite).sum())})
    big = float(np.max(np.abs(out))) if out.size else 0.0
    if big > MAX_MAGNITUDE:
        raise Malformed("magnitude", f"{name} has an entry of absolute value {big:.3g} > {MAX_MAGNITUDE:g}",
                        {"largest": big, "bound": MAX_MAGNITUDE})
    return out


def _one_integer(answer: dict, key: str, low: int, high: int) -> int:
    v = float(answer[key][0])
    if v != round(v) or not low <= v <= high:
        raise Malformed("declaration", f"{key} = {v:g} is not an integer in [{low}, {high}]", {key: v})
    return int(v)


def check_declaration(answer: dict, cap: int = MAX_ANSWER_FLOATS) -> dict:
    """``{"features": d, "outputs": K}`` of a decoded ``describe`` answer, after checking its counts:
    rows an integer in :math:`[1, 2^{53}]`, :math:`d` and :math:`K` integers with :math:`dK\\le` ``cap``,
    ``ones_columns`` at most :math:`d` distinct column indices in :math:`[0, d)`, ``classes_present``
    :math:`K` zeros and ones; :class:`Malformed` (check ``"declaration"``) otherwise."""
    _one_integer(answer, "rows", 1, MAX_ROWS)
    d = _one_integer(answer, "features", 1, cap)
    K = _one_integer(answer, "outputs", 1, cap)
    if d * K > cap:
        raise Malformed("declaration", f"a model of {d} features x {K} outputs = {d * K} parameters exceeds the "
                                       f"cap of {cap} floats per answer", {"features": d, "outputs": K})
    ones = answer["ones_columns"]
    if ones.size > d or np.any(ones != np.round(ones)) or np.any(ones < 0) or np.any(ones >= d) \
            or np.unique(ones).size != ones.size:
        raise Malformed("declaration", f"ones_columns ({ones.size} entries) must be distinct column indices in "
                                       f"[0, {d - 1}]", {"entries": float(ones.size)})
    present = answer.get("classes_present")
    if present is not None and (present.size != K or not np.all(np.isin(present, (0.0, 1.0)))):
        raise Malformed("declaration", f"classes_present must be {K} zeros and ones; got {present.size} entries")
    return {"features": d, "outputs": K}


def decode_text(query: str, text) -> dict:
    """The protocol text of a reply (a ``ConfigRecord`` or ``None``): only :data:`TEXT_KEYS` of
    ``query``, strings of at most :data:`MAX_TEXT` characters; the ``describe`` reply's ``loss`` must
    be a JSON object naming the loss and its task."""
    allowed = TEXT_KEYS.get(query, ())
    if text is None:
        if allowed:
            raise Malformed("decode", f"the {query!r} reply has no text record (it must carry {', '.join(allowed)})")
        return {}
    out = {}
    for key in list(text.keys()):
        if key not in allowed:
            raise Malformed("decode", f"the {query!r} reply carries unexpected text {str(key)[:40]!r}")
        value = text[key]
        if not isinstance(value, str) or len(value) > MAX_TEXT:
            raise Malformed("decode", f"text {key!r} is not a string of at most {MAX_TEXT} characters")
        out[key] = value
    missing = [k for k in allowed if k not in out]
    if missing:
        raise Malformed("decode", f"the {query!r} reply has no {', '.join(missing)}")
    if query == "describe":
        try:
            loss = json.loads(out["loss"])
        except ValueError:
            raise Malformed("declaration", "the declared loss is not JSON") from None
        if not isinstance(loss, dict) or not isinstance(loss.get("name"), str) or not isinstance(loss.get("task"), str):
            raise Malformed("declaration", "the declared loss must be a JSON object with its 'name' and 'task'")
    return out


def decode_answer(query: str, arrays, text, request: dict | None, options: dict | None,
                  declared: dict | None, cap: int = MAX_ANSWER_FLOATS) -> dict:
    """The answer to ``query`` from a reply's arrays (a mapping name -> wire array, e.g. Flower's
    ``ArrayRecord``, or ``None``) and text: every expected array present and of its size, nothing
    else, every entry finite and bounded, the declaration's counts valid (module docstring).
    Returns ``{name: float64 vector, text key: str}``; raises :class:`Malformed`."""
    expect = expected_sizes(query, request, options, declared)
    if arrays is None:
        raise Malformed("decode", f"the {query!r} reply has no payload record")
    names = list(arrays.keys())
    extra = [str(n)[:40] for n in names if n not in expect]
    if extra:
        raise Malformed("decode", f"the {query!r} reply carries unexpected arrays {extra[:3]}")
    missing = [n for n, (_, required) in expect.items() if required and n not in names]
    if missing:
        raise Malformed("decode", f"the {query!r} reply has no {', '.join(missing)}")
    out = {}
    for name in sorted(names, key=lambda n: n in ("ones_columns", "classes_present")):   # the counts first
        floats = expect[name][0]
        if query == "describe" and name in ("ones_columns", "classes_present"):
            d = _one_integer(out, "features", 1, cap)
            K = _one_integer(out, "outputs", 1, cap)
            if name == "classes_present":
                floats = K
            else:
                out[name] = decode_array(name, arrays[name], None, cap=d)
                continue
        limit = min(cap, max(_size_of(request or {}, "theta"), 1)) if query == "values" else cap
        out[name] = decode_array(name, arrays[name], floats, limit)
    out.update(decode_text(query, text))
    if query == "describe":
        check_declaration(out, cap)
    _check_related(query, out, request or {})
    return out


def _check_related(query: str, out: dict, request: dict) -> None:
    """The sizes that follow from each other (see :func:`expected_sizes`), whatever was declared."""
    def triangle(big: str, small: str) -> None:
        if big in out and small in out and out[big].size != _triangle(out[small].size):
            raise Malformed("shape", f"{big} has {out[big].size} entries for {out[small].size} in {small}; expected "
                                     f"{_triangle(out[small].size)}")
    if query == "values":
        size, count = _size_of(request, "theta"), out["value"].size
        if count < 1 or size % count:
            raise Malformed("shape", f"value has {count} entries for a request of {size} floats (one per point)")
    triangle("gram", "moment")
    triangle("intercept_hessian", "intercept_gradient")
