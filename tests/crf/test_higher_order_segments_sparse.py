"""HigherOrderCRF(segments=True, patterns="sparse"): the pattern-prefix super-labels (Nguyen, Ye, Lee & Chieu
2011) against brute force over segmentations × labellings, equal to the dense tuple form, gradients,
k-best (both forms) against enumeration, and the estimator surface."""
import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from structlearn import HigherOrderCRF
from structlearn.crf.objectives import SegmentCLL
from structlearn.crf.features import AttributeVocabulary
from structlearn.crf._higher_order_potentials import LabelPatterns
from structlearn.crf._segment_patterns import SegmentPatternModel
from structlearn.crf._segment_patterns_sparse import SparseSegmentPatternModel, segment_prefix_automaton
from tests.crf.test_higher_order import runs_data
from tests.oracles.segment_ngrams import oracle, score as oracle_score

RTOL = 1e-10


def _encode(X, y):
    vocab = AttributeVocabulary()
    packed = vocab.encode(X, grow=True)
    classes = sorted({lab for s in y for lab in s})
    yy = np.array([classes.index(lab) for s in y for lab in s], np.int64)
    return vocab, packed, classes, yy


def _model(X, y, d, mode, state_order=1, all_possible=False):
    crf = HigherOrderCRF(order=d, segments=True, patterns=mode, state_order=state_order,
                         all_possible_transitions=all_possible)
    vocab, packed, classes, yy = _encode(X, y)
    return crf._segment_model(yy, packed, len(classes), len(vocab)), packed, yy


def _phi(model, w, packed):
    """(N, Zs) state-pattern token potentials, by plain loops over the packed items."""
    ws = model.split(w)[0]
    phi = np.zeros((packed.n_items, model.patterns.n_state_patterns))
    for n in range(packed.n_items):
        for p in range(packed.item_ptr[n], packed.item_ptr[n + 1]):
            a, v = packed.item_attr[p], packed.item_val[p]
            for f in range(model.attr_ptr[a], model.attr_ptr[a + 1]):
                phi[n, model.feat_label[f]] += v * ws[f]
    return phi


def _oracle_parts(model, w, packed):
    _, wp, wd, st_, en = model.split(w)
    wp = np.where(model.patterns.lengths >= 2, wp, 0.0)
    dur = np.where(model.free_mask_dur(), wd, -np.inf)
    return _phi(model, w, packed), dur, wp, st_, en


def _random_w(model, rng, scale=1.0):
    return scale * rng.normal(size=model.n_params) * model.free_mask()


def _expected_from_oracle(model, w, packed):
    """(Σ log Z, expected feature vector) by enumeration, the state part scattered by plain loops."""
    phi, dur, wp, st_, en = _oracle_parts(model, w, packed)
    g = np.zeros(model.n_params)
    gs, gp, gd, gst, gen = model.split(g)
    lz = 0.0
    for b in range(len(packed.lengths)):
        o0, o1 = packed.offsets[b], packed.offsets[b + 1]
        o = oracle(phi[o0:o1], dur, model.patterns.patterns, wp, st_, en, model.n_labels)
        lz += o["log_z"]
        for n in range(o0, o1):
            for p in range(packed.item_ptr[n], packed.item_ptr[n + 1]):
                a, v = packed.item_attr[p], packed.item_val[p]
                for f in range(model.attr_ptr[a], model.attr_ptr[a + 1]):
                    gs[f] += v * o["tok"][n - o0, model.feat_label[f]]
        gp += np.where(model.patterns.lengths >= 2, o["counts"], 0.0)
        gd += np.where(model.free_mask_dur(), o["dur"], 0.0)
        if o1 > o0:
            gst += o["first"]
            gen += o["last"]
    return lz, g


# ---------------------------------------------------------------------------------------------------
# the automaton
# ---------------------------------------------------------------------------------------------------
def test_automaton_states_are_pattern_prefixes():
    pt = LabelPatterns([(0,), (1,), (2,), (0, 1), (0, 1, 2), (2, 0, 1), (1, 2, 0, 1)], 3, 3, 2)
    au = segment_prefix_automaton(pt)
    assert au["states"] == [(0,), (1,), (2,), (0, 1), (1, 2), (2, 0), (1, 2, 0)]
    step = {(s, y): q for s, q, y in zip(au["src"], au["dst"], au["label"])}
    S = {z: i for i, z in enumerate(au["states"])}
    # (1, 2, 0) then 1: the patterns (0, 1), (2, 0, 1), (1, 2, 0, 1) end there; the state is the longest suffix
    e = [i for i in range(len(au["src"])) if au["src"][i] == S[(1, 2, 0)] and au["label"][i] == 1][0]
    assert au["states"][step[(S[(1, 2, 0)], 1)]] == (0, 1)
    assert sorted(au["trans_inc"][e].indices.tolist()) == [3, 5, 6]
    assert au["state_map"][S[(0, 1)]].indices.tolist() == [1, 3]  # state patterns (1,), (0, 1)
    assert all(a != b for z in au["states"] for a, b in zip(z[:-1], z[1:]))


