"""SuperLabelSemiMarkov: every transition form against brute-force enumeration, the generic SemiMarkov on the
same super-labels, long-sequence stability, the fallback to the exact path and the adapter's factoring."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlearn.hsmm import _general_potentials as g
from structlearn.engine.structures import semimarkov_super as sms
from structlearn.engine.structures.semimarkov_super import SuperLabelSemiMarkov
from tests.oracles.general_hsmm import super_label_posterior

RTOL = 1e-10
ATOL = 1e-12
FORMS = ("dense", "enter", "leave+vector", "leave+enter")


def _pot(rng, shape, p_inf=0.0, scale=1.5):
    x = rng.uniform(-scale, scale, size=shape)
    if p_inf:
        x[rng.random(shape) < p_inf] = -np.inf
    return x


def make(form, rng, M, D, lengths, open_end, p_inf=0.1, end=True):
    """(structure, dense log transition (K, K), start, end, unary) of a random instance of ``form``."""
    K = M * D
    N = int(sum(lengths))
    unary = _pot(rng, (N, M), p_inf)
    start = _pot(rng, K, p_inf)
    endv = _pot(rng, K, p_inf) if end else np.zeros(K)
    kw = {}
    if form == "dense":
        kw["transition"] = _pot(rng, (K, K), p_inf)
    if form in ("enter", "leave+enter"):
        kw["enter"] = _pot(rng, (M, K), p_inf)
    if form.startswith("leave"):
        kw["leave"] = _pot(rng, (K, M), p_inf)
    if form == "leave+vector":
        kw["enter"] = _pot(rng, K, p_inf)
    sm = SuperLabelSemiMarkov(unary, D, start=start, end=endv, lengths=lengths, open_end=open_end, **kw)
    return sm, sm.transition, start, endv, unary


def assert_matches_oracle(sm, D, start, trans, endv, unary, open_end):
    lengths, offsets = sm.lengths, sm.offsets
    M = unary.shape[1]
    K = M * D
    log_z = sm.log_partition()
    best = sm.max()
    counts = sm.posterior_counts(enter=True, leave=True, dense=True)
    token = sm.marginals(edge="none").unary
    edges = sm.marginals(edge="sum").edge
    fm, bm = sm.forward(), sm.backward()
    with np.errstate(invalid="ignore"):
        pstart = np.nan_to_num(np.exp(fm.alpha_star + bm.beta_start))
        pend = np.nan_to_num(np.exp(fm.alpha + bm.beta_end))
    feasible = np.isfinite(best)
    labels = sm.argmax() if feasible.all() else None
    tot = {"trans": np.zeros((K, K)), "first": np.zeros(K), "segments": np.zeros(K)}
    st_of = np.repeat(np.arange(M), D)
    for b in range(sm.batch_size):
        o, T = int(offsets[b]), int(lengths[b])
        if T == 0:
            assert log_z[b] == 0.0 and best[b] == 0.0
            continue
        ref = super_label_posterior(unary[o:o + T], D, start, trans, endv, open_end)
        np.testing.assert_allclose(log_z[b], ref["log_z"], rtol=RTOL)
        np.testing.assert_allclose(best[b], ref["best"][0], rtol=RTOL)
        if ref["log_z"] == -np.inf:
            continue
        np.testing.assert_allclose(token[o:o + T], ref["token"], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(counts["gamma"][o:o + T], ref["gamma"], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(pstart[o:o + T], ref["pstart"], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(pend[o:o + T], ref["pend"], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(edges[b], ref["trans"], rtol=RTOL, atol=ATOL)
        if labels is not None:
            np.testing.assert_array_equal(labels[o:o + T], ref["best"][1])
        for k in tot:
            tot[k] = tot[k] + ref[k]
    if np.isfinite(log_z).all():
        np.testing.assert_allclose(counts["dense"], tot["trans"], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(counts["first"], tot["first"], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(counts["segments"], tot["segments"], rtol=RTOL, atol=ATOL)
        enter = np.stack([tot["trans"][st_of == i].sum(0) for i in range(M)])
        np.testing.assert_allclose(counts["enter"], enter, rtol=RTOL, atol=ATOL)
        leave = tot["trans"].reshape(K, M, D).sum(2)
        np.testing.assert_allclose(counts["leave"], leave, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("open_end", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_form_matches_brute_force(form, open_end, seed):
    rng = np.random.default_rng(seed)
    M, D = 2, 3
    lengths = [4, 0, 1, 5]
    sm, trans, start, endv, unary = make(form, rng, M, D, lengths, open_end)
    assert_matches_oracle(sm, D, start, trans, endv, unary, open_end)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), form=st.sampled_from(FORMS), open_end=st.booleans(),
       M=st.integers(1, 3), D=st.integers(1, 3), lengths=st.lists(st.integers(0, 5), min_size=1, max_size=3))
def test_random_instances_match_brute_force(seed, form, open_end, M, D, lengths):
    rng = np.random.default_rng(seed)
    sm, trans, start, endv, unary = make(form, rng, M, D, lengths, open_end, p_inf=0.15)
    assert_matches_oracle(sm, D, start, trans, endv, unary, open_end)


@pytest.mark.parametrize("form", FORMS)
def test_counts_of_one_request_equal_those_of_all(form):
    rng = np.random.default_rng(3)
    M, D = 3, 4
    args = make(form, rng, M, D, [9, 12], True, p_inf=0.05)[0]
    for flags in ({}, {"enter": True}, {"leave": True}, {"dense": True}):
        sm = make(form, np.random.default_rng(3), M, D, [9, 12], True, p_inf=0.05)[0]
        one = sm.posterior_counts(**flags)
        both = args.posterior_counts(enter=True, leave=True, dense=True)
        for key, value in one.items():
            np.testing.assert_allclose(value, both[key], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("form", FORMS)
def test_constrained_structure_is_the_masked_one(form):
    rng = np.random.default_rng(4)
    M, D = 2, 3
    sm, trans, start, endv, unary = make(form, rng, M, D, [5, 4], False, p_inf=0.0)
    allowed = rng.random((9, M)) < 0.7
    allowed[:, 0] |= ~allowed.any(axis=1)
    c = sm.constrain(np.repeat(allowed, D, axis=1))
    assert isinstance(c, SuperLabelSemiMarkov)
    masked = np.where(allowed, unary, -np.inf)
    assert_matches_oracle(c, D, start, trans, endv, masked, False)
    # a mask that differs between the durations of a state: the constrained generic structure
    mask = np.ones((9, M * D), dtype=bool)
    mask[0, 1] = False
    other = sm.constrain(mask)
    np.testing.assert_allclose(other.log_partition(), sm.generic().constrain(mask).log_partition(), rtol=RTOL)


def test_long_sequences_agree_with_the_generic_structure():
    """Drifting states (emission scales far from the normalisers), masks and censoring on T = 1500: the
    anchored linear passes against the exact log-space generic structure."""
    rng = np.random.default_rng(5)
    M, D = 3, 15
    K = M * D
    T = 1500
    truth = np.repeat(rng.integers(0, M, T // 10 + 1), 10)[:T]
    x = truth * 4.0 + rng.normal(size=T) * 0.5
    means = np.arange(M) * 4.0
    unary = -0.5 * (x[:, None] - means[None]) ** 2 / 0.1  # sharp: ±80 nats per token between states
    unary[rng.random((T, M)) < 0.02] = -np.inf
    unary[np.arange(T), truth] = np.maximum(unary[np.arange(T), truth], -5.0)
    pmf = np.full((M, D), 1.0 / D)
    st_of = np.repeat(np.arange(M), D)
    A = rng.uniform(0.1, 1, (M, M))
    np.fill_diagonal(A, 0)
    A /= A.sum(1, keepdims=True)
    with np.errstate(divide="ignore"):
        enter = np.log(A)[:, st_of] + np.log(pmf).ravel()[None]
        for open_end in (False, True):
            sm = SuperLabelSemiMarkov(unary, D, enter=enter, start=np.log(np.full(K, 1.0 / K)),
                                      lengths=[600, 900], open_end=open_end)
            gen = sm.generic()
            np.testing.assert_allclose(sm.log_partition(), gen.log_partition(), rtol=1e-12)
            c = sm.posterior_counts(enter=True)
            token, edge = gen.marginals(edge="total")
            assert not sm._cache.get("use_generic")
            np.testing.assert_allclose(c["gamma"], token.reshape(T, M, D).sum(2), rtol=1e-9, atol=1e-9)
            ent = np.stack([edge[st_of == i].sum(0) for i in range(M)])
            np.testing.assert_allclose(c["enter"], ent, rtol=1e-9, atol=1e-9 * ent.max())
            np.testing.assert_array_equal(sm.argmax(), gen.argmax())
            np.testing.assert_allclose(sm.max(), gen.max(), rtol=1e-12)


@pytest.mark.parametrize("form", ["dense", "enter"])
@pytest.mark.parametrize("open_end", [False, True])
def test_one_segment_spanning_hundreds_of_tokens_stays_in_range(form, open_end):
    """Regression: with no transition the only segmentation is one segment over all 225 tokens, so no
    segment ends (or starts) at the tokens between; its score (-909 nats) must not underflow."""
    rng = np.random.default_rng(11)
    T, D = 225, 225
    unary = -3.5 - 3.4 * rng.random((T, 1))
    start = np.full(D, -np.inf)
    start[D - 1] = 0.0
    kw = {"transition": np.full((D, D), -np.inf)} if form == "dense" else {"enter": np.full((1, D), -np.inf)}
    sm = SuperLabelSemiMarkov(unary, D, start=start, open_end=open_end, **kw)
    gen = sm.generic()
    np.testing.assert_allclose(sm.log_partition(), gen.log_partition(), rtol=1e-12)
    np.testing.assert_allclose(sm.log_partition(), unary.sum(), rtol=1e-12)
    c = sm.posterior_counts()
    assert not sm._cache.get("use_generic")
    np.testing.assert_allclose(c["gamma"], 1.0, rtol=1e-10)
    # two states, one forbidden on the first half by a constraint: the same long-range scales
    M, D2, T2 = 2, 30, 150
    un2 = -4.0 - rng.random((T2, M)) * 2
    allowed = np.ones((T2, M * D2), bool)
    allowed[: T2 // 2, :D2] = False
    trans = np.log(rng.dirichlet(np.ones(M * D2), size=M * D2))
    sm2 = SuperLabelSemiMarkov(un2, D2, transition=trans, open_end=open_end).constrain(allowed)
    gen2 = SuperLabelSemiMarkov(un2, D2, transition=trans, open_end=open_end).generic().constrain(allowed)
    np.testing.assert_allclose(sm2.log_partition(), gen2.log_partition(), rtol=1e-12)


def test_a_failed_check_answers_from_the_generic_structure(monkeypatch):
    rng = np.random.default_rng(6)
    sm = make("enter", rng, 2, 3, [6, 5], True)[0]
    real = sms._k.super_posterior

    def failing(*args):
        out = list(real(*args))
        out[0] = np.zeros_like(out[0])
        return tuple(out)

    monkeypatch.setattr(sms._k, "super_posterior", failing)
    c = sm.posterior_counts(enter=True)
    token, edge = sm.generic().marginals(edge="total")
    np.testing.assert_allclose(c["gamma"], token.reshape(11, 2, 3).sum(2), rtol=RTOL)
    assert sm._cache.get("use_generic")
    np.testing.assert_array_equal(sm.log_partition(), sm.generic().log_partition())
    np.testing.assert_array_equal(sm.forward().alpha, sm.generic().forward().alpha)


def test_large_potentials_use_the_generic_path():
    rng = np.random.default_rng(7)
    M, D = 2, 2
    sm = SuperLabelSemiMarkov(rng.normal(size=(5, M)), D, transition=rng.normal(size=(4, 4)) + 800.0)
    assert not sm._spec()[1]
    np.testing.assert_allclose(sm.log_partition(), sm.generic().log_partition(), rtol=RTOL)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="`n_durations` must be an integer >= 1"):
        SuperLabelSemiMarkov(np.zeros((3, 2)), 0)
    with pytest.raises(ValueError, match="either a dense `transition` or"):
        SuperLabelSemiMarkov(np.zeros((3, 2)), 2, transition=np.zeros((4, 4)), enter=np.zeros(4))
    with pytest.raises(ValueError, match="leave"):
        SuperLabelSemiMarkov(np.zeros((3, 2)), 2, leave=np.zeros((4, 3)))
    with pytest.raises(ValueError, match="must be one of"):
        SuperLabelSemiMarkov(np.zeros((3, 2)), 2).marginals(edge="rows")


def test_the_adapter_factors_exactly_what_it_can():
    rng = np.random.default_rng(8)
    M, D = 3, 4
    sp = rng.dirichlet(np.ones(M))
    rt = rng.gamma(1.0, size=(M, M, D))
    rt[np.arange(M), np.arange(M)] = 0
    rt /= rt.sum(axis=(1, 2), keepdims=True)
    _, la = g.residential_time(np.full((M, D), 1.0 / (M * D)), rt)
    f = g.factor_transitions(np.where(np.eye(M, dtype=bool)[:, None, :, None], -np.inf, la))
    assert f["kind"] == "residential"
    vt = rng.dirichlet(np.ones(M), size=(D, M))
    vt[-1, np.arange(M), np.arange(M)] = 0
    vt /= vt.sum(axis=2, keepdims=True)
    _, la = g.variable_transition(sp, vt, "right")
    la[np.arange(M), :, np.arange(M), :] = -np.inf
    f = g.factor_transitions(la)
    assert f["kind"] == "variable"
    K = M * D
    st_of = np.repeat(np.arange(M), D)
    rebuilt = f["leave"][:, st_of] + f["enter"][None, :]
    fin = np.isfinite(la.reshape(K, K))
    np.testing.assert_array_equal(np.isfinite(rebuilt), fin)
    np.testing.assert_allclose(rebuilt[fin], la.reshape(K, K)[fin], rtol=1e-12)
    la2 = la + rng.normal(scale=0.1, size=la.shape)
    assert g.factor_transitions(la2)["kind"] == "general"


def test_expected_counts_compute_other_keys_when_read():
    rng = np.random.default_rng(9)
    sm, trans, *_ = make("enter", rng, 2, 3, [7, 6], False, p_inf=0.0)
    counts = g.segment_counts(sm, 2, 3, sm.offsets, sm.lengths, lazy=True)
    assert set(counts) == {"first", "segments", "gamma", "enter"}
    full = counts["trans"]
    _, edge = sm.generic().marginals(edge="total")
    np.testing.assert_allclose(full.reshape(6, 6), edge, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(counts["leave"], edge.reshape(6, 2, 3).sum(2).reshape(2, 3, 2), rtol=RTOL,
                               atol=ATOL)
