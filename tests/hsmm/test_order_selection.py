"""select_order: order estimation (M, D) of HSMM-family estimators (Yu 2010 §2.3.2)."""
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import KFold

from structlearn.hsmm.general import GeneralHSMM, ResidentialTimeHMM, VariableTransitionHMM
from structlearn.hsmm.explicit_duration import HiddenSemiMarkovModel
from structlearn.hsmm.order_selection import OrderSelection, select_order
from structlearn.distributions import durations as du
from structlearn.distributions import emissions as em

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def two_state_data(lengths=(150, 150, 150, 150), seed=0):
    """A known 2-state HSMM: Poisson durations (means 9 and 13), Gaussian emissions 0 and 2.5 (sd 1)."""
    m = HiddenSemiMarkovModel(2, duration="poisson", max_duration=40, init_params="")
    m.startprob_ = np.array([0.5, 0.5])
    m.transmat_ = np.array([[0.0, 1.0], [1.0, 0.0]])
    m.duration_ = du.Poisson(lam=[8.0, 12.0])
    m.emission_ = em.Gaussian(means=[0.0, 2.5], variances=[1.0, 1.0])
    m.max_duration_ = 40
    m.n_features_in_ = 1
    rng = np.random.RandomState(seed)
    X = np.concatenate([m.sample(T, random_state=rng)[0] for T in lengths])
    return X, list(lengths)


def template(**kw):
    kw = {"duration": "poisson", "max_duration": 40, "n_iter": 60, "tol": 1e-5, "random_state": 0, **kw}
    return HiddenSemiMarkovModel(**kw)


def iid_gaussian(x):
    return -0.5 * np.sum(np.log(2 * np.pi * x.var()) + (x - x.mean()) ** 2 / x.var())


def test_bic_picks_the_true_number_of_states():
    X, lengths = two_state_data()
    res = select_order(template(), X, lengths, n_states=(1, 2, 3), max_durations=(40,))
    assert isinstance(res, OrderSelection)
    assert res.best_params_ == {"n_states": 2, "max_duration": 40}
    bic = res.column("bic")
    assert bic[1] < bic[0] and bic[1] < bic[2]
    assert res.best_estimator_ is res.estimators_[1] and res.best_estimator_.n_states == 2
    np.testing.assert_allclose(np.sort(res.best_estimator_.emission_.means), [0.0, 2.5], atol=0.2)
    text = str(res)
    assert text == res.to_string() and "chosen:" in text and "M = 2" in text
    assert all(len(line) > 0 for line in text.splitlines())


def test_table_information_criteria_are_the_estimators_own():
    X, lengths = two_state_data((120, 90))
    res = select_order([template(), template(duration="geometric", max_duration=None)], X, lengths,
                       n_states=(1, 2), max_durations=(None, 30))
    assert [r["estimator"] for r in res.table][::4] == ["HiddenSemiMarkovModel(duration='poisson')",
                                                         "HiddenSemiMarkovModel(duration='geometric')"]
    assert len(res.table) == 8
    for row, est in zip(res.table, res.estimators_):
        assert row["error"] is None
        assert est.n_states == row["n_states"] and est.max_duration == row["max_duration"]
        assert row["log_likelihood"] == est.score(X, lengths)
        assert row["n_parameters"] == est.n_parameters()
        assert row["aic"] == est.aic(X, lengths)
        assert row["bic"] == est.bic(X, lengths)
        assert row["max_duration_"] == est.max_duration_
    # the template is not modified and every cell is a clone of it
    t = template(n_iter=2)
    res = select_order(t, X, lengths, n_states=(2,))
    assert not hasattr(t, "startprob_") and t.n_states == 2
    # the warnings of a cell's fit are recorded in its row
    row = res.table[0]
    assert row["converged"] is False and row["n_iter"] == 2
    assert any(w.startswith("ConvergenceWarning: EM did not converge") for w in row["warnings"])
    assert "conv" in res.to_string().splitlines()[1] and " no" in res.to_string().splitlines()[3]


