"""HigherOrderCRF: dense and sparse pattern inference vs brute force, gradients, order 1 = LinearChainCRF,
estimator contract, and a CoNLL-2002 Spanish run (slow)."""
import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from structlearn import HigherOrderCRF, LinearChainCRF
from structlearn.crf.objectives import ChainCLL
from structlearn.crf._potentials import ChainFeatureModel
from structlearn.crf.features import AttributeVocabulary, build_state_features
from structlearn.crf.objectives import HigherOrderCLL
from structlearn.crf._higher_order_potentials import (HigherOrderFeatureModel, LabelPatterns, PatternChain,
                                             build_pattern_state_features)
from tests.conftest import require_data
from tests.oracles.higher_order import pattern_oracle, sequence_score

RTOL = 1e-10


def random_patterns(rng, K, d, state_order, frac):
    """Unigrams + a random subset of the n-grams of length 2..d+1, in the LabelPatterns layout."""
    grams = [z for n in range(2, d + 2) for z in itertools.product(range(K), repeat=n)]
    keep = [z for z in grams if rng.random() < frac]
    st_ = sorted([z for z in keep if len(z) <= state_order], key=len)
    rest = [z for z in keep if len(z) > state_order]
    return LabelPatterns([(k,) for k in range(K)] + st_ + rest, K, d, state_order)


def random_chain(rng, K, d, lengths, frac=0.5, scale=1.0, state_order=None):
    pt = random_patterns(rng, K, d, min(d, 2) if state_order is None else state_order, frac)
    N = int(np.sum(lengths))
    phi = scale * rng.normal(size=(N, pt.n_state_patterns))
    wpat = scale * rng.normal(size=pt.n_patterns)
    wpat[:K] = rng.normal(size=K)
    return pt, phi, wpat, scale * rng.normal(size=K), scale * rng.normal(size=K)


def check_against_oracle(pt, phi, wpat, start, end, lengths, allowed=None):
    K = pt.n_labels
    off = np.concatenate([[0], np.cumsum(lengths)])
    for mode in ("sparse", "dense"):
        ch = PatternChain(phi, wpat, pt, lengths, start, end, mode, allowed)
        log_z, lab, tok, tot = ch.pattern_marginals()
        np.testing.assert_allclose(ch.log_partition(), log_z, rtol=RTOL)
        best = ch.max()
        total = np.zeros(pt.n_patterns)
        for b in range(len(lengths)):
            o0, o1 = off[b], off[b + 1]
            a = None if allowed is None else allowed[o0:o1]
            olz, olab, otok, otot, obest, oarg = pattern_oracle(pt.patterns, phi[o0:o1], wpat, start, end,
                                                                 K, a)
            total += otot
            assert (log_z[b] == -np.inf) == (olz == -np.inf)
            if olz > -np.inf:
                np.testing.assert_allclose(log_z[b], olz, rtol=RTOL, err_msg=mode)
                np.testing.assert_allclose(best[b], obest, rtol=RTOL, err_msg=mode)
            np.testing.assert_allclose(lab[o0:o1], olab, rtol=RTOL, atol=1e-12, err_msg=mode)
            np.testing.assert_allclose(tok[o0:o1], otok, rtol=RTOL, atol=1e-12, err_msg=mode)
        np.testing.assert_allclose(tot, total, rtol=RTOL, atol=1e-11, err_msg=mode)
        if np.all(log_z > -np.inf):
            y = ch.argmax()
            for b in range(len(lengths)):
                o0, o1 = off[b], off[b + 1]
                a = None if allowed is None else allowed[o0:o1]
                oarg = pattern_oracle(pt.patterns, phi[o0:o1], wpat, start, end, K, a)[5]
                s_pred = sequence_score(tuple(y[o0:o1]), pt.patterns, phi[o0:o1], wpat, start, end)[0]
                s_best = sequence_score(tuple(oarg), pt.patterns, phi[o0:o1], wpat, start, end)[0]
                np.testing.assert_allclose(s_pred, s_best, rtol=RTOL)
            np.testing.assert_allclose(ch.score(y), best, rtol=RTOL)
        else:
            with pytest.raises(ValueError, match="no labeling"):
                ch.argmax()


# ---------------------------------------------------------------------------------------------------
# inference vs brute force
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("d", [1, 2, 3])
def test_oracle_fixed(d):
    rng = np.random.default_rng(d)
    lengths = np.array([4, 1, 0, 5, 2])
    check_against_oracle(*random_chain(rng, 3, d, lengths), lengths)


