"""HigherOrderFeatureModel.expected_counts (the fused sparse kernel) against the unfused path
(structure → pattern_marginals / score / gradient): same log Z, gold scores and expected counts, with
every attribute read as a dense row, none, or the default split; indicator and real-valued items; the
linear-space pass and the log-space recursion."""
import numpy as np
import pytest

from structlearn.crf.features import AttributeVocabulary
from structlearn.crf._higher_order_potentials import (HigherOrderFeatureModel, LabelPatterns, PatternChain,
                                             build_pattern_state_features)

RTOL = 1e-10


def _data(seed, n=30, K=4, real=True):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        T = int(rng.integers(0, 9))
        xs, ys = [], []
        prev = 0
        for _t in range(T):
            lab = int(rng.integers(0, K)) if rng.random() < 0.4 else (prev + 1) % K
            item = {f"w{lab}{int(rng.integers(0, 3))}": 1.0, "bias": 1.0, f"r{int(rng.integers(0, 20))}": 1.0}
            if real:
                item["num"] = float(rng.normal())
            xs.append(item)
            ys.append(lab)
            prev = lab
        X.append(xs)
        y.extend(ys)
    vocab = AttributeVocabulary()
    packed = vocab.encode(X, grow=True)
    return vocab, packed, np.array(y, np.int64), K


def _unfused(model, w, packed, y):
    ch = model.structure(w, packed)
    log_z, lab, tok, tot = ch.pattern_marginals()
    off = packed.offsets
    nz = np.flatnonzero(packed.lengths > 0)
    g = model.gradient(tok, tot, lab[off[nz]].sum(axis=0), lab[off[nz + 1] - 1].sum(axis=0), packed)
    return log_z, ch.score(y), g


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("dense_min", [None, 1, 10 ** 9])
@pytest.mark.parametrize("real", [False, True])
def test_fused_equals_unfused(d, dense_min, real):
    vocab, packed, y, K = _data(d + 7 * (dense_min or 0) % 5, real=real)
    pt = LabelPatterns.from_labels(y, packed.offsets, K, d, min(d, 2))
    attr_ptr, feat_pat = build_pattern_state_features(packed, y, pt, len(vocab))
    model = HigherOrderFeatureModel(pt, attr_ptr, feat_pat, "sparse")
    model.dense_min_patterns = dense_min
    rng = np.random.default_rng(d)
    for scale in (0.3, 3.0):
        w = scale * rng.normal(size=model.n_params) * model.free_mask()
        lz, gold, g = model.expected_counts(w, packed, y, n_chunks=3)
        ulz, ugold, ug = _unfused(model, w, packed, y)
        np.testing.assert_allclose(lz, ulz, rtol=RTOL)
        np.testing.assert_allclose(gold, ugold, rtol=RTOL)
        np.testing.assert_allclose(g, ug, rtol=RTOL, atol=1e-11)
    if dense_min == 1:
        assert model._dense_rows()[3] > 0
    if d == 3:  # the linear pass's default edges (failure links) are exercised
        sa = pt.sparse()
        assert sa["nd"].size < sa["dst"].size - K


@pytest.mark.parametrize("linear", [True, False])
def test_fused_log_space_and_spread_potentials(linear, monkeypatch):
    """Large weights (the linear pass declines) and the log-space recursion alone give the same counts."""
    monkeypatch.setattr(PatternChain, "linear", linear)
    vocab, packed, y, K = _data(5)
    pt = LabelPatterns.from_labels(y, packed.offsets, K, 3, 2)
    attr_ptr, feat_pat = build_pattern_state_features(packed, y, pt, len(vocab))
    model = HigherOrderFeatureModel(pt, attr_ptr, feat_pat, "sparse")
    rng = np.random.default_rng(0)
    for scale in (1.0, 200.0):
        w = scale * rng.normal(size=model.n_params) * model.free_mask()
        lz, gold, g = model.expected_counts(w, packed, y)
        ulz, ugold, ug = _unfused(model, w, packed, y)
        np.testing.assert_allclose(lz, ulz, rtol=RTOL)
        np.testing.assert_allclose(gold, ugold, rtol=RTOL)
        np.testing.assert_allclose(g, ug, rtol=1e-9, atol=1e-9)


def test_dense_mode_expected_counts_and_pickle():
    import pickle

    vocab, packed, y, K = _data(3)
    pt = LabelPatterns.from_labels(y, packed.offsets, K, 2, 2)
    attr_ptr, feat_pat = build_pattern_state_features(packed, y, pt, len(vocab))
    dense = HigherOrderFeatureModel(pt, attr_ptr, feat_pat, "dense")
    sparse = HigherOrderFeatureModel(pt, attr_ptr, feat_pat, "sparse")
    w = np.random.default_rng(1).normal(size=sparse.n_params) * sparse.free_mask()
    for a, b in zip(dense.expected_counts(w, packed, y), sparse.expected_counts(w, packed, y)):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-11)
    back = pickle.loads(pickle.dumps(sparse))
    assert back._cache == {}
    np.testing.assert_allclose(back.expected_counts(w, packed, y)[2], sparse.expected_counts(w, packed, y)[2],
                               rtol=RTOL)