# ---------------------------------------------------------------------------------------------------
# brute force
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("d,s", [(1, 1), (2, 1), (2, 2), (3, 2), (3, 3)])
def test_sparse_against_oracle(d, s):
    X, y = runs_data(7, seed=20 + d)
    model, packed, yy = _model(X, y, d, "sparse", state_order=s)
    assert isinstance(model, SparseSegmentPatternModel)
    rng = np.random.default_rng(d * 10 + s)
    w = _random_w(model, rng)
    ch = model.structure(w, packed)
    phi, dur, wp, st_, en = _oracle_parts(model, w, packed)
    log_z, best, lab, pred = ch.log_partition(), ch.max(), ch.marginals().unary, ch.argmax()
    kb = ch.kbest(4)
    gold = ch.score(yy)
    for b in range(len(packed.lengths)):
        o0, o1 = packed.offsets[b], packed.offsets[b + 1]
        o = oracle(phi[o0:o1], dur, model.patterns.patterns, wp, st_, en, model.n_labels)
        np.testing.assert_allclose(log_z[b], o["log_z"], rtol=RTOL)
        np.testing.assert_allclose(lab[o0:o1], o["labels"], rtol=RTOL, atol=1e-12)
        np.testing.assert_allclose(best[b], o["ranked"][0][0], rtol=RTOL)
        assert tuple(pred[o0:o1]) == o["ranked"][0][1]
        for r, (sc, labels) in enumerate(o["ranked"][:4]):
            np.testing.assert_allclose(kb.scores[b, r], sc, rtol=RTOL)
        segs = [(int(a), int(e), int(k)) for a, e, k in ch.argmax_segments()[b]]
        np.testing.assert_allclose(oracle_score(segs, phi[o0:o1], dur, model.patterns.patterns, wp, st_,
                                                en), best[b], rtol=RTOL)
        ys = yy[o0:o1]
        gsegs = [(t0, t1 - 1, int(ys[t0])) for t0, t1 in _runs(ys)]
        np.testing.assert_allclose(gold[b], oracle_score(gsegs, phi[o0:o1], dur, model.patterns.patterns,
                                                         wp, st_, en), rtol=RTOL)


def _runs(ys):
    out, t0 = [], 0
    for t in range(1, len(ys) + 1):
        if t == len(ys) or ys[t] != ys[t - 1]:
            out.append((t0, t))
            t0 = t
    return out


@pytest.mark.parametrize("d,s", [(2, 2), (3, 1), (3, 3)])
def test_objective_and_expected_counts_against_oracle(d, s):
    X, y = runs_data(6, seed=40 + d)
    model, packed, yy = _model(X, y, d, "sparse", state_order=s)
    obj = SegmentCLL(model, packed, yy, c2=0.0)
    w = _random_w(model, np.random.default_rng(s))
    g = np.empty_like(w)
    value = obj(w, g)
    lz, expected = _expected_from_oracle(model, w, packed)
    gold = float(np.sum(model.structure(w, packed).score(yy)))
    np.testing.assert_allclose(value, lz - gold, rtol=RTOL)
    np.testing.assert_allclose(g, (expected - obj.empirical) * model.free_mask(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(w @ obj.empirical, gold, rtol=RTOL)  # empirical counts score the gold


@pytest.mark.parametrize("d", [2, 3])
def test_sparse_gradient_finite_differences(d):
    X, y = runs_data(8, seed=60 + d)
    model, packed, yy = _model(X, y, d, "sparse", state_order=2)
    obj = SegmentCLL(model, packed, yy, c2=0.1)
    rng = np.random.default_rng(0)
    w = _random_w(model, rng, 0.5)
    g = np.empty_like(w)
    obj(w, g)
    idx = np.flatnonzero(model.free_mask())
    for i in rng.choice(idx, size=min(30, idx.size), replace=False):
        e = np.zeros_like(w)
        e[i] = 1e-6
        np.testing.assert_allclose(g[i], (obj(w + e) - obj(w - e)) / 2e-6, rtol=1e-5, atol=1e-6)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10 ** 6), d=st.integers(1, 3), frac=st.floats(0.1, 1.0))