@given(d=st.integers(1, 3), K=st.integers(1, 3), seed=st.integers(0, 2 ** 31 - 1),
       lengths=st.lists(st.integers(0, 5), min_size=1, max_size=3), frac=st.sampled_from([0.2, 0.6, 1.0]),
       scale=st.sampled_from([0.1, 1.0, 30.0]), state_order=st.integers(1, 3))
def test_oracle_hypothesis(d, K, seed, lengths, frac, scale, state_order):
    rng = np.random.default_rng(seed)
    lengths = np.array(lengths)
    while K ** int(lengths.max(initial=0)) > 250:
        lengths = lengths // 2 + 0
    check_against_oracle(*random_chain(rng, K, d, lengths, frac, scale, min(state_order, d)), lengths)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_oracle_constrained_and_infeasible(d):
    rng = np.random.default_rng(10 + d)
    lengths = np.array([4, 3, 2])
    pt, phi, wpat, start, end = random_chain(rng, 3, d, lengths)
    allowed = rng.random((lengths.sum(), 3)) < 0.6
    allowed[4] = True
    allowed[6] = False  # second sequence infeasible
    check_against_oracle(pt, phi, wpat, start, end, lengths, allowed)
    allowed[6, 1] = True
    allowed[allowed.sum(axis=1) == 0, 0] = True
    check_against_oracle(pt, phi, wpat, start, end, lengths, allowed)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_kbest_against_oracle(d):
    rng = np.random.default_rng(30 + d)
    lengths = np.array([4, 0, 1, 3])
    pt, phi, wpat, start, end = random_chain(rng, 3, d, lengths)
    k = 7
    for mode in ("sparse", "dense"):
        kb = PatternChain(phi, wpat, pt, lengths, start, end, mode).kbest(k)
        off = np.concatenate([[0], np.cumsum(lengths)])
        for b in range(len(lengths)):
            o0, o1 = off[b], off[b + 1]
            scores = sorted((sequence_score(y, pt.patterns, phi[o0:o1], wpat, start, end)[0]
                             for y in itertools.product(range(3), repeat=int(lengths[b]))), reverse=True)
            n = min(k, len(scores))
            np.testing.assert_allclose(kb.scores[b, :n], scores[:n], rtol=RTOL)
            assert np.all(kb.scores[b, n:] == -np.inf)
            for r in range(n):
                y = tuple(kb.labels[r, o0:o1])
                np.testing.assert_allclose(sequence_score(y, pt.patterns, phi[o0:o1], wpat, start, end)[0],
                                           kb.scores[b, r], rtol=RTOL)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_dense_equals_sparse_larger(d):
    """Beyond brute-force sizes: the two algorithms agree (log Z, marginals, Viterbi)."""
    rng = np.random.default_rng(20 + d)
    lengths = np.array([30, 1, 17, 0, 25])
    pt, phi, wpat, start, end = random_chain(rng, 4, d, lengths, frac=0.4, scale=2.0)
    a = PatternChain(phi, wpat, pt, lengths, start, end, "sparse")
    b = PatternChain(phi, wpat, pt, lengths, start, end, "dense")
    for x, y in zip(a.pattern_marginals(), b.pattern_marginals()):
        np.testing.assert_allclose(x, y, rtol=RTOL, atol=1e-11)
    np.testing.assert_allclose(a.max(), b.max(), rtol=RTOL)
    np.testing.assert_array_equal(a.argmax(), b.argmax())


@pytest.mark.parametrize("scale", [0.5, 5.0, 200.0])
def test_sparse_linear_path_equals_log_path(scale):
    rng = np.random.default_rng(int(scale))
    lengths = np.array([40, 1, 0, 23, 7])
    pt, phi, wpat, start, end = random_chain(rng, 4, 3, lengths, frac=0.5, scale=scale)
    a = PatternChain(phi, wpat, pt, lengths, start, end, "sparse")
    b = PatternChain(phi, wpat, pt, lengths, start, end, "sparse")
    b.linear = False
    for x, y in zip(a.pattern_marginals(), b.pattern_marginals()):
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-12)


