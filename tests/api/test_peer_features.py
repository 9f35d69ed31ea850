"""Features users of the peers expect: forecasting a new stream (empty prefix), several sampled sequences
in one call, one-hot categorical rows, an absorbing geometric duration, the HHMM's warning for a state EM
gives no posterior mass."""
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import GeneralHSMM, HiddenSemiMarkovModel, ResidentialTimeHMM, VariableTransitionHMM
from structlearn.distributions import durations as du
from structlearn.distributions import emissions as em
from tests.hsmm.test_general_hsmm import general_params, random_model


def _hsmm(censoring="right"):
    m = HiddenSemiMarkovModel(2, max_duration=4, censoring=censoring, init_params="")
    m.startprob_ = np.array([0.3, 0.7])
    m.transmat_ = np.array([[0.0, 1.0], [1.0, 0.0]])
    m.duration_ = du.NonParametric(probs=np.array([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]]))
    m.emission_ = em.Gaussian(means=np.array([0.0, 2.0]), variances=np.ones(2))
    m.max_duration_, m.n_features_in_ = 4, 1
    return m


def _check_empty_prefix(m, first):
    pred = m.predict_next(np.zeros((0, 1)), [0])
    np.testing.assert_allclose(pred.start, first[None], rtol=1e-12)
    np.testing.assert_allclose(pred.state, first[None], rtol=1e-12)
    assert m.predict_next(np.zeros((0, 1))).start.shape == (1, first.shape[0])
    # in a batch, the empty sequence's row sits between its neighbours' rows
    X = np.random.default_rng(3).normal(0, 2, (5, 1))
    both = m.predict_next(X, [3, 0, 2])
    a, b = m.predict_next(X[:3]), m.predict_next(X[3:])
    for key in ("start", "state"):
        want = np.vstack([getattr(a, key), first[None], getattr(b, key)])
        np.testing.assert_allclose(getattr(both, key), want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("censoring", ["none", "right", "both"])
def test_predict_next_from_an_empty_prefix_is_the_start_distribution(censoring):
    m = _hsmm(censoring)
    _check_empty_prefix(m, m.startprob_)


@pytest.mark.parametrize("cls", [GeneralHSMM, ResidentialTimeHMM, VariableTransitionHMM])
def test_general_predict_next_from_an_empty_prefix_is_the_first_state_law(cls):
    m = random_model(cls, 2, 3, "right", np.random.default_rng(5))
    pi, _ = general_params(m)  # π (M, D) in linear space: P(S_1 = j) = Σ_d π_(j,d)
    _check_empty_prefix(m, pi.sum(axis=1))


# ------------------------------------------------------------------------------------------------------
# sample(n_sequences=...)
# ------------------------------------------------------------------------------------------------------
def _samplers():
    from structlearn.hmm import CategoricalHMM, GaussianHMM
    from tests.hsmm import test_adaptive_hsmm as ta
    from tests.hsmm import test_multichannel_hsmm as tm
    from tests.hsmm import test_switching_hsmm as ts

    g = GaussianHMM(2, covariance_type="diag")
    g.startprob_, g.transmat_ = np.array([0.6, 0.4]), np.array([[0.7, 0.3], [0.2, 0.8]])
    g.means_, g.covars_ = np.array([[0.0], [3.0]]), np.array([[1.0], [0.5]])
    c = CategoricalHMM(2)
    c.startprob_, c.transmat_ = np.array([0.6, 0.4]), np.array([[0.7, 0.3], [0.2, 0.8]])
    c.emissionprob_ = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]])
    return {
        "GaussianHMM": (g, 2),
        "CategoricalHMM": (c, 2),
        "HiddenSemiMarkovModel": (_hsmm(), 2),
        "GeneralHSMM": (random_model(GeneralHSMM, 2, 3, "right", np.random.default_rng(1)), 2),
        "SwitchingHSMM": (ts.random_model(0)[0], 3),
        "MultiChannelHSMM": (tm.random_model(np.random.default_rng(2)), 2),
        "AdaptiveFactorHSMM": (ta._adaptive_from(ta._plain("right"), 0.1, 0.1), 4),
    }


