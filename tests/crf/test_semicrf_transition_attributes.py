"""Observation-conditioned transitions of the semi-Markov CRF (``SemiMarkovCRF(transition_attributes=...)``)
and the time-varying (N, K, K) transitions of the engine's :class:`SemiMarkov` that carry them: every
operation against brute-force enumeration of segmentations (tests/oracles/semimarkov.py, row e of the
(T, K, K) transition = the boundary after token e), the objective's gradient against central finite
differences, an estimator that needs the attribute, model files and errors."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats
from sklearn.exceptions import ConvergenceWarning

from structlearn import SemiMarkovCRF
from structlearn.crf.objectives import SemiMarkovCLL
from structlearn.engine.structures.semimarkov import SemiMarkov
from tests.crf.test_semicrf import objective_of
from tests.oracles import semimarkov as oracle
from tests.oracles._common import segmentations
from tests.engine.test_semimarkov import build, make_problem, oracle_params

RTOL = 1e-10
ATOL = 1e-12


# --------------------------------------------------------------------------------------------------
# the engine: SemiMarkov(..., transition=(N, K, K))
# --------------------------------------------------------------------------------------------------
def varying(kw, seed, p_row=0.5, p_inf=0.1):
    """``kw`` with a time-varying transition: the stationary matrix on most rows, a perturbed one (some
    entries -inf) on a random ``p_row`` of the rows."""
    rng = np.random.default_rng(seed)
    N, K = kw["unary"].shape
    tv = np.repeat(np.asarray(kw["transition"])[None], N, axis=0)
    rows = rng.random(N) < p_row
    delta = rng.uniform(-2, 2, size=(int(rows.sum()), K, K))
    delta[rng.random(delta.shape) < p_inf] = -np.inf
    tv[rows] = np.where(np.isfinite(tv[rows]), tv[rows], rng.uniform(-2, 2, size=delta.shape)) + delta
    out = dict(kw)
    out["transition"] = tv
    return out


def params_of(kw, b):
    p = oracle_params(kw, b)
    o = int(sum(kw["lengths"][:b]))
    p["transition"] = kw["transition"][o:o + int(kw["lengths"][b])]
    return p


@st.composite
def problems(draw, max_len=6, max_batch=3):
    K = draw(st.integers(1, 3))
    D = draw(st.integers(1, 3))
    lengths = draw(st.lists(st.integers(0, max_len), min_size=1, max_size=max_batch))
    hooks = draw(st.sampled_from([(), ("first",), ("first", "last", "single")]))
    seed = draw(st.integers(0, 2**31 - 1))
    kw = make_problem(seed, lengths, K, D, p_inf=0.1, allow_same_label=draw(st.booleans()),
                      with_segment=draw(st.booleans()), hooks=hooks,
                      max_duration=draw(st.one_of(st.none(), st.integers(1, D))))
    return varying(kw, seed + 1, p_row=draw(st.sampled_from([0.2, 0.6, 1.0])))


@given(problems())
def test_time_varying_log_partition_and_marginals_match_enumeration(kw):
    sm = build(kw)
    assert not sm.stationary and sm.transition.shape == kw["transition"].shape
    per = [oracle.summary(params_of(kw, b)) for b in range(len(kw["lengths"]))]
    cat = lambda key: np.concatenate([s[key] for s in per])  # noqa: E731
    np.testing.assert_allclose(sm.log_partition(), [s["log_z"] for s in per], rtol=RTOL)
    m = sm.marginals()
    np.testing.assert_allclose(m.unary, cat("token"), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(m.edge, cat("edge"), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(sm.marginals(edge="total").edge, cat("edge").sum(axis=0), rtol=RTOL,
                               atol=1e-11)
    np.testing.assert_allclose(sm.segment_marginals(), cat("seg"), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(sm.entropy(), [s["entropy"] for s in per], rtol=RTOL, atol=1e-10)
    dm = sm.duration_marginals()
    for c, field in enumerate(dm._fields):
        np.testing.assert_allclose(getattr(dm, field), np.array([s["dur"][c] for s in per]),
                                   rtol=RTOL, atol=ATOL)


@given(problems())
def test_time_varying_decoding_and_scores_match_enumeration(kw):
    per = [oracle.summary(params_of(kw, b)) for b in range(len(kw["lengths"]))]
    keep = [b for b in range(len(per)) if per[b]["items"]]
    sm = build(kw)
    np.testing.assert_allclose(sm.max(), [s["max"] if s["items"] else -np.inf for s in per], rtol=RTOL)
    if len(keep) < len(per):
        with pytest.raises(ValueError, match="sequence"):
            sm.argmax()
        return
    params = [params_of(kw, b) for b in range(len(per))]
    for b, segs in enumerate(sm.argmax_segments()):
        assert oracle.score(tuple(map(tuple, segs)), params[b]) == pytest.approx(per[b]["max"], rel=RTOL)
    kb = sm.kbest_segments(4)
    for b in range(len(per)):
        want = [s for s, _ in per[b]["items"][:4]]
        np.testing.assert_allclose([s for s, _ in kb[b]], want, rtol=RTOL)
        for score, segs in kb[b]:
            assert oracle.score(tuple(map(tuple, segs)), params[b]) == pytest.approx(score, rel=RTOL)
    rng = np.random.default_rng(0)
    every = [list(segmentations(int(T), sm.max_duration, sm.n_labels)) for T in kw["lengths"]]
    for _ in range(10):
        pick = [every[b][rng.integers(len(every[b]))] for b in range(len(per))]
        got = sm.score([np.array(p, dtype=np.int64).reshape(-1, 3) for p in pick])
        np.testing.assert_allclose(got, [oracle.score(pick[b], params[b]) for b in range(len(per))],
                                   rtol=RTOL)


@given(problems(), st.integers(0, 2**31 - 1))
def test_time_varying_constrained_matches_enumeration(kw, seed):
    allowed = np.random.default_rng(seed).random(kw["unary"].shape) < 0.7
    sm = build(kw).constrain(allowed)
    masked = dict(kw)
    masked["unary"] = np.where(allowed, kw["unary"], -np.inf)
    per = [oracle.summary(params_of(masked, b)) for b in range(len(kw["lengths"]))]
    np.testing.assert_allclose(sm.log_partition(), [s["log_z"] for s in per], rtol=RTOL)
    np.testing.assert_allclose(sm.marginals().edge, np.concatenate([s["edge"] for s in per]),
                               rtol=RTOL, atol=ATOL)


def test_time_varying_samples_follow_the_posterior():
    kw = varying(make_problem(3, [4, 3], 2, 3, p_inf=0.0, allow_same_label=True), 4, p_row=0.7,
                 p_inf=0.0)
    sm = build(kw)
    n = 20000
    segs = sm.sample_segments(n, random_state=7)
    for b in range(2):
        probs = oracle.summary(params_of(kw, b))["probs"]
        index = {key: i for i, key in enumerate(probs)}
        counts = np.zeros(len(probs))
        for i in range(n):
            counts[index[tuple(map(tuple, segs[b][i]))]] += 1
        expected = np.array(list(probs.values())) * n
        big = expected >= 5
        obs = np.r_[counts[big], counts[~big].sum()]
        exp = np.r_[expected[big], expected[~big].sum()]
        if exp[-1] == 0:
            obs, exp = obs[:-1], exp[:-1]
        assert stats.chisquare(obs, exp).pvalue > 1e-3


@pytest.mark.parametrize("with_segment", [False, True])
def test_equal_rows_are_bitwise_the_stationary_structure(with_segment):
    """(N, K, K) with every row equal runs the stationary passes: bitwise the (K, K) results."""
    kw = make_problem(1, [5, 0, 7, 1], 3, 3, with_segment=with_segment, allow_same_label=False)
    a = build(kw)
    tv = dict(kw)
    tv["transition"] = np.repeat(kw["transition"][None], 13, axis=0)
    b = build(tv)
    assert not b._tv_on.any()
    for f in (lambda s: s.log_partition(), lambda s: s.marginals().unary, lambda s: s.marginals().edge,
              lambda s: s.max(), lambda s: s.argmax(), lambda s: s.kbest(3).scores,
              lambda s: s.sample(5, random_state=0), lambda s: s.entropy()):
        np.testing.assert_array_equal(f(a), f(b))


def test_transition_shape_is_validated():
    kw = make_problem(0, [3, 2], 2, 2)
    kw["transition"] = np.zeros((4, 2, 2))
    with pytest.raises(ValueError, match=r"`transition` must have shape \(K, K\) = \(2, 2\) or "
                                         r"\(N, K, K\) = \(5, 2, 2\); got \(4, 2, 2\)"):
        build(kw)


# --------------------------------------------------------------------------------------------------
# the estimator
# --------------------------------------------------------------------------------------------------
def _items(rng, T, marks):
    words = ["a", "b", "c"]
    return [{"w": marks[t] if marks[t] else words[rng.integers(3)], "v": float(rng.normal())}
            for t in range(T)]


def switch_data(n, seed, max_segments=5, max_duration=3):
    """Segments start at ',' (the label switches A <-> B) or ';' (the label stays); other words carry
    no information: only a transition attribute at the segment's first token tells the label."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        segs, marks, s, lab = [], [], 0, "A"
        for i in range(int(rng.integers(2, max_segments + 1))):
            d = int(rng.integers(1, max_duration + 1))
            if i:
                mark = ",;"[int(rng.integers(2))]
                lab = {"A": "B", "B": "A"}[lab] if mark == "," else lab
                marks.append(mark)
            else:
                marks.append(None)
            marks += [None] * (d - 1)
            segs.append((s, s + d, lab))
            s += d
        X.append(_items(rng, s, marks))
        y.append(segs)
    return X, y