def test_cv_equals_a_manual_fit_and_score_over_the_same_folds():
    X, lengths = two_state_data((80, 70, 90, 60, 75, 85))
    tpl = template(n_iter=20)
    res = select_order(tpl, X, lengths, n_states=(1, 2), max_durations=(30,), cv=3, criterion="cv")
    offsets = np.r_[0, np.cumsum(lengths)]
    for row in res.table:
        folds = []
        for train, test in KFold(3).split(np.zeros((len(lengths), 1))):
            def part(idx):
                return (np.concatenate([X[offsets[i]:offsets[i + 1]] for i in idx]),
                        [lengths[i] for i in idx])
            m = clone(tpl).set_params(n_states=row["n_states"], max_duration=row["max_duration"])
            folds.append(m.fit(*part(train)).score(*part(test)))
        assert row["cv_fold_log_likelihoods"] == tuple(folds)
        assert row["cv_log_likelihood"] == pytest.approx(sum(folds), rel=1e-12)
    assert res.best_params_["n_states"] == 2
    assert "KFold" in res.cv_description and "6 sequences" in res.cv_description


def test_cv_over_blocks_of_one_long_sequence():
    X, _ = two_state_data((240,))
    tpl = template(n_iter=15)
    splitter = KFold(3)
    res = select_order(tpl, X, n_states=(1, 2), max_durations=(30,), cv=splitter, n_blocks=6)
    blocks = np.array_split(X, 6)
    # M = 1: D raised to the series length (240) for the fit on all data, to the block length in the folds
    assert [(r["n_states"], r["max_duration"]) for r in res.table] == [(1, 240), (2, 30)]
    assert "raised to the longest sequence (240; 40 in the CV folds)" in res.table[0]["note"]
    for row, (M, D) in zip(res.table, [(1, 40), (2, 30)]):
        folds = []
        for train, test in splitter.split(np.zeros((6, 1))):
            m = clone(tpl).set_params(n_states=M, max_duration=D)
            m.fit(np.concatenate([blocks[i] for i in train]), [len(blocks[i]) for i in train])
            folds.append(m.score(np.concatenate([blocks[i] for i in test]), [len(blocks[i]) for i in test]))
        assert row["cv_fold_log_likelihoods"] == tuple(folds)
    # the log-likelihood and criteria are those of the uncut sequence
    assert res.table[1]["log_likelihood"] == res.estimators_[1].score(X)
    assert "6 blocks (n_blocks=6)" in res.cv_description
    # explicit folds (an iterable of (train, test) over the blocks) give the same numbers
    again = select_order(tpl, X, n_states=(2,), max_durations=(30,), n_blocks=6,
                         cv=list(splitter.split(np.zeros((6, 1)))))
    assert again.table[0]["cv_fold_log_likelihoods"] == res.table[1]["cv_fold_log_likelihoods"]
    assert again.cv_description == "3 given folds over 6 blocks (n_blocks=6)"


@pytest.mark.slow  # starts joblib's worker processes (each imports structlearn and loads the Numba cache)
def test_parallel_cells_give_the_same_table():
    X, lengths = two_state_data((100, 100))
    kw = dict(n_states=(1, 2), max_durations=(20,), cv=2)
    one = select_order(template(n_iter=10), X, lengths, **kw)
    two = select_order(template(n_iter=10), X, lengths, n_jobs=2, **kw)  # loky worker processes
    for a, b in zip(one.table, two.table):
        for key in ("n_states", "max_duration", "log_likelihood", "aic", "bic", "cv_fold_log_likelihoods"):
            assert a[key] == b[key]


def test_one_state_is_the_iid_model():
    """A one-state model is one segment per sequence: a D below the sequence length is raised to it (with
    a note), and the fitted model is the i.i.d. Gaussian (nonparametric durations; geometric with no D,
    the untruncated law)."""
    X, _ = two_state_data((90,))
    iid = iid_gaussian(X[:, 0])
    res = select_order({"np": template(duration="nonparametric"),
                        "geo": template(duration="geometric", max_duration=None),
                        "rt": ResidentialTimeHMM(max_duration=5, n_iter=30, random_state=0),
                        "gen": GeneralHSMM(max_duration=5, n_iter=30, random_state=0)},
                       X, n_states=(1,), max_durations=None)
    rows = {r["estimator"]: r for r in res.table}
    assert rows["np"]["max_duration"] == 90 and "raised to the longest sequence (90)" in rows["np"]["note"]
    assert rows["geo"]["max_duration"] is None and rows["geo"]["note"] is None
    for name in ("np", "geo", "rt", "gen"):
        assert rows[name]["error"] is None, rows[name]["error"]
        np.testing.assert_allclose(rows[name]["log_likelihood"], iid, rtol=1e-10)
    # duplicates after raising are fitted once
    res = select_order(template(duration="nonparametric"), X, n_states=(1, 2), max_durations=(10, 20))
    assert [(r["n_states"], r["max_duration"]) for r in res.table] == [(1, 90), (2, 10), (2, 20)]