@pytest.mark.parametrize("name", ["GaussianHMM", "CategoricalHMM", "HiddenSemiMarkovModel", "GeneralHSMM",
                                  "SwitchingHSMM", "MultiChannelHSMM", "AdaptiveFactorHSMM"])
def test_sample_several_sequences_in_one_call(name):
    m, n_rows = _samplers()[name]
    one = m.sample(7, random_state=0)
    assert isinstance(one, tuple) and len(one[0]) == 7  # today's return without n_sequences
    out = m.sample(7, random_state=0, n_sequences=3)
    assert len(out) == len(one) + 1
    np.testing.assert_array_equal(out[-1], [7, 7, 7])
    # the same draws as three calls on one random stream, packed one after the other
    rs = np.random.RandomState(0)
    parts = [m.sample(7, random_state=rs) for _ in range(3)]
    for i in range(len(one)):
        if i < n_rows:
            np.testing.assert_array_equal(out[i], np.concatenate([p[i] for p in parts]))
        else:
            for got, p in zip(out[i], parts):
                np.testing.assert_array_equal(got, p[i])
    for i in range(len(one)):  # the first sequence is the one of n_sequences=None
        first = out[i][:7] if i < n_rows else out[i][0]
        np.testing.assert_array_equal(first, one[i])
    with pytest.raises(ValueError, match="n_sequences"):
        m.sample(7, n_sequences=0)


def test_hmm_sample_sequences_are_hmmlearns_draws():
    from hmmlearn import hmm as hl
    g = _samplers()["GaussianHMM"][0]
    ref = hl.GaussianHMM(2, covariance_type="diag", init_params="")
    ref.startprob_, ref.transmat_, ref.means_ = g.startprob_, g.transmat_, g.means_
    ref.covars_ = np.array([[1.0], [0.5]])
    rs = np.random.RandomState(4)
    want = [ref.sample(5, random_state=rs) for _ in range(2)]
    X, Z, lengths = g.sample(5, random_state=4, n_sequences=2)
    np.testing.assert_allclose(X, np.concatenate([w[0] for w in want]), rtol=1e-12)
    np.testing.assert_array_equal(Z, np.concatenate([w[1] for w in want]))
    np.testing.assert_array_equal(lengths, [5, 5])


# ------------------------------------------------------------------------------------------------------
# CategoricalHMM / MultinomialHMM fed one-hot rows
# ------------------------------------------------------------------------------------------------------
def _discrete(cls, **kw):
    m = cls(2, init_params="", n_iter=5, tol=0.0, **kw)
    m.startprob_, m.transmat_ = np.array([0.6, 0.4]), np.array([[0.7, 0.3], [0.2, 0.8]])
    m.emissionprob_ = np.array([[0.5, 0.3, 0.1, 0.1], [0.1, 0.1, 0.2, 0.6]])
    return m


