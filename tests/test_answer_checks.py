"""The server's checks of a client's answers (drflmodel.client_oracle.checks), one function per check:
honest answers of real sites pass every check -- also on ill-conditioned rows (features scaled
1e-3 .. 1e3) -- and each corruption of the issue's list is caught by the check named for it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import drflmodel as dm
from drflmodel.client_oracle import checks as C
from drflmodel.client_oracle import Site
from drflmodel.client_oracle.protocol import unpack_symmetric as _untriu

LOSSES = [(dm.losses.Logistic(), 1), (dm.losses.Squared(), 1), (dm.losses.Multinomial(), 3),
          (dm.losses.Huber(1.0), 1), (dm.losses.SmoothHinge(), 1)]
SCALES = {"unit": np.ones(5), "ill-conditioned": np.array([1.0, 1e-3, 1e3, 1.0, 30.0])}


def _site(loss, K, scale, N=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 5)) * scale
    X[:, 0] = 1.0
    if loss.task == "regression":
        y = X @ (rng.normal(size=5) / np.maximum(scale, 1.0)) + rng.normal(size=N)
    elif loss.task == "classification":
        y = np.where(rng.normal(size=N) + X[:, 1] / scale[1] > 0, 1.0, -1.0)
    else:
        y = rng.integers(0, K, N).astype(float)
    return Site(X, y, loss, n_outputs=K), float(np.max(np.linalg.norm(X, axis=1))), X, y


def _answers(site, P, points):
    out = []
    for t in points:
        a = site.answer("evaluate", {"theta": t}, {"hessian": True})
        out.append((t, float(a["value"][0]), a["gradient"], _untriu(a["hessian"], P)))
    return out


def _points(P, scale, K, n=10, seed=1):
    rng = np.random.default_rng(seed)
    return [np.zeros(P)] + [rng.normal(size=P) * 10.0 ** rng.uniform(-4, 1) / np.tile(scale, K) for _ in range(n)]


@pytest.mark.parametrize("scale", SCALES, ids=list(SCALES))
@pytest.mark.parametrize("loss, K", LOSSES, ids=[type(l).__name__ for l, _ in LOSSES])
def test_honest_answers_pass_every_check(loss, K, scale):
    site, R, _, _ = _site(loss, K, SCALES[scale])
    P = 5 * K
    answers = _answers(site, P, _points(P, SCALES[scale], K))
    found = []
    rng = np.random.default_rng(3)
    for (ta, va, ga, Ha), (tb, vb, gb, _) in itertools.permutations(answers, 2):
        found += [C.first_order_convexity(ta, va, ga, tb, vb), C.monotone_gradients(ta, ga, tb, gb),
                  C.curvature_matches_gradients(ta, ga, Ha, tb, gb, loss.self_concordance, R)]
        for v in (rng.normal(size=P), tb - ta, -2.5 * (tb - ta)):      # a random direction, and along d
            found.append(C.hvp_matches_gradients(ta, v, Ha @ v, ga, tb, gb, loss.self_concordance, R))
    for t, v, g, H in answers:
        found += [C.finite("gradient", g), C.value_range(v), C.hessian_psd(H), C.gradient_length(g, loss.lipschitz, R),
                  C.hessian_size(H, loss.smoothness, R), C.same_value(t, v, float(site.answer("values", {"theta": t})["value"][0]))]
        rng = np.random.default_rng(2)
        u, w = rng.normal(size=P), rng.normal(size=P)
        Hu = site.answer("hvp", {"theta": t, "direction": u})["hvp"] if np.isfinite(loss.smoothness) else H @ u
        Hw = site.answer("hvp", {"theta": t, "direction": w})["hvp"] if np.isfinite(loss.smoothness) else H @ w
        found += [C.hvp_psd(u, Hu), C.hvp_symmetry(u, Hu, w, Hw), C.hvp_matches_hessian(H, u, Hu)]
    zero = answers[0]
    if loss.task != "regression":
        level = float(loss.block_value(np.zeros((1, K)), np.array([1.0 if K == 1 else 0.0]))[0])
        found.append(C.value_at_zero(zero[1], level))
    assert [str(v) for v in found if v is not None] == []


@pytest.fixture(scope="module")
def logistic():
    loss = dm.losses.Logistic()
    site, R, X, y = _site(loss, 1, SCALES["unit"])
    return loss, R, _answers(site, 5, _points(5, SCALES["unit"], 1))


def _caught(violations, check):
    names = {v.check for v in violations if v is not None}
    return check in names


def test_scaled_and_negated_gradients_break_first_order_convexity(logistic):
    """The issue's x10 client made a false certificate; first-order convexity on its own answers
    catches it (and a negated gradient)."""
    loss, R, answers = logistic
    for corrupt in (lambda g: 10 * g, lambda g: -g):
        found = [C.first_order_convexity(ta, va, corrupt(ga), tb, vb)
                 for (ta, va, ga, _), (tb, vb, _, _) in itertools.permutations(answers, 2)]
        assert _caught(found, "first-order convexity")
    v = next(C.first_order_convexity(ta, va, 10 * ga, tb, vb) for (ta, va, ga, _), (tb, vb, _, _)
             in itertools.permutations(answers, 2) if C.first_order_convexity(ta, va, 10 * ga, tb, vb))
    assert v.numbers["violation"] > 1e3 * v.numbers["scale"] * C.EPS


def test_values_out_of_the_losss_range_or_off_at_zero(logistic):
    loss, R, answers = logistic
    t0, v0, _, _ = answers[0]
    assert v0 == pytest.approx(np.log(2), abs=1e-15)
    assert C.value_at_zero(0.1 * v0, np.log(2)).check == "value at theta = 0"
    assert C.value_at_zero(v0 - 1, np.log(2)) is not None
    assert C.value_range(v0 - 1).check == "loss range"
    # values scaled by 0.1 everywhere (gradients honest): first-order convexity fails somewhere
    found = [C.first_order_convexity(ta, 0.1 * va, ga, tb, 0.1 * vb)
             for (ta, va, ga, _), (tb, vb, _, _) in itertools.permutations(answers, 2)]
    assert _caught(found, "first-order convexity")
    assert C.same_value(t0, v0, v0 + 1e-6).check == "same point, same value"


def test_broken_hessians_and_hvps(logistic):
    loss, R, answers = logistic
    (ta, _, ga, Ha), (tb, _, gb, _) = answers[1], answers[2]
    bad = Ha.copy()
    bad[0, 0] = -1.0
    assert C.hessian_psd(bad).check == "Hessian PSD"
    found = [C.curvature_matches_gradients(ta, ga, 10 * Ha, tb, gb, loss.self_concordance, R)
             for (ta, _, ga, Ha), (tb, _, gb, _) in itertools.permutations(answers, 2)]
    assert _caught(found, "curvature vs gradients")
    assert C.hessian_size(10 * Ha * R**2, loss.smoothness, R).check == "Hessian size"
    u, w = np.arange(5.0), np.ones(5)
    assert C.hvp_psd(u, -Ha @ u - u).check == "Hessian-vector product PSD"
    assert C.hvp_symmetry(u, Ha @ u, w, Ha @ w + 0.1).check == "Hessian-vector symmetry"
    assert C.hvp_matches_hessian(Ha, u, 2 * Ha @ u).check == "Hessian-vector product vs Hessian"
    # products x10 (PSD, symmetric: alone they look honest) against the gradient differences
    pairs = list(itertools.permutations(answers, 2))
    along = [C.hvp_matches_gradients(ta, tb - ta, 10 * Ha @ (tb - ta), ga, tb, gb, loss.self_concordance, R)
             for (ta, _, ga, Ha), (tb, _, gb, _) in pairs]
    assert _caught(along, "Hessian-vector product vs gradients")
    rng = np.random.default_rng(4)
    random = [C.hvp_matches_gradients(ta, w, 10 * Ha @ w, ga, tb, gb, loss.self_concordance, R)
              for (ta, _, ga, Ha), (tb, _, gb, _) in pairs for w in (rng.normal(size=5) + (tb - ta),)]
    assert _caught(random, "Hessian-vector product vs gradients")


def test_squared_loss_curvature_is_an_equality():
    loss = dm.losses.Squared()
    site, R, X, y = _site(loss, 1, SCALES["unit"])
    (ta, _, ga, Ha), (tb, _, gb, _) = _answers(site, 5, _points(5, SCALES["unit"], 1, n=2))[:2]
    assert C.curvature_matches_gradients(ta, ga, Ha, tb, gb, 0.0, None) is None
    assert C.curvature_matches_gradients(ta, ga, 1.001 * Ha, tb, gb, 0.0, None).check == "curvature vs gradients"
    d = tb - ta
    assert C.hvp_matches_gradients(ta, d, Ha @ d, ga, tb, gb, 0.0, None) is None
    assert C.hvp_matches_gradients(ta, d, 1.001 * Ha @ d, ga, tb, gb, 0.0, None).check == \
        "Hessian-vector product vs gradients"


def test_statistics_that_no_rows_have():
    loss = dm.losses.Squared()
    site, R, X, y = _site(loss, 1, SCALES["ill-conditioned"])
    ans = site.answer("statistics")
    G, b, yy = _untriu(ans["gram"], 5), ans["moment"], float(ans["yy"][0])
    assert C.statistics_gram(G, b, yy, rows=60, intercept_column=0) is None
    assert C.statistics_gram(G, b, -1e6).detail.startswith("y'y = -1e+06 < 0")
    non_psd = G.copy()
    non_psd[1, 1] = -non_psd[1, 1]
    assert "is not PSD" in C.statistics_gram(non_psd, b, yy).detail
    # |X'y|^2 > y'y lambda_max(X'X): a moment no rows can have with these y'y and X'X
    assert "is not PSD" in C.statistics_gram(G, 10 * b + np.sqrt(yy * np.linalg.eigvalsh(G)[-1]), yy).detail
    # 10^9 declared rows against the intercept column's entry N
    assert "not the declared 1000000000 rows" in C.statistics_gram(G, b, yy, rows=10**9, intercept_column=0).detail


def test_malformed_answers():
    assert C.finite("gradient", [1.0, np.nan]).check == "finite"
    assert C.finite("gradient", [np.inf]).check == "finite"
    assert C.finite("gradient", np.array(["1"])).check == "type"
    assert C.shape("gradient", np.ones(4), 5).detail == "gradient has 4 entries; expected 5"
    assert C.gradient_length(np.full(5, 1e300), 1.0, 3.0).check == "gradient length"
    v = C.first_order_convexity(np.zeros(2), 1.0, np.ones(2), np.ones(2), 0.0)
    assert v.to_dict()["check"] == "first-order convexity" and v.to_dict()["numbers"]["violation"] == pytest.approx(3.0)


def test_the_cheap_spectral_norm_bounds_bracket_the_exact_norm():
    """curvature_matches_gradients decides with bounds on ||H||_2 and computes the norm only when they
    disagree: the bounds must bracket numpy's 2-norm (PSD, indefinite, rank one, diagonal, scaled)."""
    from drflmodel.client_oracle.checks import _spectral_norm_bounds

    rng = np.random.default_rng(3)
    for trial in range(40):
        P = int(rng.integers(1, 40))
        A = rng.normal(size=(P, P)) * 10.0 ** rng.uniform(-3, 3)
        for H in (A @ A.T, A + A.T, np.outer(A[0], A[0]), np.diag(np.diag(A))):
            low, high = _spectral_norm_bounds(H)
            exact = np.linalg.norm(H, 2)
            assert low <= exact * (1 + 1e-12) and exact <= high * (1 + 1e-12), (trial, low, exact, high)