def test_random_pattern_sets_against_oracle(seed, d, frac):
    """Random pattern subsets (not only those of some training data) and random potentials."""
    rng = np.random.default_rng(seed)
    K = 3
    s = int(rng.integers(1, d + 1))
    grams = [z for n in range(2, d + 2) for z in itertools.product(range(K), repeat=n)
             if all(a != b for a, b in zip(z[:-1], z[1:])) and rng.random() < frac]
    pats = [(k,) for k in range(K)] + sorted([z for z in grams if len(z) <= s], key=len) + \
        [z for z in grams if len(z) > s]
    pt = LabelPatterns(pats, K, d, s)
    Zs = pt.n_state_patterns
    attr_ptr = np.arange(Zs + 1, dtype=np.int64)  # attribute j has one feature: state pattern j
    max_lengths = rng.integers(1, 4, size=K)
    model = SparseSegmentPatternModel(pt, attr_ptr, np.arange(Zs, dtype=np.int64), max_lengths)
    T = int(rng.integers(1, 6))
    X = [[{f"a{j}": float(rng.normal()) for j in range(Zs)} for _ in range(T)]]
    vocab = AttributeVocabulary()
    packed = vocab.encode(X, grow=True)
    remap = np.array([int(n[1:]) for n in vocab.names], np.int64)  # vocabulary id -> attribute j
    packed.item_attr[:] = remap[packed.item_attr]
    w = _random_w(model, rng)
    ch = model.structure(w, packed)
    phi, dur, wp, st_, en = _oracle_parts(model, w, packed)
    o = oracle(phi, dur, pt.patterns, wp, st_, en, K)
    np.testing.assert_allclose(ch.log_partition()[0], o["log_z"], rtol=RTOL)
    if o["log_z"] > -np.inf:
        np.testing.assert_allclose(ch.marginals().unary, o["labels"], rtol=RTOL, atol=1e-12)
        kb = ch.kbest(3)
        for r, (sc, labels) in enumerate(o["ranked"][:3]):
            np.testing.assert_allclose(kb.scores[0, r], sc, rtol=RTOL)


