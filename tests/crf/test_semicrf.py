"""SemiMarkovCRF: gradient, likelihood against brute force over segmentations, contract, model files."""
import copy
import math
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from structlearn import SemiMarkovCRF
from structlearn.crf.objectives import SemiMarkovCLL
from tests.oracles._common import segmentations

WORDS = ["The", "cat", "sat", "on", "Big", "Mat", "dog", "ran"]


def random_problem(seed, n_seq=4, max_len=5, labels=("A", "B", "C")):
    rng = np.random.RandomState(seed)
    X, y = [], []
    for _ in range(n_seq):
        T = rng.randint(1, max_len + 1)
        X.append([{"w[0]": WORDS[rng.randint(len(WORDS))], "p": ["x", "y"][rng.randint(2)],
                   "v": float(rng.rand())} for _ in range(T)])
        y.append([labels[rng.randint(len(labels))] for _ in range(T)])
    return X, y


def fitted(X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return SemiMarkovCRF(max_iterations=1, **kw).fit(X, y)


def objective_of(est, X, y, c2=0.0):
    batch = est._batch(X)
    est._map_spans(batch)
    fmt = est.label_format_
    segs, so = est._pack_segments(est._segments_of(y, batch.lengths, fmt), grow=False)
    batch.segments, batch.seg_offsets = segs, so
    return SemiMarkovCLL(est.model_, batch, segs, c2=c2), batch


ALL = ("first", "last", "span", "caps")


@pytest.mark.parametrize("allow_same_label, fmt", [(False, "runs"), (True, "segments")])
@pytest.mark.parametrize("features", [(), ALL])
def test_gradient_matches_finite_differences(allow_same_label, fmt, features):
    X, y = random_problem(0)
    if fmt == "segments":  # explicit segments, consecutive same labels included
        y = [[(0, 1, "A"), (1, len(s), "A")] if len(s) > 1 else [(0, 1, "B")] for s in y]
    est = fitted(X, y, allow_same_label=allow_same_label, segment_features=features,
                 max_segment_length=3 if fmt == "runs" else 4, all_possible_transitions=True)
    f, _ = objective_of(est, X, y, c2=0.1)
    rng = np.random.RandomState(1)
    mask = f.mask
    w = rng.normal(scale=0.5, size=mask.size) * mask
    g = np.zeros_like(w)
    f(w, g)
    idx = np.flatnonzero(mask)
    idx = rng.choice(idx, size=min(40, idx.size), replace=False)
    h = 1e-6
    for i in idx:
        e = np.zeros_like(w)
        e[i] = h
        num = (f(w + e) - f(w - e)) / (2 * h)
        np.testing.assert_allclose(g[i], num, rtol=1e-5, atol=1e-6)
    assert np.all(g[~mask] == 0)


def _segment_score(est, w, x, segs, K):
    """Score of one segmentation written out from the feature definitions (independent of the
    potential kernels): state features over the span, duration, segment features, transitions."""
    m = est.model_
    p = m.split(w)
    attrs = {a: i for i, a in enumerate(est.attributes_)}

    def state(block, item, k):
        tot = 0.0
        for key, v in item.items():
            name, val = (key + ":" + v, 1.0) if isinstance(v, str) else (key, float(v))
            a = attrs.get(name)
            if a is None:
                continue
            for f in range(m.attr_ptr[a], m.attr_ptr[a + 1]):
                if m.feat_label[f] == k:
                    tot += val * block[f]
        return tot

    span_id = None
    if "span" in m.segment_features:  # which training span string [s, e] is (lookup only)
        batch = est._batch([x])
        est._map_spans(batch)
        span_id = batch.span_id
    tr, st, en, dur = m.chain_potentials(w)
    total = st[segs[0][2]] + en[segs[-1][2]]
    for i, (s, e, k) in enumerate(segs):
        d = e - s + 1
        if d > m.max_lengths[k]:
            return -math.inf
        total += dur[d - 1, k]
        total += sum(state(p["state"], x[u], k) for u in range(s, e + 1))
        if "first" in m.segment_features:
            total += state(p["first"], x[s], k)
        if "last" in m.segment_features:
            total += state(p["last"], x[e], k)
        if span_id is not None and d - 1 < span_id.shape[1] and span_id[e, d - 1] >= 0:
            total += p["span"][span_id[e, d - 1], k]
        if "caps" in m.segment_features and all(x[u]["w[0]"][:1].isupper() for u in range(s, e + 1)):
            total += p["caps"][k]
        if i:
            prev = segs[i - 1][2]
            if prev == k and not m.allow_same_label:
                return -math.inf
            total += tr[prev, k]
    return total


@pytest.mark.parametrize("allow_same_label", [False, True])
@pytest.mark.parametrize("features", [(), ("first", "last", "caps"), ALL])
def test_log_likelihood_matches_brute_force(allow_same_label, features):
    X, y = random_problem(3, n_seq=3, max_len=4, labels=("A", "B"))
    est = fitted(X, y, allow_same_label=allow_same_label, segment_features=features,
                 max_segment_length=3, all_possible_transitions=True, all_possible_states=True)
    f, batch = objective_of(est, X, y)
    rng = np.random.RandomState(5)
    w = rng.normal(size=f.mask.size) * f.mask
    K = len(est.classes_)
    expected = 0.0
    for b, x in enumerate(X):
        T = len(x)
        scores = [_segment_score(est, w, x, segs, K) for segs in segmentations(T, 3, K)]
        scores = [s for s in scores if s > -math.inf]
        mx = max(scores)
        log_z = mx + math.log(math.fsum(math.exp(s - mx) for s in scores))
        gold = [tuple(r) for r in batch.segment_lists()[b]]
        expected += log_z - _segment_score(est, w, x, gold, K)
        np.testing.assert_allclose(est.model_.structure(w, batch).log_partition()[b], log_z, rtol=1e-10)
    np.testing.assert_allclose(f(w), expected, rtol=1e-10)


def test_span_feature_scores_whole_span_strings():
    X = [[{"w[0]": "New"}, {"w[0]": "York"}, {"w[0]": "is"}], [{"w[0]": "York"}, {"w[0]": "New"}]]
    y = [[(0, 2, "LOC")], [(0, 1, "LOC")]]
    est = fitted(X, y, allow_same_label=True, segment_features=("span",))
    # gold span strings: "New York", "York" and the one-token outside segments "is", "New"
    assert est.model_.n_spans == 4
    batch = est._batch(X)
    est._map_spans(batch)
    sid = batch.span_id
    assert sid[1, 1] >= 0 and sid[3, 0] >= 0 and sid[1, 0] == sid[3, 0] and sid[0, 0] == sid[4, 0]
    assert sid[2, 1] == -1  # "York is" was never a gold span
    assert sid[4, 1] == -1  # "York New" was never a gold span


def test_label_formats_and_predictions():
    X = [[{"w": str(i)} for i in range(5)]] * 2
    bio = [["B-NP", "I-NP", "O", "B-VP", "B-VP"]] * 2
    est = SemiMarkovCRF(allow_same_label=True, c2=0.01).fit(X, bio)
    assert est.label_format_ == "bio"
    assert set(est.classes_) == {"NP", "O", "VP"}
    assert est.max_lengths_ == {"NP": 2, "O": 1, "VP": 1}
    assert est.predict(X) == bio
    assert est.predict_segments(X)[0] == [(0, 2, "NP"), (3, 4, "VP"), (4, 5, "VP")]
    assert est.score(X, bio) == 1.0
    kb = est.kbest(X, 3)[0]
    assert kb[0][0] == est.predict_segments(X)[0] and len(kb) == 3
    assert kb[0][1] >= kb[1][1] >= kb[2][1]
    np.testing.assert_allclose(est.segmentation_probability(X, bio), kb[0][1] * np.ones(2))
    np.testing.assert_allclose(est.predict_proba_sequence(X), kb[0][1] * np.ones(2))
    assert est.kbest(X, 2, output="labels")[0][0] == (bio[0], kb[0][1])
    marg = est.predict_marginals(X)
    np.testing.assert_allclose(marg[0].sum(axis=1), 1.0)
    # constrained decoding: force token 0 into a VP segment
    pred = est.predict_segments(X, constraints=[{0: "VP"}, None])
    assert pred[0][0] == (0, 1, "VP") and pred[1] == est.predict_segments(X)[1]
    runs = [["a", "a", "b", "b", "b"]]
    est = SemiMarkovCRF(c2=0.01).fit(X[:1], runs)
    assert est.label_format_ == "runs" and est.predict(X[:1]) == runs
    assert est.predict_segments(X[:1]) == [[(0, 2, "a"), (2, 5, "b")]]


def test_max_segment_length_rules():
    X = [[{"w": str(i)} for i in range(5)]] * 2
    bio = [["B-NP", "I-NP", "O", "B-VP", "B-VP"]] * 2
    kw = dict(allow_same_label=True, c2=0.01)
    per_label = {"NP": 2, "O": 1, "VP": 1}
    assert SemiMarkovCRF(**kw).fit(X, bio).max_lengths_ == per_label
    assert SemiMarkovCRF(max_segment_length="per-label", **kw).fit(X, bio).max_lengths_ == per_label
    assert SemiMarkovCRF(max_segment_length="global", **kw).fit(X, bio).max_lengths_ == \
        {"NP": 2, "O": 2, "VP": 2}
    assert SemiMarkovCRF(max_segment_length=3, **kw).fit(X, bio).max_lengths_ == \
        {"NP": 3, "O": 3, "VP": 3}
    with pytest.raises(ValueError, match="max_segment_length"):
        SemiMarkovCRF(max_segment_length="longest", **kw).fit(X, bio)


def test_bad_input():
    X = [[{"w": "a"}, {"w": "b"}]]
    with pytest.raises(ValueError, match="allow_same_label"):
        SemiMarkovCRF().fit(X, [[(0, 1, "A"), (1, 2, "A")]])
    with pytest.raises(ValueError, match="max_segment_length"):
        SemiMarkovCRF(max_segment_length=1).fit(X, [["A", "A"]])
    with pytest.raises(ValueError, match="overlaps"):
        SemiMarkovCRF().fit(X, [[(0, 2, "A"), (1, 2, "B")]])
    with pytest.raises(ValueError, match="segment_features"):
        SemiMarkovCRF(segment_features=("bogus",)).fit(X, [["A", "B"]])
    with pytest.raises(ValueError, match="algorithm"):
        SemiMarkovCRF(algorithm="ap").fit(X, [["A", "B"]])
    with pytest.raises(ValueError, match="labels"):
        SemiMarkovCRF().fit(X, [["A"]])


def test_estimator_contract(tmp_path):
    X, y = random_problem(7, n_seq=6)
    est = SemiMarkovCRF(segment_features=ALL, c2=0.1, max_iterations=30)
    assert clone(est).get_params() == est.get_params()
    with pytest.raises(NotFittedError):
        est.predict(X)
    X0, y0 = copy.deepcopy(X), copy.deepcopy(y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert est.fit(X, y) is est
    assert X == X0 and y == y0
    assert est.training_log_ and est.n_iter_ == len(est.training_log_)
    path = est.save(tmp_path / "semi.npz", metadata={"template": "t"})
    est2 = SemiMarkovCRF.load(path)
    assert est2.predict(X) == est.predict(X)
    assert est2.predict_segments(X) == est.predict_segments(X)
    for a, b in zip(est2.predict_marginals(X), est.predict_marginals(X)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(est2.log_partition(X), est.log_partition(X), rtol=1e-12)
    assert est2.metadata_ == {"template": "t"} and est2.get_params() == est.get_params()


def test_chunked_evaluation_matches_single_chunk(monkeypatch):
    import structlearn.crf._semi_markov_potentials as mod

    X, y = random_problem(11, n_seq=8, max_len=6)
    est = fitted(X, y, allow_same_label=True, segment_features=ALL)
    f, _ = objective_of(est, X, y)
    w = np.random.RandomState(0).normal(size=f.mask.size) * f.mask
    g1 = np.zeros_like(w)
    v1 = f(w, g1)
    monkeypatch.setattr(mod, "CHUNK_ENTRIES", 1)  # one sequence per chunk
    g2 = np.zeros_like(w)
    v2 = f(w, g2)
    np.testing.assert_allclose(v2, v1, rtol=1e-12)
    np.testing.assert_allclose(g2, g1, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("allow_same_label", [False, True])
@pytest.mark.parametrize("features", [(), ("first", "last"), ALL])
def test_fused_objective_matches_engine(allow_same_label, features):
    """The fused training kernel (kernels/semicrf.py) = the SemiMarkov engine's log Z and marginals."""
    from structlearn.crf.objectives import _CLL

    X, y = random_problem(21, n_seq=7, max_len=7)
    est = fitted(X, y, allow_same_label=allow_same_label, segment_features=features,
                 all_possible_transitions=True)
    f, _ = objective_of(est, X, y, c2=0.05)
    rng = np.random.RandomState(2)
    for scale in (0.5, 30.0):  # large weights: the linear-space transition sums fall back to log space
        w = rng.normal(scale=scale, size=f.mask.size) * f.mask
        g1, g2 = np.zeros_like(w), np.zeros_like(w)
        v1 = f(w, g1)
        v2 = _CLL.__call__(f, w, g2)
        np.testing.assert_allclose(v1, v2, rtol=1e-10)
        np.testing.assert_allclose(g1, g2, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("allow_same_label", [False, True])
@pytest.mark.parametrize("features", [(), ALL])
def test_decoding_matches_brute_force(allow_same_label, features):
    """Viterbi, k-best, constrained decoding, sequence probability, token and segment marginals of the
    estimator against enumeration of all segmentations (scores from the feature definitions)."""
    X, y = random_problem(4, n_seq=3, max_len=4, labels=("A", "B"))
    est = fitted(X, y, allow_same_label=allow_same_label, segment_features=features,
                 max_segment_length=3, all_possible_transitions=True, all_possible_states=True)
    m = est.model_
    rng = np.random.RandomState(8)
    est.coef_ = rng.normal(size=m.n_params) * m.free_mask()
    K = len(est.classes_)
    cls = est.classes_
    viterbi = est.predict_segments(X)
    kbest = est.kbest(X, 4)
    proba = est.predict_proba_sequence(X)
    tok_marg = est.predict_marginals(X)
    seg_marg = est.predict_segment_marginals(X, threshold=0.0)
    for b, x in enumerate(X):
        T = len(x)
        scored = [(_segment_score(est, est.coef_, x, segs, K), segs)
                  for segs in segmentations(T, 3, K)]
        scored = sorted([(s, g) for s, g in scored if s > -math.inf], key=lambda t: -t[0])
        mx = scored[0][0]
        log_z = mx + math.log(math.fsum(math.exp(s - mx) for s, _ in scored))

        def public(segs):
            return [(s, e + 1, cls[k]) for s, e, k in segs]

        assert viterbi[b] == public(scored[0][1])
        np.testing.assert_allclose(proba[b], math.exp(mx - log_z), rtol=1e-10)
        got = kbest[b]
        assert len(got) == min(4, len(scored))
        for (segs, p), (s, g) in zip(got, scored):
            np.testing.assert_allclose(p, math.exp(s - log_z), rtol=1e-9)
        assert got[0][0] == public(scored[0][1])
        occ = np.zeros((T, K))
        seg_p = {}
        for s, g in scored:
            p = math.exp(s - log_z)
            for (a, e, k) in g:
                occ[a:e + 1, k] += p
                seg_p[(a, e + 1, cls[k])] = seg_p.get((a, e + 1, cls[k]), 0.0) + p
        np.testing.assert_allclose(tok_marg[b], occ, rtol=1e-9, atol=1e-12)
        got_seg = {(s, e, lab): p for s, e, lab, p in seg_marg[b]}
        for key, p in seg_p.items():
            if p > 1e-12:
                np.testing.assert_allclose(got_seg[key], p, rtol=1e-9)
        # constrained decoding: token 0 must lie in a segment labelled cls[1]
        cons = [{0: cls[1]} if i == b else None for i in range(len(X))]
        best = next(g for s, g in scored if g[0][2] == 1)
        assert est.predict_segments(X, constraints=cons)[b] == public(best)