def test_failed_cells_are_rows_with_their_error():
    X, lengths = two_state_data((60, 60))
    vt = VariableTransitionHMM(max_duration=4, n_iter=10, random_state=0)
    res = select_order({"vt": vt, "gen": GeneralHSMM(max_duration=4, n_iter=10, random_state=0)}, X,
                       lengths, n_states=(1, 2), max_durations=(4, None), cv=2)
    rows = {(r["estimator"], r["n_states"], r["max_duration"]): r for r in res.table}
    r = rows[("vt", 1, 60)]
    assert r["error"].startswith("ValueError") and "`n_states` must be >= 2" in r["error"]
    assert np.isnan(r["log_likelihood"]) and np.isnan(r["bic"]) and res.estimators_[0] is None
    r = rows[("gen", 2, None)]
    assert "`max_duration` must be an integer" in r["error"]
    assert rows[("vt", 2, 4)]["error"] is None and np.isfinite(rows[("vt", 2, 4)]["cv_log_likelihood"])
    assert res.best_row_["error"] is None
    text = res.to_string()
    assert "`n_states` must be >= 2 for VariableTransitionHMM" in text
    with pytest.raises(ValueError, match="n_states"):
        select_order(vt, X, lengths, n_states=(1, 2), max_durations=(4,), errors="raise")
    with pytest.raises(ValueError, match="no cell of the search has a finite BIC"):
        select_order(vt, X, lengths, n_states=(1,), max_durations=(4,))


def test_bad_arguments_raise_clear_errors():
    X, lengths = two_state_data((40, 40))
    t = template(n_iter=2)
    cases = [
        (dict(n_states=()), "`n_states` must be a non-empty sequence of integers; got an empty grid"),
        (dict(max_durations=[]), "`max_durations` must be a non-empty"),
        (dict(n_states=(1, 2.5)), r"`n_states` must hold integers >= 1; got 2\.5"),
        (dict(n_states=(True,)), "`n_states` must hold integers >= 1; got True"),
        (dict(n_states=("2",)), "`n_states` must hold integers"),
        (dict(n_states=(0, 1)), "got 0"),
        (dict(n_states="12"), "`n_states` must be a non-empty sequence"),
        (dict(n_states=2.5), "`n_states` must be a non-empty sequence of integers; got 2.5"),
        (dict(max_durations=(10, 0)), r"`max_durations` must hold integers >= 1 or None; got 0"),
        (dict(criterion="hqc"), r"`criterion` must be one of \('bic', 'aic', 'cv'\); got 'hqc'"),
        (dict(criterion="cv"), "`criterion`='cv' needs `cv`"),
        (dict(n_blocks=4), "`n_blocks` cuts sequences into blocks for cross-validation; pass `cv`"),
        (dict(cv=3), "`cv`=3 folds need at least 3 sequences to hold out; got 2 sequences; pass `n_blocks`"),
        (dict(cv=1), "`cv` must be an integer >= 2"),
        (dict(cv=2, n_blocks=1), "`n_blocks` must be an integer >= 2"),
        (dict(cv=2, n_blocks=50), "`n_blocks`=50 blocks cannot be cut from sequence 0 of length 40"),
        (dict(cv=2, groups=[0, 1, 2]), "`groups` must have one entry per CV unit"),
        (dict(errors="ignore"), "`errors` must be 'record' or 'raise'"),
    ]
    for kw, msg in cases:
        with pytest.raises(ValueError, match=msg):
            select_order(t, X, lengths, **kw)
    with pytest.raises(ValueError, match="`lengths` sums to 70 but the observations `X` have 80 rows"):
        select_order(t, X, [40, 30])
    with pytest.raises(ValueError, match="has no parameter 'max_duration'"):
        select_order(_NoDuration(), X, lengths)
    with pytest.raises(ValueError, match="`estimator` must be an HSMM-family estimator"):
        select_order(object(), X, lengths)
    with pytest.raises(ValueError, match="empty collection"):
        select_order([], X, lengths)


class _NoDuration(HiddenSemiMarkovModel):
    """An estimator without the `max_duration` parameter."""

    def __init__(self, n_states=2):
        self.n_states = n_states