def test_large_potentials_and_long_sequence_finite():
    rng = np.random.default_rng(5)
    lengths = np.array([2000])
    pt, phi, wpat, start, end = random_chain(rng, 3, 2, lengths, scale=300.0)
    for mode in ("sparse", "dense"):
        lz, lab, tok, tot = PatternChain(phi, wpat, pt, lengths, start, end, mode).pattern_marginals()
        assert np.all(np.isfinite(lz)) and np.all(np.isfinite(lab))
        np.testing.assert_allclose(lab.sum(axis=1), 1.0, rtol=1e-9)


# ---------------------------------------------------------------------------------------------------
# training objective
# ---------------------------------------------------------------------------------------------------
def toy_data(n=25, seed=0, labels=("A", "B", "C")):
    """Label depends on a word attribute and on the two previous labels."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        T = int(rng.integers(1, 7))
        xs, ys = [], []
        p1 = p2 = 0
        for _t in range(T):
            lab = int(rng.integers(0, len(labels))) if rng.random() < 0.3 else (p1 + p2 + 1) % len(labels)
            xs.append({"w": f"w{lab}{int(rng.integers(0, 2))}", "bias": 1.0, "num": float(rng.normal())})
            ys.append(labels[lab])
            p2, p1 = p1, lab
        X.append(xs)
        y.append(ys)
    return X, y


def _objective(X, y, d, mode, c2=0.3, partial=False):
    vocab = AttributeVocabulary()
    packed = vocab.encode(X, grow=True)
    classes = sorted({lab for s in y for lab in s})
    yy = np.array([classes.index(lab) for s in y for lab in s])
    K = len(classes)
    pt = LabelPatterns.from_labels(yy, packed.offsets, K, d, min(d, 2))
    attr_ptr, feat_pat = build_pattern_state_features(packed, yy, pt, len(vocab))
    model = HigherOrderFeatureModel(pt, attr_ptr, feat_pat, mode)
    allowed = None
    if partial:
        rng = np.random.default_rng(3)
        allowed = rng.random((packed.n_items, K)) < 0.5
        allowed[np.arange(packed.n_items), yy] = True
    return HigherOrderCLL(model, packed, yy, c2=c2, allowed=allowed), model, packed, yy


@pytest.mark.parametrize("mode", ["sparse", "dense"])
@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("partial", [False, True])
def test_gradient_finite_differences(d, mode, partial):
    X, y = toy_data(12, seed=d)
    obj, model, _, _ = _objective(X, y, d, mode, partial=partial)
    g = _check_gradient_fd(obj, model)
    assert np.all(g[~model.free_mask()] == 0)


def _check_gradient_fd(obj, model, n_checked=40, eps=1e-6):
    """Central differences on up to ``n_checked`` free weights at random w; returns the gradient."""
    rng = np.random.default_rng(0)
    w = rng.normal(scale=0.5, size=model.n_params) * model.free_mask()
    g = np.empty_like(w)
    obj(w, g)
    idx = np.flatnonzero(model.free_mask())
    for i in rng.choice(idx, size=min(n_checked, idx.size), replace=False):
        e = np.zeros_like(w)
        e[i] = eps
        np.testing.assert_allclose(g[i], (obj(w + e) - obj(w - e)) / (2 * eps), rtol=1e-5, atol=1e-6)
    return g


@pytest.mark.parametrize("d", [1, 2, 3])
def test_objective_against_oracle(d):
    """Value = Σ log Z − gold score, with log Z from brute force over all label sequences."""
    X, y = toy_data(6, seed=40 + d)
    obj, model, packed, yy = _objective(X, y, d, "sparse", c2=0.0)
    rng = np.random.default_rng(1)
    w = rng.normal(size=model.n_params) * model.free_mask()
    ch = model.structure(w, packed)
    _, wp, st_, en = model.split(w)
    wp = np.where(model.patterns.lengths >= 2, wp, 0.0)
    want = 0.0
    for b in range(len(packed.lengths)):
        o0, o1 = packed.offsets[b], packed.offsets[b + 1]
        olz = pattern_oracle(model.patterns.patterns, ch.phi[o0:o1], wp, st_, en, model.n_labels)[0]
        gold = sequence_score(tuple(yy[o0:o1]), model.patterns.patterns, ch.phi[o0:o1], wp, st_, en)[0]
        want += olz - gold
    np.testing.assert_allclose(obj(w), want, rtol=RTOL)


def test_order1_equals_linear_chain_objective():
    X, y = toy_data(20, seed=7)
    vocab = AttributeVocabulary()
    packed = vocab.encode(X, grow=True)
    classes = sorted({lab for s in y for lab in s})
    yy = np.array([classes.index(lab) for s in y for lab in s])
    K = len(classes)
    attr_ptr, feat_label = build_state_features(packed, yy, len(vocab), K)
    trans = np.zeros((K, K), bool)
    same = np.ones(packed.n_items, bool)
    same[packed.offsets[1:] - 1] = False
    idx = np.flatnonzero(same[:-1])
    trans[yy[idx], yy[idx + 1]] = True
    lc = ChainFeatureModel(attr_ptr, feat_label, K, trans)
    lobj = ChainCLL(lc, packed, yy, c2=0.2)
    for mode in ("sparse", "dense"):
        hobj, hm, _, _ = _objective(X, y, 1, mode, c2=0.2)
        np.testing.assert_array_equal(hm.attr_ptr, attr_ptr)
        np.testing.assert_array_equal(hm.feat_pat, feat_label)
        rng = np.random.default_rng(2)
        wl = rng.normal(size=lc.n_params) * lc.free_mask()
        # map the linear-chain weights onto the pattern layout
        ws, wt, wst, wen = lc.split(wl)
        wh = np.zeros(hm.n_params)
        hs, hp, hst, hen = hm.split(wh)
        hs[...] = ws
        for i, z in enumerate(hm.patterns.patterns):
            if len(z) == 2:
                hp[i] = wt[z]
        hst[...] = wst
        hen[...] = wen
        gl, gh = np.empty_like(wl), np.empty_like(wh)
        np.testing.assert_allclose(hobj(wh, gh), lobj(wl, gl), rtol=RTOL)
        gs, gp, gst, gen = hm.split(gh)
        ls, lt, lst, len_ = lc.split(gl)
        np.testing.assert_allclose(gs, ls, rtol=RTOL, atol=1e-12)
        np.testing.assert_allclose(gst, lst, rtol=RTOL, atol=1e-12)
        np.testing.assert_allclose(gen, len_, rtol=RTOL, atol=1e-12)
        for i, z in enumerate(hm.patterns.patterns):
            if len(z) == 2:
                np.testing.assert_allclose(gp[i], lt[z], rtol=RTOL, atol=1e-12)


def test_order1_estimator_matches_linear_chain_crf():
    X, y = toy_data(30, seed=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = LinearChainCRF(c2=0.5, max_iterations=15, start_end_features=True).fit(X, y)   # as HigherOrderCRF
        b = HigherOrderCRF(order=1, c2=0.5, max_iterations=15).fit(X, y)
    np.testing.assert_allclose([e["loss"] for e in b.training_log_],
                               [e["loss"] for e in a.training_log_], rtol=1e-9)
    assert a.predict(X) == b.predict(X)


# ---------------------------------------------------------------------------------------------------
# estimator
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fitted():
    X, y = toy_data(40, seed=11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return X, y, HigherOrderCRF(order=2, max_iterations=30, c2=0.1).fit(X, y)


def test_dense_and_sparse_estimators_agree():
    X, y = toy_data(25, seed=12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = HigherOrderCRF(order=3, patterns="sparse", max_iterations=10).fit(X, y)
        b = HigherOrderCRF(order=3, patterns="dense", max_iterations=10).fit(X, y)
    np.testing.assert_allclose([e["loss"] for e in a.training_log_], [e["loss"] for e in b.training_log_],
                               rtol=1e-9)
    assert a.predict(X) == b.predict(X)
    for p, q in zip(a.predict_marginals(X, output="array"), b.predict_marginals(X, output="array")):
        np.testing.assert_allclose(p, q, rtol=1e-8, atol=1e-12)


def test_estimator_basics(fitted, tmp_path):
    X, y, crf = fitted
    assert crf.score(X, y) > 0.8
    pred = crf.predict(X)
    assert [len(p) for p in pred] == [len(s) for s in X]
    marg = crf.predict_marginals(X, output="array")
    for m in marg:
        np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=1e-10)
    d = crf.predict_marginals(X[:2])
    assert set(d[0][0]) == set(crf.classes_)
    p = crf.sequence_probability(X[:5], y[:5])
    assert np.all((p > 0) & (p <= 1))
    assert all(len(z) <= 3 for z in crf.patterns_)
    assert any(len(a[1]) == 2 for a in crf.state_features_)  # bigram-conditioned state features
    assert any(len(z) == 3 for z in crf.transition_features_ if "<start>" not in z and "<end>" not in z)
    # constrained decoding
    cons = [{0: "B"}] + [None] * (len(X) - 1)
    assert crf.predict(X, constraints=cons)[0][0] == "B"
    # empty and length-1 sequences
    assert crf.predict([[], [X[0][0]]])[0] == []
    # save / load round trip
    path = crf.save(tmp_path / "m.npz")
    back = HigherOrderCRF.load(path)
    assert back.predict(X) == pred
    assert back.get_params() == crf.get_params()
    np.testing.assert_array_equal(back.coef_, crf.coef_)
    with pytest.raises(ValueError, match="not 'linear-chain-crf'|higher-order-crf"):
        LinearChainCRF.load(path)


def test_contract_and_errors(fitted):
    X, y, _ = fitted
    crf = HigherOrderCRF(order=3, patterns="dense", c2=0.2)
    c = clone(crf)
    assert c.get_params() == crf.get_params()
    with pytest.raises(NotFittedError):
        crf.predict(X)
    for bad in (dict(order=0), dict(order=1.5), dict(patterns="banded"), dict(order=2, state_order=3),
                dict(c2=-1.0), dict(max_iterations=0)):
        with pytest.raises(ValueError):
            HigherOrderCRF(**bad).fit(X, y)
    with pytest.raises(ValueError, match="sequences"):
        HigherOrderCRF(max_iterations=2).fit(X, y[:-1])
    kb = fitted[2].kbest(X[:3], k=3)
    assert kb[0][0][0] == fitted[2].predict(X[:1])[0] and kb[0][0][1] >= kb[0][1][1]


# ---------------------------------------------------------------------------------------------------
# real data
# ---------------------------------------------------------------------------------------------------
def _conll2002_esp_subset():
    """CoNLL-2002 Spanish, "ner-nochunk" attributes: the first 1 000 training and 500 testa sentences."""
    from structlearn.datasets import load_conll2002
    from structlearn.io.conll import featurize
    from structlearn.io.templates import get_template

    root = require_data("conll2002")
    data = load_conll2002("esp", data_home=root.parent, download_if_missing=False)
    tpl = get_template("ner-nochunk")
    Xtr, ytr = featurize(data.train[:1000], tpl)
    Xte, yte = featurize(data.testa[:500], tpl)
    return Xtr, ytr, Xte, yte


@pytest.mark.slow
def test_conll2002_spanish_order2_subset():
    """Order 2 (sparse) on the first 1 000 training sentences, 30 L-BFGS iterations: entity F1 on the
    first 500 testa sentences is sensible (measured 0.6285; about 2 minutes on one core)."""
    from structlearn.metrics.sequence import chunk_f1

    Xtr, ytr, Xte, yte = _conll2002_esp_subset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf = HigherOrderCRF(order=2, max_iterations=30).fit(Xtr, ytr)
    f1 = chunk_f1(yte, crf.predict(Xte))
    assert f1 > 0.55


# ---------------------------------------------------------------------------------------------------
# segments
# ---------------------------------------------------------------------------------------------------
def _segment_objective(X, y, d, c2=0.3):
    from structlearn.crf.objectives import SegmentCLL

    crf = HigherOrderCRF(order=d, segments=True)
    vocab = AttributeVocabulary()
    packed = vocab.encode(X, grow=True)
    classes = sorted({lab for s in y for lab in s})
    yy = np.array([classes.index(lab) for s in y for lab in s])
    model = crf._segment_model(yy, packed, len(classes), len(vocab))
    return SegmentCLL(model, packed, yy, c2=c2), model, packed, yy


def runs_data(n=10, seed=0):
    """Label runs of length 1..3 whose next label depends on the two previous runs."""
    rng = np.random.default_rng(seed)
    labels = "ABC"
    X, y = [], []
    for _ in range(n):
        T = int(rng.integers(1, 7))
        ys = []
        p1, p2 = 0, 1
        while len(ys) < T:
            k = (p1 + p2) % 3 if rng.random() < 0.7 else int(rng.integers(0, 3))
            if k == p1:
                k = (k + 1) % 3
            ys += [labels[k]] * int(rng.integers(1, 4))
            p2, p1 = p1, k
        ys = ys[:T]
        X.append([{"w": f"w{lab}{int(rng.integers(0, 2))}", "num": float(rng.normal())} for lab in ys])
        y.append(ys)
    return X, y


@pytest.mark.parametrize("d", [1, 2, 3])
def test_segments_against_oracle(d):
    from tests.oracles.higher_order import segment_pattern_oracle, segment_score

    X, y = runs_data(8, seed=d)
    obj, model, packed, yy = _segment_objective(X, y, d)
    rng = np.random.default_rng(d)
    w = rng.normal(size=model.n_params) * model.free_mask()
    ch = model.structure(w, packed)
    ws, wp, wd, st_, en = model.split(w)
    from structlearn.engine.kernels.features import state_potentials
    unary = state_potentials(ws, packed.item_ptr, packed.item_attr, packed.item_val, model.attr_ptr,
                             model.feat_label, model.n_labels)
    wp = np.where(model.patterns.lengths >= 2, wp, 0.0)
    dur = np.where(model.free_mask_dur(), wd, -np.inf)
    log_z, best = ch.log_partition(), ch.max()
    lab = ch.marginals().unary
    pred = ch.argmax()
    want = 0.0
    for b in range(len(packed.lengths)):
        o0, o1 = packed.offsets[b], packed.offsets[b + 1]
        olz, olab, obest, _ = segment_pattern_oracle(unary[o0:o1], dur, model.patterns.patterns, wp, st_, en)
        np.testing.assert_allclose(log_z[b], olz, rtol=RTOL)
        np.testing.assert_allclose(best[b], obest, rtol=RTOL)
        np.testing.assert_allclose(lab[o0:o1], olab, rtol=RTOL, atol=1e-12)
        segs = [tuple(r) for r in ch.argmax_segments()[b]]
        np.testing.assert_allclose(segment_score(segs, unary[o0:o1], dur, model.patterns.patterns, wp,
                                                 st_, en), obest, rtol=RTOL)
        assert [k for a, e, k in segs for _ in range(a, e + 1)] == list(pred[o0:o1])
        ys = yy[o0:o1]
        gold = []
        for t in range(len(ys)):
            if t == 0 or ys[t] != ys[t - 1]:
                gold.append([t, t, ys[t]])
            else:
                gold[-1][1] = t
        want += olz - segment_score([tuple(g) for g in gold], unary[o0:o1], dur, model.patterns.patterns,
                                    wp, st_, en)
    np.testing.assert_allclose(obj(w) - 0.3 * float(w @ w), want, rtol=RTOL)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_segments_gradient_finite_differences(d):
    X, y = runs_data(10, seed=10 + d)
    obj, model, _, _ = _segment_objective(X, y, d)
    _check_gradient_fd(obj, model)


def test_segments_estimator(tmp_path):
    X, y = runs_data(40, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf = HigherOrderCRF(order=2, segments=True, max_iterations=30, c2=0.1).fit(X, y)
    assert crf.score(X, y) > 0.7
    pred = crf.predict(X)
    for m in crf.predict_marginals(X, output="array"):
        np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=1e-10)
    assert any(len(z) == 3 for z in crf.transition_features_ if "<start>" not in z and "<end>" not in z)
    assert crf.predict(X, constraints=[{0: "B"}] + [None] * (len(X) - 1))[0][0] == "B"
    p = crf.sequence_probability(X, y)
    assert np.all((p > 0) & (p <= 1))
    back = HigherOrderCRF.load(crf.save(tmp_path / "seg.npz"))
    assert back.predict(X) == pred
    assert crf.kbest(X[:1], 1)[0][0][0] == pred[0]  # k-best and sparse: test_higher_order_segments_sparse.py
    with pytest.raises(ValueError, match="state_order"):
        HigherOrderCRF(order=2, segments=True, patterns="dense", state_order=2).fit(X, y)


@pytest.mark.slow
def test_conll2002_spanish_segments_order2_subset():
    """segments=True, order 2 over entity-type runs (BIO -> types -> BIO), first 1 000 training
    sentences, 30 iterations: entity F1 on the first 500 testa sentences is sensible (measured 0.5968,
    about 40 s)."""
    from structlearn.metrics.sequence import chunk_f1

    def to_type(s):
        return [lab[2:] if lab != "O" else "O" for lab in s]

    def to_bio(s):
        return ["O" if lab == "O" else ("I-" if i and s[i - 1] == lab else "B-") + lab
                for i, lab in enumerate(s)]

    Xtr, ytr, Xte, yte = _conll2002_esp_subset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf = HigherOrderCRF(order=2, segments=True, max_iterations=30).fit(Xtr, [to_type(s) for s in ytr])
    f1 = chunk_f1(yte, [to_bio(p) for p in crf.predict(Xte)])
    assert f1 > 0.52
