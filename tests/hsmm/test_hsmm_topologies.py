"""Left-right HSMMs with end probabilities, constrained decoding and forced alignment (issue 13 item 3),
against brute-force enumeration (tests/oracles/hsmm.py)."""
import math
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import HiddenSemiMarkovModel
from structlearn.distributions.durations import NonParametric
from structlearn.distributions.emissions import Gaussian
from tests.hsmm.test_hsmm import build, log_b, random_problem
from tests.oracles import hsmm as oracle

LEFT_RIGHT = np.array([[0.0, 0.9, 0.0], [0.0, 0.0, 0.8], [0.0, 0.0, 0.0]])
END = np.array([0.1, 0.2, 1.0])


def left_right_problem(seed, T=6, D=4):
    pi, _, pmf, probs, x = random_problem(seed, K=3, D=D, T=T, missing=False, zero_dur=False)
    return np.array([0.7, 0.3, 0.0]), pmf, probs, x


def enumerate_with_end(pi, A, pmf, lb, censoring, end=None):
    items = oracle.enumerate_all(pi, A, pmf, lb, censoring)
    if end is not None:
        items = [(segs, w * end[segs[-1][2]]) for segs, w in items]
    return items


@pytest.mark.parametrize("with_end", [False, True])
def test_left_right_likelihood_and_posteriors_match_enumeration(with_end):
    pi, pmf, probs, x = left_right_problem(1)
    A = LEFT_RIGHT if with_end else (LEFT_RIGHT > 0).astype(float)
    m = build(pi, A, pmf, probs, "none")
    if with_end:
        m.endprob_ = END
    lb = log_b(probs, x)
    items = enumerate_with_end(pi, A, pmf, lb, "none", END if with_end else None)
    L = sum(w for _, w in items)
    X = x[:, None]
    np.testing.assert_allclose(m.score(X), math.log(L), rtol=1e-10)
    gamma = np.zeros((x.size, 3))
    for segs, w in items:
        for s, e, k in segs:
            gamma[s:e + 1, k] += w / L
    np.testing.assert_allclose(m.predict_proba(X), gamma, rtol=1e-9, atol=1e-12)
    best = max(items, key=lambda it: it[1])
    lp, states, segs = m.decode(X, return_segments=True)
    np.testing.assert_allclose(lp, math.log(best[1]), rtol=1e-10)
    assert segs[0].tolist() == [list(s) for s in best[0]]


