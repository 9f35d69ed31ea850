"""SemiMarkov structure: brute-force oracle agreement, reference twin, edge cases, stability."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from structlearn.engine.kernels import _reference_semimarkov as ref
from structlearn.engine.structures import semimarkov as sm_module
from structlearn.engine.structures.semimarkov import SemiMarkov
from tests.oracles import semimarkov as oracle
from tests.oracles._common import segmentations

RTOL = 1e-10
ATOL = 1e-12  # probabilities that are exactly 0 may come out as ~1e-17


# --------------------------------------------------------------------------------------------------
# random problems
# --------------------------------------------------------------------------------------------------
def _pot(rng, shape, p_inf, scale=2.0):
    x = rng.uniform(-scale, scale, size=shape)
    if p_inf:
        x[rng.random(shape) < p_inf] = -np.inf
    return x


def make_problem(seed, lengths, K, D, *, p_inf=0.1, allow_same_label=True, with_segment=False,
                 hooks=(), max_duration=None, defaults=False):
    """kwargs for SemiMarkov (unary, duration, transition + keywords)."""
    rng = np.random.default_rng(seed)
    N = int(sum(lengths))
    kw = dict(unary=_pot(rng, (N, K), p_inf), duration=_pot(rng, (D, K), p_inf),
              transition=_pot(rng, (K, K), p_inf), lengths=list(lengths),
              allow_same_label=allow_same_label, max_duration=max_duration)
    if not defaults:
        kw["start"] = _pot(rng, K, p_inf / 2)
        kw["end"] = _pot(rng, K, p_inf / 2)
    if with_segment:
        kw["segment"] = _pot(rng, (N, D, K), p_inf)
    for h in hooks:
        kw[h + "_duration"] = _pot(rng, (D, K), p_inf)
    return kw


def build(kw):
    kw = dict(kw)
    return SemiMarkov(kw.pop("unary"), kw.pop("duration"), kw.pop("transition"), **kw)


def oracle_params(kw, b):
    """Oracle parameter dict of sequence b, applying the documented defaults independently."""
    lengths = kw["lengths"]
    o = int(sum(lengths[:b]))
    T = int(lengths[b])
    K = kw["unary"].shape[1]
    D = kw["max_duration"] or kw["duration"].shape[0]
    dur = kw["duration"][:D]
    first = kw.get("first_duration")
    last = kw.get("last_duration")
    single = kw.get("single_duration")
    if single is None:
        single = first if first is not None else last if last is not None else kw["duration"]
    seg = kw.get("segment")
    return dict(unary=kw["unary"][o:o + T], duration=dur,
                first=(dur if first is None else first[:D]),
                last=(dur if last is None else last[:D]), single=single[:D],
                transition=kw["transition"],
                start=kw.get("start", np.zeros(K)), end=kw.get("end", np.zeros(K)),
                segment=None if seg is None else seg[o:o + T, :D],
                allow_same_label=kw["allow_same_label"])


@st.composite
def problems(draw, max_len=6, max_batch=3, p_inf=0.12):
    K = draw(st.integers(1, 3))
    D = draw(st.integers(1, 3))
    lengths = draw(st.lists(st.integers(0, max_len), min_size=1, max_size=max_batch))
    hooks = draw(st.sampled_from([(), ("first",), ("last",), ("single",), ("first", "single"),
                                  ("last", "single"), ("first", "last", "single")]))
    max_duration = draw(st.one_of(st.none(), st.integers(1, D)))
    return make_problem(draw(st.integers(0, 2**31 - 1)), lengths, K, D, p_inf=p_inf,
                        allow_same_label=draw(st.booleans()), with_segment=draw(st.booleans()),
                        hooks=hooks, max_duration=max_duration, defaults=draw(st.booleans()))


def summaries(kw):
    return [oracle.summary(oracle_params(kw, b)) for b in range(len(kw["lengths"]))]


def packed(kw, per_seq, key):
    return np.concatenate([s[key] for s in per_seq]) if per_seq else None


def select(kw, keep):
    """Problem restricted to the sequences in ``keep``."""
    lengths = kw["lengths"]
    offs = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
    rows = np.concatenate([np.arange(offs[b], offs[b + 1]) for b in keep]).astype(int)
    out = dict(kw)
    out["unary"] = kw["unary"][rows]
    out["lengths"] = [lengths[b] for b in keep]
    if kw.get("segment") is not None:
        out["segment"] = kw["segment"][rows]
    return out


# --------------------------------------------------------------------------------------------------
# oracle agreement
# --------------------------------------------------------------------------------------------------
@given(problems())
def test_log_partition_marginals_entropy_match_oracle(kw):
    sm = build(kw)
    per = summaries(kw)
    np.testing.assert_allclose(sm.log_partition(), [s["log_z"] if s["items"] else -np.inf for s in per],
                               rtol=RTOL)
    m = sm.marginals()
    np.testing.assert_allclose(m.unary, packed(kw, per, "token"), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(m.edge, packed(kw, per, "edge"), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(sm.segment_marginals(), packed(kw, per, "seg"), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(sm.entropy(), [s["entropy"] for s in per], rtol=RTOL, atol=1e-10)
    dm = sm.duration_marginals()
    for c, field in enumerate(dm._fields):
        np.testing.assert_allclose(getattr(dm, field), np.array([s["dur"][c] for s in per]),
                                   rtol=RTOL, atol=ATOL)
    # the streamed segments are the dense ones above the threshold
    dense = sm.segment_marginals()
    offs = sm.offsets
    got = {(b, s, e, k): p for b, s, e, k, p in sm.iter_segment_marginals(1e-3)}
    want = {(b, e - offs[b] - d, e - offs[b], k): dense[e, d, k]
            for e, d, k in zip(*np.nonzero(dense > 1e-3))
            for b in [int(np.searchsorted(offs, e, side="right") - 1)]}
    assert got.keys() == want.keys()
    for key in got:
        assert got[key] == pytest.approx(want[key], rel=RTOL)


@given(problems())
def test_decoding_and_scores_match_oracle(kw):
    sm = build(kw)
    per = summaries(kw)
    B = len(kw["lengths"])
    np.testing.assert_allclose(sm.max(), [s["max"] for s in per], rtol=RTOL)
    infeasible = [b for b in range(B) if not per[b]["items"]]
    if infeasible:
        for call in (sm.argmax, sm.argmax_segments, lambda: sm.kbest(2), lambda: sm.sample(2, 0)):
            with pytest.raises(ValueError, match=f"sequence {infeasible[0]} "):
                call()
        keep = [b for b in range(B) if per[b]["items"]]
        if not keep:
            return
        kw = select(kw, keep)
        sm = build(kw)
        per = [per[b] for b in keep]
        B = len(keep)
    params = [oracle_params(kw, b) for b in range(B)]
    # argmax: its segments score the max, token labels agree with the segments
    segs = sm.argmax_segments()
    labels = sm.argmax()
    for b in range(B):
        assert oracle.score(tuple(map(tuple, segs[b])), params[b]) == pytest.approx(per[b]["max"],
                                                                                   rel=RTOL)
        o = sm.offsets[b]
        for s, e, k in segs[b]:
            assert np.all(labels[o + s:o + e + 1] == k)
    # k-best: the exact top scores in order, distinct segmentations with their true scores
    k = 5
    kb = sm.kbest(k)
    kbs = sm.kbest_segments(k)
    for b in range(B):
        want = [s for s, _ in per[b]["items"][:k]]
        want += [-np.inf] * (k - len(want))
        np.testing.assert_allclose(kb.scores[b], want, rtol=RTOL)
        assert len(kbs[b]) == min(k, len(per[b]["items"]))
        seen = set()
        for r, (score, seg) in enumerate(kbs[b]):
            key = tuple(map(tuple, seg))
            assert key not in seen
            seen.add(key)
            assert oracle.score(key, params[b]) == pytest.approx(score, rel=RTOL)
            o, T = sm.offsets[b], sm.lengths[b]
            tok = np.empty(T, dtype=np.int64)
            for s, e, lab in seg:
                tok[s:e + 1] = lab
            assert np.array_equal(kb.labels[r, o:o + T], tok)
        for r in range(len(kbs[b]), k):
            assert np.all(kb.labels[r, sm.offsets[b]:sm.offsets[b + 1]] == -1)
    # score(): every enumerated segmentation (up to 20) of every sequence, including -inf ones
    rng = np.random.default_rng(0)
    all_segs = [list(segmentations(int(kw["lengths"][b]), sm.max_duration, sm.n_labels))
                for b in range(B)]
    for _ in range(20):
        pick = [all_segs[b][rng.integers(len(all_segs[b]))] for b in range(B)]
        got = sm.score([np.array(p, dtype=np.int64).reshape(-1, 3) for p in pick])
        want = [oracle.score(pick[b], params[b]) for b in range(B)]
        np.testing.assert_allclose(got, want, rtol=RTOL)
        if not kw["allow_same_label"]:  # token labels (runs = segments) score the same
            tok = np.concatenate([np.repeat([s[2] for s in p], [s[1] - s[0] + 1 for s in p])
                                  for p in pick]).astype(np.int64)
            merged = sm.score(tok)
            for b in range(B):
                if any(p1[2] == p2[2] for p1, p2 in zip(pick[b], pick[b][1:])):
                    continue  # runs of the tokens differ from this (forbidden) segmentation
                assert merged[b] == pytest.approx(want[b], rel=RTOL) or merged[b] == want[b]


@given(problems(p_inf=0.05), st.integers(0, 2**31 - 1))
def test_constrained_matches_oracle(kw, seed):
    rng = np.random.default_rng(seed)
    allowed = rng.random(kw["unary"].shape) < 0.7
    sm = build(kw).constrain(allowed)
    masked = dict(kw)
    masked["unary"] = np.where(allowed, kw["unary"], -np.inf)
    per = summaries(masked)
    np.testing.assert_allclose(sm.log_partition(), [s["log_z"] for s in per], rtol=RTOL)
    np.testing.assert_allclose(sm.max(), [s["max"] for s in per], rtol=RTOL)
    np.testing.assert_allclose(sm.marginals().unary, packed(kw, per, "token"), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(sm.entropy(), [s["entropy"] for s in per], rtol=RTOL, atol=1e-10)
    # the original is untouched
    np.testing.assert_array_equal(build(kw).unary, kw["unary"])


@given(problems(max_len=8, max_batch=4, p_inf=0.1))
def test_kernels_match_numpy_reference(kw):
    sm = build(kw)
    args = (sm.unary, sm._durations, sm._trans, sm.start, sm.end, sm.lengths, sm.segment)
    log_z, token, edge, seg = ref.forward_backward(*args)
    np.testing.assert_allclose(sm.log_partition(), log_z, rtol=RTOL)
    m = sm.marginals()
    np.testing.assert_allclose(m.unary, token, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(m.edge, edge, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(sm.segment_marginals(), seg, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(sm.max(), ref.forward_backward(*args, semiring="max")[0], rtol=RTOL)


@given(problems(max_len=8, max_batch=4, p_inf=0.1))
def test_forward_backward_messages_are_the_documented_normalisation(kw):
    sm = build(kw)
    fm, bm = sm.forward(), sm.backward()
    alpha, alpha_star, beta_end, beta_start = ref.messages(
        sm.unary, sm._durations, sm._trans, sm.start, sm.end, sm.lengths, sm.segment)
    np.testing.assert_array_equal(fm.log_z, sm.log_partition())
    for b in range(sm.batch_size):
        o, T = sm.offsets[b], sm.lengths[b]
        if T == 0 or fm.log_z[b] == -np.inf:
            continue
        rows = slice(o, o + T)
        c = np.cumsum(fm.log_scale[rows])  # c_t
        c_prev = np.r_[0.0, c[:-1]]  # c_{t-1}
        lz = fm.log_z[b]
        for got, want in [(fm.alpha[rows] + c[:, None], alpha[rows]),
                          (fm.alpha_star[rows] + c_prev[:, None], alpha_star[rows]),
                          (bm.beta_end[rows] + (lz - c)[:, None], beta_end[rows]),
                          (bm.beta_start[rows] + (lz - c_prev)[:, None], beta_start[rows])]:
            fin = np.isfinite(want)
            np.testing.assert_array_equal(np.isfinite(got), fin)
            np.testing.assert_allclose(got[fin], want[fin], rtol=1e-9, atol=1e-9)


@given(problems(max_len=7, max_batch=4))
def test_packed_batch_equals_one_by_one(kw):
    sm = build(kw)
    B = len(kw["lengths"])
    lz = sm.log_partition()
    mx = sm.max()
    m = sm.marginals()
    ent = sm.entropy()
    for b in range(B):
        one = build(select(kw, [b]))
        rows = slice(sm.offsets[b], sm.offsets[b + 1])
        assert one.log_partition()[0] == lz[b]
        assert one.max()[0] == mx[b]
        np.testing.assert_array_equal(one.marginals().unary, m.unary[rows])
        np.testing.assert_array_equal(one.marginals().edge, m.edge[rows])
        np.testing.assert_allclose(one.entropy()[0], ent[b], rtol=RTOL)
        if lz[b] > -np.inf and np.all(lz > -np.inf):
            np.testing.assert_array_equal(one.argmax(), sm.argmax()[rows])
            np.testing.assert_array_equal(one.kbest(3).scores[0], sm.kbest(3).scores[b])


# --------------------------------------------------------------------------------------------------
# sampling
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("allow_same_label", [True, False])
def test_samples_follow_the_posterior(allow_same_label):
    kw = make_problem(3, [4, 3], 2, 3, p_inf=0.0, allow_same_label=allow_same_label,
                      hooks=("first", "last", "single"))
    sm = build(kw)
    n = 20000
    segs = sm.sample_segments(n, random_state=7)
    tokens = sm.sample(n, random_state=7)
    for b in range(2):
        probs = oracle.summary(oracle_params(kw, b))["probs"]
        keys = list(probs)
        index = {key: i for i, key in enumerate(keys)}
        counts = np.zeros(len(keys))
        for i in range(n):
            counts[index[tuple(map(tuple, segs[b][i]))]] += 1
        expected = np.array([probs[key] for key in keys]) * n
        big = expected >= 5  # pool rare segmentations into one bin
        obs = np.r_[counts[big], counts[~big].sum()]
        exp = np.r_[expected[big], expected[~big].sum()]
        if exp[-1] == 0:
            obs, exp = obs[:-1], exp[:-1]
        assert stats.chisquare(obs, exp).pvalue > 1e-3
        # token labels are those of the segments, drawn identically
        o, T = sm.offsets[b], sm.lengths[b]
        for i in range(0, n, 997):
            tok = np.empty(T, dtype=np.int64)
            for s, e, k in segs[b][i]:
                tok[s:e + 1] = k
            np.testing.assert_array_equal(tokens[i, o:o + T], tok)


def test_sampling_is_reproducible_and_respects_constraints():
    kw = make_problem(5, [6, 0, 5], 3, 3, p_inf=0.0)
    sm = build(kw)
    np.testing.assert_array_equal(sm.sample(50, 1), sm.sample(50, np.random.RandomState(1)))
    allowed = np.ones((11, 3), bool)
    allowed[2, :2] = False
    allowed[8, 0] = False
    draws = sm.constrain(allowed).sample(300, 0)
    assert np.all(draws[:, 2] == 2) and np.all(draws[:, 8] != 0)
    assert sm.sample(3, 0).shape == (3, 11)


# --------------------------------------------------------------------------------------------------
# edge cases and known answers
# --------------------------------------------------------------------------------------------------
def test_empty_and_single_token_sequences():
    kw = make_problem(1, [0, 1, 0], 3, 2, p_inf=0.0, hooks=("single",))
    sm = build(kw)
    lz = sm.log_partition()
    assert lz[0] == 0.0 and lz[2] == 0.0
    want = math.log(np.exp(kw["start"] + kw["unary"][0] + kw["single_duration"][0] + kw["end"]).sum())
    assert lz[1] == pytest.approx(want, rel=RTOL)
    assert sm.argmax().shape == (1,)
    segs = sm.argmax_segments()
    assert segs[0].shape == (0, 3) and segs[2].shape == (0, 3) and segs[1].shape == (1, 3)
    kb = sm.kbest(4)
    assert kb.scores[0, 0] == 0.0 and np.all(kb.scores[0, 1:] == -np.inf)
    assert np.isfinite(kb.scores[1, :3]).all() and kb.scores[1, 3] == -np.inf
    (only,) = sm.kbest_segments(2)[0]
    assert only[0] == 0.0 and only[1].shape == (0, 3)
    np.testing.assert_allclose(sm.entropy()[[0, 2]], 0.0)
    assert sm.score([np.zeros((0, 3), int), np.array([[0, 0, 1]]), []])[0] == 0.0
    # a batch with no tokens at all
    empty = SemiMarkov(np.zeros((0, 2)), np.zeros((2, 2)), np.zeros((2, 2)), lengths=[0, 0])
    assert np.array_equal(empty.log_partition(), [0.0, 0.0])
    assert empty.argmax().shape == (0,) and empty.sample(2, 0).shape == (2, 0)
    assert empty.marginals().unary.shape == (0, 2)
    assert empty.segment_marginals().shape == (0, 2, 2)


def test_infeasible_sequence_is_minus_inf_and_decoding_raises():
    K, D = 2, 2
    unary = np.zeros((7, K))
    duration = np.zeros((D, K))
    # sequence 1 (rows 2:7, length 5) needs durations <= 2 but every label is forbidden at row 4
    unary[4] = -np.inf
    sm = SemiMarkov(unary, duration, np.zeros((K, K)), lengths=[2, 5])
    lz = sm.log_partition()
    assert np.isfinite(lz[0]) and lz[1] == -np.inf
    assert sm.max()[1] == -np.inf
    m = sm.marginals()
    assert not np.isnan(m.unary).any() and np.all(m.unary[2:] == 0) and np.all(m.edge[2:] == 0)
    assert sm.entropy()[1] == -np.inf and np.isfinite(sm.entropy()[0])
    for call in (sm.argmax, sm.argmax_segments, lambda: sm.kbest(3), lambda: sm.sample(1),
                 lambda: sm.sample_segments(1), lambda: sm.kbest_segments(1)):
        with pytest.raises(ValueError, match=r"sequence 1 \(rows 2:7\)"):
            call()
    assert list(sm.iter_segment_marginals(0.0))[-1][0] == 0  # nothing streamed for sequence 1


def test_allow_same_label_false_is_seed_variant():
    # with allow_same_label=False and D >= T, the segmentations are exactly the label sequences;
    # scoring runs as segments must match an explicit sum over label sequences
    rng = np.random.default_rng(11)
    T, K, D = 5, 3, 5
    unary, dur, trans = rng.normal(size=(T, K)), rng.normal(size=(D, K)), rng.normal(size=(K, K))
    sm = SemiMarkov(unary, dur, trans, allow_same_label=False)
    scores = []
    for lab in np.ndindex(*(K,) * T):
        scores.append(sm.score(np.array(lab))[0])
    scores = np.array(scores)
    fin = scores[scores > -np.inf]
    assert sm.log_partition()[0] == pytest.approx(np.logaddexp.reduce(fin), rel=RTOL)
    assert sm.max()[0] == pytest.approx(fin.max(), rel=RTOL)
    # the diagonal of `transition` does not matter
    trans2 = trans.copy()
    np.fill_diagonal(trans2, 50.0)
    assert SemiMarkov(unary, dur, trans2, allow_same_label=False).log_partition()[0] == \
        sm.log_partition()[0]
    # k-best token labelings are distinct here
    kb = sm.kbest(6).labels
    assert len({tuple(r) for r in kb}) == 6


def test_duration_one_reduces_to_the_known_hmm_answer():
    # issue 2 known answer (a): an HMM is a semi-Markov model with D = 1
    start = np.log([0.6, 0.4])
    trans = np.log([[0.7, 0.3], [0.4, 0.6]])
    emis = np.array([[0.1, 0.4, 0.5], [0.6, 0.3, 0.1]])
    unary = np.log(emis[:, [0, 1, 2]].T)
    sm = SemiMarkov(unary, np.zeros((1, 2)), trans, start=start)
    assert sm.log_partition()[0] == pytest.approx(-3.3928721, abs=1e-7)
    np.testing.assert_array_equal(sm.argmax(), [1, 0, 0])
    assert math.exp(sm.max()[0]) == pytest.approx(0.01344, rel=1e-9)
    np.testing.assert_allclose(sm.marginals().unary[0], [0.2317030, 0.7682970], atol=1e-7)


def test_duration_one_equals_linear_chain():
    from structlearn.engine.structures import LinearChain

    kw = make_problem(2, [4, 1, 3], 3, 1, p_inf=0.1)
    sm = build(kw)
    lc = LinearChain(kw["unary"] + kw["duration"][0], kw["transition"], lengths=kw["lengths"],
                     start=kw["start"], end=kw["end"])
    np.testing.assert_allclose(sm.log_partition(), lc.log_partition(), rtol=RTOL)
    np.testing.assert_allclose(sm.marginals().unary, lc.marginals().unary, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(sm.marginals().edge, lc.marginals().edge, rtol=RTOL, atol=ATOL)


def test_boundary_duration_defaults():
    kw = make_problem(4, [3, 4], 2, 3, p_inf=0.0)
    rng = np.random.default_rng(0)
    first, last = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    base = dict(unary=kw["unary"], duration=kw["duration"], transition=kw["transition"],
                lengths=kw["lengths"])
    sm = build(dict(base, first_duration=first))
    assert sm.single_duration is not sm.duration and np.array_equal(sm.single_duration, first)
    sm = build(dict(base, last_duration=last))
    assert np.array_equal(sm.single_duration, last) and np.array_equal(sm.first_duration,
                                                                       kw["duration"])
    sm = build(base)
    for tab in (sm.first_duration, sm.last_duration, sm.single_duration):
        np.testing.assert_array_equal(tab, kw["duration"])
    with pytest.raises(ValueError, match="single_duration"):
        build(dict(base, first_duration=first, last_duration=last))
    sm = build(dict(base, first_duration=first, last_duration=last, single_duration=first,
                    max_duration=2))
    assert sm.single_duration.shape == (2, 2) and sm.max_duration == 2


def test_max_duration_cuts_rows():
    kw = make_problem(8, [5], 2, 3, p_inf=0.0, with_segment=True)
    cut = build(dict(kw, max_duration=2))
    manual = build(dict(kw, duration=kw["duration"][:2], segment=kw["segment"][:, :2]))
    assert cut.log_partition()[0] == manual.log_partition()[0]
    assert cut.segment_marginals().shape == (5, 2, 2)
    assert cut.score([np.array([[0, 2, 0], [3, 4, 1]])])[0] == -np.inf


# --------------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------------
def test_validation_messages():
    u, dur, tr = np.zeros((4, 2)), np.zeros((3, 2)), np.zeros((2, 2))
    for bad in (0, 4, 1.5, True):
        with pytest.raises(ValueError, match=r"`max_duration` must be an integer in \[1, 3\]"):
            SemiMarkov(u, dur, tr, max_duration=bad)
    with pytest.raises(ValueError, match="`duration` must have shape"):
        SemiMarkov(u, np.zeros((3, 3)), tr)
    with pytest.raises(ValueError, match="`transition` must have shape"):
        SemiMarkov(u, dur, np.zeros((3, 3)))
    with pytest.raises(ValueError, match="`segment` must have shape"):
        SemiMarkov(u, dur, tr, segment=np.zeros((4, 2, 2)))
    with pytest.raises(ValueError, match="`first_duration` must have shape"):
        SemiMarkov(u, dur, tr, first_duration=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="`lengths` sums to 5"):
        SemiMarkov(u, dur, tr, lengths=[2, 3])
    with pytest.raises(ValueError, match="NaN"):
        SemiMarkov(u, dur * np.nan, tr)
    sm = SemiMarkov(u, dur, tr, lengths=[1, 3])
    with pytest.raises(ValueError, match="must tile"):
        sm.score([np.array([[0, 0, 0]]), np.array([[0, 0, 1], [2, 2, 0]])])
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 2\)"):
        sm.score([np.array([[0, 0, 0]]), np.array([[0, 2, 5]])])
    with pytest.raises(ValueError, match="list of B = 2"):
        sm.score([np.array([[0, 0, 0]])])
    with pytest.raises(ValueError, match="allow_same_label=True"):
        sm.score(np.zeros(4, dtype=int))
    with pytest.raises(ValueError, match="`k` must be a positive integer"):
        sm.kbest(0)
    with pytest.raises(ValueError, match="`allowed` must be a boolean mask"):
        sm.constrain(np.ones((4, 3), bool))


def test_dense_segment_marginals_refuse_large_problems(monkeypatch):
    monkeypatch.setattr(sm_module, "DENSE_SEGMENT_LIMIT", 10)
    sm = SemiMarkov(np.zeros((4, 2)), np.zeros((3, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"iter_segment_marginals\(threshold\)"):
        sm.segment_marginals()
    total = sum(p for *_, p in sm.iter_segment_marginals(0.0))
    # expected number of segments = Σ of all segment marginals
    assert total == pytest.approx(sum(d.sum() for d in sm.duration_marginals()), rel=RTOL)


# --------------------------------------------------------------------------------------------------
# stability
# --------------------------------------------------------------------------------------------------
def test_long_sequence_is_stable():
    rng = np.random.default_rng(0)
    T, D, K = 100_000, 200, 3
    unary = rng.normal(scale=10.0, size=(T, K))
    duration = rng.normal(scale=10.0, size=(D, K))
    duration[5:20, 1] = -np.inf
    trans = rng.normal(size=(K, K))
    sm = SemiMarkov(unary, duration, trans)
    sm.log_partition()  # compiled already by other tests; warm the cache either way
    sm = SemiMarkov(unary, duration, trans)
    lz = sm.log_partition()
    m = sm.marginals()
    assert np.isfinite(lz).all() and np.isfinite(sm.max()).all()
    assert not np.isnan(m.unary).any()
    np.testing.assert_allclose(m.unary.sum(axis=1), 1.0, atol=1e-6)
    segs = sm.argmax_segments()[0]
    assert sm.score([segs])[0] == pytest.approx(sm.max()[0], rel=1e-9)


# --------------------------------------------------------------------------------------------------
# the linear-space fast path (LOG, no `segment`) against the log-space kernels and the reference
# --------------------------------------------------------------------------------------------------
@st.composite
def long_problems(draw, max_len=300):
    K = draw(st.integers(1, 4))
    D = draw(st.integers(1, 12))
    lengths = draw(st.lists(st.integers(0, max_len), min_size=1, max_size=3))
    seed = draw(st.integers(0, 2**31 - 1))
    scale = draw(st.sampled_from([1.0, 30.0, 300.0]))
    p_inf = draw(st.sampled_from([0.0, 0.05, 0.3]))
    rng = np.random.default_rng(seed)
    N = sum(lengths)
    kw = dict(unary=_pot(rng, (N, K), p_inf, scale), duration=_pot(rng, (D, K), p_inf / 2, 3 * scale),
              transition=_pot(rng, (K, K), p_inf / 2, 2 * scale), lengths=lengths,
              start=_pot(rng, K, 0.0, scale), end=_pot(rng, K, 0.0, scale),
              allow_same_label=draw(st.booleans()), max_duration=None)
    if draw(st.booleans()):
        kw["first_duration"] = _pot(rng, (D, K), p_inf / 2, 3 * scale)
    return kw


@given(long_problems())
def test_fast_path_matches_reference(kw):
    sm = build(kw)
    args = (sm.unary, sm._durations, sm._trans, sm.start, sm.end, sm.lengths)
    log_z, token, edge, _ = ref.forward_backward(*args)
    np.testing.assert_allclose(sm.log_partition(), log_z, rtol=RTOL)
    m = sm.marginals()
    # a marginal is exp(α + β - log Z): its exponent carries a rounding error of a few ulps of |log Z|
    # (up to 3e5 here), so both sides may be ~1e-9 off for the largest problems
    atol = max(1e-10, 1e-14 * float(np.max(np.abs(log_z[np.isfinite(log_z)]), initial=0.0)))
    np.testing.assert_allclose(m.unary, token, rtol=1e-9, atol=atol)
    np.testing.assert_allclose(m.edge, edge, rtol=1e-9, atol=atol)


@given(long_problems(max_len=3000))
def test_fast_path_matches_log_space_kernels(kw):
    fast = build(kw)
    exact = build(dict(kw, segment=np.zeros((kw["unary"].shape[0], kw["duration"].shape[0],
                                             kw["unary"].shape[1]))))
    np.testing.assert_allclose(fast.log_partition(), exact.log_partition(), rtol=RTOL)
    fm, em = fast.marginals(), exact.marginals()
    np.testing.assert_allclose(fm.unary, em.unary, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(fm.edge, em.edge, rtol=1e-9, atol=1e-10)
    # H = log Z - E[s(y)] cancels: its absolute error scales with |log Z|
    lz = np.abs(exact.log_partition())
    scale = 1e-11 * np.max(np.where(np.isfinite(lz), lz, 0.0), initial=1.0)
    np.testing.assert_allclose(fast.entropy(), exact.entropy(), rtol=1e-9, atol=scale)
    for f, e in zip(fast.duration_marginals(), exact.duration_marginals()):
        np.testing.assert_allclose(f, e, rtol=1e-9, atol=1e-10)