def _fit(X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        kw = {"label_format": "segments", "allow_same_label": True, "c2": 0.01, **kw}
        return SemiMarkovCRF(**kw).fit(X, y)


def _token_accuracy(est, X, y):
    ok = n = 0
    for pred, gold, xs in zip(est.predict_segments(X), y, X):
        lab = np.empty(len(xs), object)
        want = np.empty(len(xs), object)
        for s, e, k in pred:
            lab[s:e] = k
        for s, e, k in gold:
            want[s:e] = k
        ok += int(np.sum(lab == want))
        n += len(xs)
    return ok / n


@pytest.fixture(scope="module")
def small():
    """A fitted model with random weights (transition attributes on, forbidden-free)."""
    X, y = switch_data(6, seed=0, max_segments=3, max_duration=3)
    for seq in X:  # a real-valued attribute too
        for item in seq:
            item["z"] = round(item["v"], 1)
    est = _fit(X, y, max_iterations=1, transition_attributes=["w:,", "z"], max_segment_length=3,
               all_possible_transitions=True)
    rng = np.random.default_rng(3)
    est.coef_ = rng.normal(scale=0.7, size=est.coef_.size) * est.model_.free_mask()
    return est, X, y


def _oracle_params(est, X, b):
    """Oracle parameters of sequence b, the transition attributes written out from the public dict
    ``transition_attribute_features_`` and the attribute values of token e + 1."""
    batch = est._batch([X[b]])
    m = est.model_
    unary, begin, last = m.token_potentials(est.coef_, batch)
    tr, st_, en, dur = m.chain_potentials(est.coef_)
    if not m.allow_same_label:
        np.fill_diagonal(tr, -np.inf)
    T, K, D = len(X[b]), m.n_labels, m.max_duration
    cls = est.classes_
    ta = est.transition_attribute_features_
    tv = np.repeat(tr[None], T, axis=0)
    for e in range(T - 1):
        vals = {}
        for key, v in X[b][e + 1].items():
            vals[f"{key}:{v}" if isinstance(v, str) else key] = 1.0 if isinstance(v, str) else v
        for (a, i, j), wt in ta.items():
            tv[e, cls.index(i), cls.index(j)] += vals.get(a, 0.0) * wt
    seg = np.zeros((T, D, K))
    for e in range(T):
        for d in range(1, min(D, e + 1) + 1):
            seg[e, d - 1] = begin[e - d + 1] + last[e]
    return dict(unary=unary, duration=dur, first=dur, last=dur, single=dur, transition=tv, start=st_,
                end=en, segment=seg, allow_same_label=m.allow_same_label)


def test_estimator_matches_enumeration(small):
    est, X, y = small
    assert est.transition_attribute_features_
    assert {a for a, _, _ in est.transition_attribute_features_} == {"w:,", "z"}
    cls = est.classes_
    log_z = est.log_partition(X)
    marg = est.predict_marginals(X)
    best = est.predict_segments(X)
    kb = est.kbest(X, k=3)
    for b in range(len(X)):
        s = oracle.summary(_oracle_params(est, X, b))
        assert log_z[b] == pytest.approx(s["log_z"], rel=RTOL)
        np.testing.assert_allclose(marg[b], s["token"], rtol=RTOL, atol=ATOL)
        top = s["items"][0][1]
        assert best[b] == [(a, e + 1, cls[k]) for a, e, k in top if cls[k] != "O"]
        probs = [math.exp(sc - s["log_z"]) for sc, _ in s["items"][:3]]
        np.testing.assert_allclose([p for _, p in kb[b]], probs, rtol=1e-9)
        p = est.segmentation_probability([X[b]], [y[b]])[0]
        gold = tuple((a, e - 1, cls.index(k)) for a, e, k in y[b])
        assert p == pytest.approx(math.exp(oracle.score(gold, _oracle_params(est, X, b)) - s["log_z"]),
                                  rel=1e-9)


@pytest.mark.parametrize("allow_same_label", [True, False])
@pytest.mark.parametrize("partial", [False, True])
def test_gradient_matches_finite_differences(allow_same_label, partial):
    X, y = switch_data(5, seed=2)
    if not allow_same_label:  # merge equal neighbours: runs are segments
        y = [[(s, e, k) for s, e, k in seq] for seq in y]
        y = [[seq[0]] + [c for p, c in zip(seq, seq[1:]) if c[2] != p[2]] for seq in y]
        y = [[(a[0], (seq[i + 1][0] if i + 1 < len(seq) else len(x)), a[2]) for i, a in enumerate(seq)]
             for seq, x in zip(y, X)]
    est = _fit(X, y, max_iterations=1, transition_attributes=["w:,", "v"],
               all_possible_transitions=True, allow_same_label=allow_same_label)
    f, batch = objective_of(est, X, y)
    if partial:  # partial labels: the engine's path (ChunkedSemiMarkov.expectations)
        rng = np.random.default_rng(0)
        allowed = np.zeros((batch.n_items, len(est.classes_)), bool)
        for b, seq in enumerate(y):
            for s, e, k in seq:
                allowed[batch.offsets[b] + s:batch.offsets[b] + e, est.classes_.index(k)] = True
        allowed |= rng.random(allowed.shape) < 0.3
        f = SemiMarkovCLL(est.model_, batch, batch.segments, c2=0.1, allowed=allowed)
    w = np.random.default_rng(1).normal(scale=0.5, size=f.mask.size) * f.mask
    g = np.zeros_like(w)
    f(w, g)
    ta = np.zeros(w.size, bool)
    est.model_.split_trans_attr(ta)[...] = True
    assert np.any(g[ta] != 0)
    assert np.all(g[~f.mask] == 0)
    h = 1e-6
    for i in np.flatnonzero(f.mask):
        e = np.zeros_like(w)
        e[i] = h
        assert g[i] == pytest.approx((f(w + e) - f(w - e)) / (2 * h), rel=1e-5, abs=1e-6), i


def test_transition_attribute_is_needed_and_learned():
    X, y = switch_data(150, seed=5)
    Xt, yt = switch_data(100, seed=6)
    plain = _fit(X, y, max_iterations=100)
    cond = _fit(X, y, max_iterations=100, transition_attributes=["w:,", "w:;"])
    acc_plain, acc_cond = _token_accuracy(plain, Xt, yt), _token_accuracy(cond, Xt, yt)
    assert acc_cond > 0.99 and acc_cond > acc_plain + 0.1, (acc_plain, acc_cond)
    ta = cond.transition_attribute_features_
    assert ta[("w:,", "A", "B")] > ta[("w:,", "A", "A")]
    assert ta[("w:;", "A", "A")] > ta[("w:;", "A", "B")]


def test_forbidden_pairs_keep_zero_weight_and_minus_inf():
    X, y = switch_data(20, seed=7)
    y = [[seq[0]] + [c for p, c in zip(seq, seq[1:]) if c[2] != p[2]] for seq in y]  # no A A
    y = [[(a[0], (seq[i + 1][0] if i + 1 < len(seq) else len(x)), a[2]) for i, a in enumerate(seq)]
         for seq, x in zip(y, X)]
    est = _fit(X, y, max_iterations=20, transition_attributes=["w:,"], allow_same_label=False)
    W = est.model_.split_trans_attr(est.coef_)
    assert np.all(np.diagonal(W, axis1=1, axis2=2) == 0)
    _, sm = est._structure(X[:3])
    for _, _, part in sm.parts():
        assert np.all(np.diagonal(part._tv, axis1=1, axis2=2) == -np.inf)


def test_model_file_round_trip_and_older_files(tmp_path):
    X, y = switch_data(30, seed=8)
    est = _fit(X, y, max_iterations=30, transition_attributes=["w:,", "w:;"])
    est.save(tmp_path / "m.npz")
    back = SemiMarkovCRF.load(tmp_path / "m.npz")
    assert back.model_.n_trans_attr == 2
    assert back.transition_attribute_features_ == est.transition_attribute_features_
    assert back.predict_segments(X) == est.predict_segments(X)
    np.testing.assert_array_equal(back.log_partition(X), est.log_partition(X))
    probs = lambda m: [[p for _, p in r] for r in m.kbest(X[:4], 3)]  # noqa: E731
    assert probs(back) == probs(est)
    # a file written before transition attributes (no "trans_attr" array) still loads
    plain = _fit(X, y, max_iterations=10)
    arrays = plain._file_arrays

    def old_arrays():
        out = dict(arrays())
        out.pop("trans_attr")
        return out

    plain._file_arrays = old_arrays
    plain.save(tmp_path / "old.npz")
    old = SemiMarkovCRF.load(tmp_path / "old.npz")
    assert old.model_.n_trans_attr == 0 and old.transition_attribute_features_ == {}
    assert old.predict(X) == plain.predict(X)


def test_unknown_transition_attribute_is_an_error():
    X, y = switch_data(5, seed=9)
    with pytest.raises(ValueError, match=r"`transition_attributes` names 'w=,', which is no attribute "
                                         r"of the training data \(attribute names are spelt as in "
                                         r"`attributes_`, e.g. 'w:,'"):
        _fit(X, y, transition_attributes=["w=,"])
    assert SemiMarkovCRF(transition_attributes=["w:,"]).get_params()["transition_attributes"] == ["w:,"]


def test_without_transition_attributes_nothing_changes():
    """transition_attributes=None: no block in the weights, the stationary engine, no (N, K, K) arrays."""
    X, y = switch_data(10, seed=10)
    est = _fit(X, y, max_iterations=5)
    assert est.model_.n_trans_attr == 0 and est.transition_attribute_features_ == {}
    _, sm = est._structure(X)
    assert all(part.stationary for _, _, part in sm.parts())
    stats_, _ = est.model_.expectations(est.coef_, objective_of(est, X, y)[1])
    assert stats_[-1] is None
    assert isinstance(SemiMarkov(np.zeros((2, 2)), np.zeros((1, 2)), np.zeros((2, 2))).transition,
                      np.ndarray)