# ---------------------------------------------------------------------------------------------------
# sparse == dense
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("d,all_possible", [(1, False), (2, False), (2, True), (3, True)])
def test_sparse_equals_dense(d, all_possible):
    """Same patterns and weights: the same log Z, marginals, Viterbi, objective and gradient (with every
    K**n pattern present, and with the patterns seen)."""
    X, y = runs_data(10, seed=80 + d)
    ms, packed, yy = _model(X, y, d, "sparse", all_possible=all_possible)
    md, _, _ = _model(X, y, d, "dense", all_possible=all_possible)
    assert isinstance(md, SegmentPatternModel) and not isinstance(md, SparseSegmentPatternModel)
    assert ms.n_params == md.n_params and ms.patterns.patterns == md.patterns.patterns
    assert ms.n_states <= md.n_states
    w = _random_w(ms, np.random.default_rng(d))
    cs, cd = ms.structure(w, packed), md.structure(w, packed)
    np.testing.assert_allclose(cs.log_partition(), cd.log_partition(), rtol=RTOL)
    np.testing.assert_allclose(cs.marginals().unary, cd.marginals().unary, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(cs.max(), cd.max(), rtol=RTOL)
    np.testing.assert_array_equal(cs.argmax(), cd.argmax())
    np.testing.assert_allclose(cs.kbest(3).scores, cd.kbest(3).scores, rtol=RTOL)
    os_, od = SegmentCLL(ms, packed, yy, c2=0.2), SegmentCLL(md, packed, yy, c2=0.2)
    gs, gd = np.empty_like(w), np.empty_like(w)
    np.testing.assert_allclose(os_(w, gs), od(w, gd), rtol=RTOL)
    np.testing.assert_allclose(gs, gd, rtol=1e-9, atol=1e-11)


def test_blocked_expected_equals_one_block(monkeypatch):
    X, y = runs_data(12, seed=5)
    model, packed, yy = _model(X, y, 3, "sparse", state_order=2)
    w = _random_w(model, np.random.default_rng(3))
    lz1, e1 = model.structure(w, packed).expected(packed)
    from structlearn.crf._segment_patterns import SegmentPatternChain

    monkeypatch.setattr(SegmentPatternChain, "block_entries", 1)  # one sequence per block
    lz2, e2 = model.structure(w, packed).expected(packed)
    np.testing.assert_allclose(lz1, lz2, rtol=RTOL)
    np.testing.assert_allclose(e1, e2, rtol=RTOL, atol=1e-12)


# ---------------------------------------------------------------------------------------------------
# k-best through the estimator (both forms)
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["dense", "sparse"])
def test_estimator_kbest_against_enumeration(mode):
    X, y = runs_data(30, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf = HigherOrderCRF(order=2, segments=True, patterns=mode, max_iterations=15, c2=0.1).fit(X, y)
    Xs = [x for x in X if 2 <= len(x) <= 4][:3]
    res = crf.kbest(Xs, k=50)
    cls = list(crf.classes_)
    for x, lst in zip(Xs, res):
        seqs = [tuple(lab) for lab, _ in lst]
        assert len(set(seqs)) == len(seqs)  # one path per labelling: no duplicates
        probs = crf.sequence_probability([x] * len(seqs), [list(z) for z in seqs]) if seqs else []
        np.testing.assert_allclose([p for _, p in lst], probs, rtol=1e-9)
        # every labelling of the sequence, by probability: the k best are the top of that list
        every = [list(z) for z in itertools.product(cls, repeat=len(x))]
        pe = crf.sequence_probability([x] * len(every), every)
        top = np.sort(pe)[::-1]
        np.testing.assert_allclose([p for _, p in lst], top[:len(lst)], rtol=1e-9, atol=1e-300)
        assert np.count_nonzero(pe > 0) == len(lst) or len(lst) == 50
        assert lst[0][0] == crf.predict([x])[0]


# ---------------------------------------------------------------------------------------------------
# estimator surface
# ---------------------------------------------------------------------------------------------------
def test_sparse_segments_estimator(tmp_path):
    X, y = runs_data(40, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf = HigherOrderCRF(order=3, segments=True, patterns="sparse", state_order=2, max_iterations=30,
                             c2=0.1).fit(X, y)
        dense = HigherOrderCRF(order=3, segments=True, patterns="dense", max_iterations=30, c2=0.1).fit(X, y)
    assert isinstance(crf.model_, SparseSegmentPatternModel)
    assert crf.score(X, y) > 0.7
    assert any(len(z) == 2 for _, z in crf.state_features_)  # state features on segment-label bigrams
    assert any(len(z) == 4 for z in crf.transition_features_)
    for m in crf.predict_marginals(X, output="array"):
        np.testing.assert_allclose(m.sum(axis=1), 1.0, rtol=1e-10)
    pred = crf.predict(X)
    assert crf.predict(X, constraints=[{0: "B"}] + [None] * (len(X) - 1))[0][0] == "B"
    back = HigherOrderCRF.load(crf.save(tmp_path / "seg_sparse.npz"))
    assert isinstance(back.model_, SparseSegmentPatternModel)
    assert back.predict(X) == pred
    assert back.kbest(X[:2], 3) == crf.kbest(X[:2], 3)
    assert dense.score(X, y) > 0.7
    with pytest.raises(ValueError, match="state_order"):
        HigherOrderCRF(order=2, segments=True, patterns="sparse", state_order=3).fit(X, y)
    with pytest.raises(ValueError, match="state_order"):
        HigherOrderCRF(order=2, segments=True, patterns="dense", state_order=2).fit(X, y)


def test_sparse_segments_same_fit_as_dense():
    """state_order 1: sparse and dense are one model; L-BFGS from the same start reaches the same
    weights (same objective values along the way up to rounding)."""
    X, y = runs_data(30, seed=11)
    fits = []
    for mode in ("sparse", "dense"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fits.append(HigherOrderCRF(order=2, segments=True, patterns=mode, max_iterations=10,
                                       c2=0.5).fit(X, y))
    np.testing.assert_allclose(fits[0].coef_, fits[1].coef_, rtol=1e-6, atol=1e-8)
    assert fits[0].predict(X) == fits[1].predict(X)


@pytest.mark.slow
def test_conll2002_spanish_order3_sparse_segments():
    """Order 3 over BIO-label runs (9 labels, 80-odd pattern-prefix states where the dense form needs 657),
    first 1 000 training sentences, 30 iterations: entity F1 on the first 500 testa sentences is sensible
    (2 000 sentences / 50 iterations measured 0.677 in benchmarks/bench_higher_order_segments.py)."""
    from structlearn.datasets import load_conll2002
    from structlearn.io.conll import featurize
    from structlearn.io.templates import get_template
    from structlearn.metrics.sequence import chunk_f1
    from tests.conftest import require_data

    root = require_data("conll2002")
    data = load_conll2002("esp", data_home=root.parent, download_if_missing=False)
    tpl = get_template("ner-nochunk")
    Xtr, ytr = featurize(data.train[:1000], tpl)
    Xte, yte = featurize(data.testa[:500], tpl)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        crf = HigherOrderCRF(order=3, segments=True, patterns="sparse", max_iterations=30).fit(Xtr, ytr)
    assert len(crf.classes_) == 9 and crf.model_.n_states < 150
    f1 = chunk_f1(yte, crf.predict(Xte))
    assert f1 > 0.5, f1
    kb = crf.kbest(Xte[:5], 3)
    assert all(lst[0][0] == p for lst, p in zip(kb, crf.predict(Xte[:5])))