def test_one_hot_rows_give_the_numbers_of_symbols():
    from hmmlearn import hmm as hl

    from structlearn.hmm import CategoricalHMM, MultinomialHMM
    sym = np.random.default_rng(0).integers(0, 3, 30)  # symbol 3 never occurs: V comes from the columns
    one_hot = np.eye(4)[sym]
    lengths = [12, 18]
    cat = _discrete(CategoricalHMM, n_features=4)
    ref = hl.CategoricalHMM(2, init_params="", n_iter=5, tol=0.0, n_features=4)
    ref.startprob_, ref.transmat_, ref.emissionprob_ = cat.startprob_, cat.transmat_, cat.emissionprob_
    want_ll, want_post = ref.score(sym[:, None], lengths), ref.predict_proba(sym[:, None], lengths)
    for m, X in [(cat, sym[:, None]), (_discrete(CategoricalHMM, n_features=4), one_hot),
                 (_discrete(MultinomialHMM, n_trials=1), one_hot)]:
        np.testing.assert_allclose(m.score(X, lengths), want_ll, rtol=1e-12)
        np.testing.assert_allclose(m.predict_proba(X, lengths), want_post, rtol=1e-10, atol=1e-14)
    ref.fit(sym[:, None], lengths)
    for m, X in [(_discrete(CategoricalHMM, n_features=4), sym[:, None]),
                 (_discrete(CategoricalHMM, n_features=4), one_hot), (_discrete(MultinomialHMM, n_trials=1), one_hot)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # 5 iterations on purpose
            m.fit(X, lengths)
        np.testing.assert_allclose(m.emissionprob_, ref.emissionprob_, rtol=1e-9, atol=1e-14)
        np.testing.assert_allclose(m.transmat_, ref.transmat_, rtol=1e-9, atol=1e-14)
    # without any parameters set, the alphabet is the number of columns
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fresh = CategoricalHMM(2, n_iter=2, random_state=0).fit(one_hot, lengths)
    assert fresh.n_features_ == 4 and fresh.emissionprob_.shape == (2, 4)
    # a missing (all-NaN) row is missing in either encoding
    Xs, Xo = sym[:, None].astype(float), one_hot.copy()
    Xs[5], Xo[5] = np.nan, np.nan
    np.testing.assert_allclose(cat.score(Xo, lengths), cat.score(Xs, lengths), rtol=1e-12)


def test_one_hot_rows_are_checked():
    from structlearn.hmm import CategoricalHMM
    cat = _discrete(CategoricalHMM, n_features=4)
    with pytest.raises(ValueError, match="row 1 of X"):
        cat.score(np.array([[1, 0, 0, 0], [1, 1, 0, 0]]))
    with pytest.raises(ValueError, match="n_features=4 columns"):
        cat.score(np.eye(3))


# ------------------------------------------------------------------------------------------------------
# HierarchicalHMM: EM warns, naming the state, when it gives a state no posterior mass
# ------------------------------------------------------------------------------------------------------
def _fig1_fit(strings):
    from structlearn import HierarchicalHMM
    from structlearn.datasets.toy import hhmm_figure1
    from structlearn.distributions.emissions import Categorical
    code = {"a": 0, "b": 1, "c": 2, "d": 3, "x": 4, "y": 5}  # emission rows: productions a, x, y, b, c, d
    m = HierarchicalHMM(hhmm_figure1(), Categorical(np.eye(6)[[0, 4, 5, 1, 2, 3]]), n_iter=1)
    X = np.array([[code[c]] for s in strings for c in s], dtype=float)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        m.fit(X, [len(s) for s in strings])
    return [str(w.message) for w in rec if w.category.__name__ == "EmptyStateWarning"]


def test_hhmm_em_names_the_states_it_gives_no_posterior_mass():
    # only strings of S0 (a (xy)+ b): S1 and its children c, XY (in S1) and d are never entered; x and y
    # are (XY is shared: under S0 too)
    msgs = _fig1_fit(["axyb", "axyxyb"])
    assert len(msgs) == 1, msgs
    for path in ("'root/S1'", "'root/S1/c'", "'root/S1/XY'", "'root/S1/d'"):
        assert path in msgs[0]
    assert "S0" not in msgs[0] and "/x" not in msgs[0] and "received no posterior mass" in msgs[0]
    assert _fig1_fit(["axyb", "cxyd"]) == []


# ------------------------------------------------------------------------------------------------------
# an HSMM state with an absorbing geometric duration (p = 0)
# ------------------------------------------------------------------------------------------------------
P0, D_ABS = 0.95, 20  # state 0: geometric with negligible truncation at D (0.05^20); state 1 absorbing


def _absorbing_hsmm(censoring="right", max_duration=D_ABS):
    m = HiddenSemiMarkovModel(2, duration="geometric", max_duration=max_duration, censoring=censoring,
                              init_params="", params="stde", n_iter=5, tol=0.0)
    m.startprob_, m.transmat_ = np.array([0.7, 0.3]), np.array([[0.0, 1.0], [1.0, 0.0]])
    m.duration_ = du.Geometric(p=[P0, 0.0])
    m.emission_ = em.Gaussian(means=np.array([0.0, 2.0]), variances=np.array([1.0, 0.5]))
    m.max_duration_, m.n_features_in_ = D_ABS, 1
    return m


def _absorbing_chain():
    """The same process as a first-order chain (Yu 2010 §1): H = diag(1 - p) + diag(p) A, in hmmlearn."""
    from hmmlearn import hmm as hl
    ref = hl.GaussianHMM(2, covariance_type="diag", init_params="")
    ref.startprob_, ref.transmat_ = np.array([0.7, 0.3]), np.array([[1 - P0, P0], [0.0, 1.0]])
    ref.means_, ref.covars_ = np.array([[0.0], [2.0]]), np.array([[1.0], [0.5]])
    return ref


def test_geometric_p_zero_is_an_absorbing_law():
    from structlearn.distributions.durations.censoring import log_survivor
    g = du.Geometric(p=[0.5, 0.0])
    lp = g.log_pmf(5)
    assert np.all(lp[:, 1] == -np.inf) and np.isclose(np.exp(lp[:, 0]).sum(), 1.0)
    np.testing.assert_array_equal(log_survivor(lp)[:, 1], 0.0)  # S(d) = 1: it never ends
    np.testing.assert_array_equal(g.sample(np.ones(4, dtype=int), 5, random_state=0), 5)
    with pytest.raises(ValueError, match="must lie in"):
        du.Geometric(p=[-0.1])


def test_hsmm_with_an_absorbing_state_is_the_absorbing_chain():
    m, ref = _absorbing_hsmm(), _absorbing_chain()
    X = np.random.default_rng(0).normal(1.0, 1.5, (20, 1))
    lengths = [12, 8]
    np.testing.assert_allclose(m.score(X, lengths), ref.score(X, lengths), rtol=1e-10)
    np.testing.assert_allclose(m.predict_proba(X, lengths), ref.predict_proba(X, lengths), rtol=1e-8, atol=1e-12)
    np.testing.assert_array_equal(m.predict(X, lengths), ref.predict(X, lengths))
    # once in the absorbing state, a sample stays there
    states = m.sample(40, random_state=1)[1]
    assert states[-1] == 1 and np.all(states[np.argmax(states == 1):] == 1)
    # EM works and keeps p = 0 (no segment of the absorbing state ever ends)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        m.fit(X, lengths)
    assert m.duration_.p[1] == 0.0 and np.all(np.diff(m.monitor_.history) >= -1e-9)
    with pytest.raises(ValueError, match="absorbing"):
        _absorbing_hsmm("both").score(X, lengths)


def test_hsmm_absorbing_state_without_censoring_cannot_end_a_sequence():
    from scipy import special, stats
    X = np.random.default_rng(2).normal(1.0, 1.5, (9, 1))
    # direct forward of the chain with end probabilities e = (p, 0): the last segment ends at T
    log_b = stats.norm.logpdf(X, [0.0, 2.0], np.sqrt([1.0, 0.5]))
    with np.errstate(divide="ignore"):
        log_h, log_end = np.log(np.array([[1 - P0, P0], [0.0, 1.0]])), np.log([P0, 0.0])
    alpha = np.log([0.7, 0.3]) + log_b[0]
    for t in range(1, 9):
        alpha = special.logsumexp(alpha[:, None] + log_h, axis=0) + log_b[t]
    want = special.logsumexp(alpha + log_end)
    np.testing.assert_allclose(_absorbing_hsmm("none").score(X), want, rtol=1e-10)


def test_hhmm_empty_state_warning_is_not_raised_for_a_visited_state():
    """EM sets S0's a -> b to 0 here, and the flattened E-step then counts that parameter as NaN: b is
    still entered (from XY) and must not be called empty."""
    from structlearn import HierarchicalHMM
    from structlearn.datasets.toy import hhmm_figure1
    from tests.hhmm.test_hhmm import fig1_model
    smp = fig1_model().sample(30, random_state=1)
    spec = {k: dict(v) for k, v in hhmm_figure1().items()}
    spec["S0"] = dict(spec["S0"], trans=[[0, 0.5, 0.5], [0, 0, 1], [0, 0, 0]])
    m = HierarchicalHMM(spec, "categorical", init_params="ste", n_iter=4, random_state=0)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        m.fit(smp.X.astype(int), smp.lengths)
    assert m.hierarchy_.trans[1][0, 2] == 0.0  # the parameter EM zeroed
    assert not [w for w in rec if w.category.__name__ == "EmptyStateWarning"]