def test_left_right_em_keeps_structural_zeros_and_reestimates_end_probabilities():
    rng = np.random.default_rng(0)
    lengths = []
    Xs = []
    for _ in range(30):  # 0 -> 1 -> 2 utterances, some ending early (end probabilities)
        n = [int(rng.integers(2, 6)) for _ in range(3)]
        stop = rng.choice([1, 2, 3], p=[0.1, 0.2, 0.7])
        xs = np.concatenate([rng.normal(3.0 * k, 0.5, n[k]) for k in range(stop)])
        Xs.append(xs)
        lengths.append(xs.size)
    X = np.concatenate(Xs)[:, None]
    m = HiddenSemiMarkovModel(3, duration=NonParametric(np.full((3, 8), 1 / 8)),
                              emission=Gaussian(means=[0.5, 2.5, 5.5], variances=[1.0, 1.0, 1.0]),
                              max_duration=8, censoring="none", init_params="", n_iter=100, tol=1e-9)
    m.startprob_ = np.array([1.0, 0.0, 0.0])
    m.transmat_ = np.array([[0.0, 0.5, 0.0], [0.0, 0.0, 0.5], [0.0, 0.0, 0.0]])
    m.endprob_ = np.array([0.5, 0.5, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X, lengths)
    h = np.array(m.monitor_.history)
    assert np.all(np.diff(h) >= -1e-9)
    assert m.transmat_[0, 2] == 0 and m.transmat_[1, 0] == 0 and np.all(m.transmat_[2] == 0)
    np.testing.assert_allclose(m.transmat_.sum(1) + m.endprob_, 1.0, rtol=1e-12)
    np.testing.assert_allclose(m.endprob_[:2], [0.1, 0.2], atol=0.15)
    np.testing.assert_allclose(m.score(X, lengths), m.log_likelihood_, rtol=1e-9)


def test_end_probabilities_are_validated_and_saved(tmp_path):
    pi, pmf, probs, x = left_right_problem(2)
    m = build(pi, LEFT_RIGHT, pmf, probs, "none")
    with pytest.raises(ValueError, match=r"`transmat_` rows must sum to 1 - endprob_; row 0 sums to 0\.9"):
        m.endprob_ = np.array([0.2, 0.2, 1.0])
        m.score(x[:, None])
    m.endprob_ = END
    path = tmp_path / "lr.npz"
    m.save(path)
    m2 = HiddenSemiMarkovModel.load(path)
    np.testing.assert_array_equal(m2.endprob_, END)
    np.testing.assert_allclose(m2.score(x[:, None]), m.score(x[:, None]), rtol=1e-14)
    m.censoring = "right"
    with pytest.raises(ValueError, match="`endprob_` needs censoring='none'"):
        m.score(x[:, None])
    bad = build(pi, (LEFT_RIGHT > 0).astype(float) * 0.5, pmf, probs, "none")
    with pytest.raises(ValueError, match="or be all zero"):
        bad.score(x[:, None])


@pytest.mark.parametrize("mode", ["none", "right", "both"])
@pytest.mark.parametrize("algorithm", ["viterbi", "map"])
def test_decode_with_constraints_matches_enumeration(mode, algorithm):
    pi, A, pmf, probs, x = random_problem(7, K=3, D=3, T=6, missing=False, zero_dur=False)
    m = build(pi, A, pmf, probs, mode)
    allowed = np.ones((6, 3), dtype=bool)
    allowed[1] = [False, True, False]
    allowed[4, 0] = False
    items = [(segs, w) for segs, w in oracle.enumerate_all(pi, A, pmf, log_b(probs, x), mode)
             if all(allowed[t, k] for s, e, k in segs for t in range(s, e + 1))]
    lp, states = m.decode(x[:, None], algorithm=algorithm, constraints=allowed)
    assert np.all(allowed[np.arange(6), states])
    if algorithm == "viterbi":
        best = max(items, key=lambda it: it[1])
        np.testing.assert_allclose(lp, math.log(best[1]), rtol=1e-10)
        want = np.concatenate([[k] * (e - s + 1) for s, e, k in best[0]])
        np.testing.assert_array_equal(states, want)
    else:
        L = sum(w for _, w in items)
        gamma = np.zeros((6, 3))
        for segs, w in items:
            for s, e, k in segs:
                gamma[s:e + 1, k] += w / L
        np.testing.assert_array_equal(states, gamma.argmax(1))
        np.testing.assert_allclose(lp, np.log(gamma.max(1)).sum(), rtol=1e-10)


def test_decode_constraints_errors():
    pi, A, pmf, probs, x = random_problem(7, K=3, D=3, T=6, missing=False, zero_dur=False)
    m = build(pi, A, pmf, probs, "none")
    with pytest.raises(ValueError, match=r"`constraints` must be a boolean mask of shape \(6, 3\)"):
        m.decode(x[:, None], constraints=np.ones((6, 2), dtype=bool))
    with pytest.raises(ValueError, match="under `constraints`.*sequence 0"):
        m.decode(x[:, None], constraints=np.zeros((6, 3), dtype=bool))


@pytest.mark.parametrize("mode", ["none", "right", "both"])
def test_forced_alignment_matches_enumeration(mode):
    pi, A, pmf, probs, x = random_problem(9, K=3, D=4, T=7, missing=False, zero_dur=False)
    m = build(pi, A, pmf, probs, mode)
    order = [2, 0, 1]
    items = [(segs, w) for segs, w in oracle.enumerate_all(pi, A, pmf, log_b(probs, x), mode)
             if [k for _, _, k in segs] == order]
    best = max(items, key=lambda it: it[1])
    lp, segs = m.align(x[:, None], order)
    np.testing.assert_allclose(lp[0], math.log(best[1]), rtol=1e-10)
    assert segs[0].tolist() == [list(s) for s in best[0]]
    # two sequences at once
    X2 = np.r_[x, x[:5]][:, None]
    lp2, segs2 = m.align(X2, [order, [0, 1]], lengths=[7, 5])
    np.testing.assert_allclose(lp2[0], lp[0], rtol=1e-12)
    assert segs2[1][:, 2].tolist() == [0, 1] and segs2[1][-1, 1] == 4


def test_forced_alignment_errors():
    pi, A, pmf, probs, x = random_problem(9, K=3, D=4, T=7, missing=False, zero_dur=False)
    m = build(pi, A, pmf, probs, "none")
    X = x[:, None]
    with pytest.raises(ValueError, match="repeats state 1 at positions 1 and 2"):
        m.align(X, [0, 1, 1])
    with pytest.raises(ValueError, match=r"states in \[0, 3\)"):
        m.align(X, [0, 3])
    with pytest.raises(ValueError, match="cannot be segmented into the 8 segments"):
        m.align(X, [0, 1] * 4)
    with pytest.raises(ValueError, match=r"one state order per sequence \(2\)"):
        m.align(np.r_[X, X], [[0, 1]], lengths=[7, 7])
    with pytest.raises(ValueError, match="cannot be segmented"):
        m.align(X, [0])  # one segment of 7 > D = 4 under censoring "none"
