"""Order estimation on real data (../shared/data): the example script examples/hsmm_order.py."""
import numpy as np
import pytest

from tests.conftest import require_data, script_module


@pytest.mark.slow
def test_order_of_the_earthquake_counts(capsys):
    """The Poisson HMM of the earthquake counts (Zucchini & MacDonald 2009), as an HSMM with geometric
    durations and no D, reaches the known optima (-log L 391.9189, 341.8787, 328.5275 for M = 1, 2, 3,
    tests/data/test_hsmm_data.py). With the free parameters this estimator counts (initial law M - 1,
    off-diagonal transitions M(M - 2), M geometric p_j, M rates: p = 2, 5, 11) BIC chooses M = 2, by a
    margin of 1.3 (707.12 against 708.46 for M = 3); AIC (679.06 against 693.76) and the held-out
    log-likelihood over 10 blocks (5 folds) choose M = 3. With the parameter count of a stationary HMM
    (p = M², no free initial law) the same likelihoods would give BIC 702.45 (M = 2) against 699.11
    (M = 3), i.e. three states: the choice between 2 and 3 states hinges on the penalty of M - 1
    parameters. With Poisson durations and D = 10 the two-state model cannot hold the long regimes
    (log L -365.57) and every criterion chooses M = 3."""
    require_data("earthquakes")
    mod = script_module("examples/hsmm_order.py", "hsmm_order_example")
    out = mod.main(["--quick"])["earthquakes"]
    hmm = out["results"]["HMM (geometric, no D)"]
    ll = hmm.column("log_likelihood")
    np.testing.assert_allclose(-ll, [391.9189, 341.8787, 328.5275], atol=1e-3)
    assert [r["n_parameters"] for r in hmm.table] == [2, 5, 11]
    assert hmm.best_params_ == {"n_states": 2, "max_duration": None}
    assert hmm.table[hmm.best_for("aic")]["n_states"] == 3
    assert hmm.table[hmm.best_for("cv")]["n_states"] == 3
    bic = hmm.column("bic")
    assert 0.5 < bic[2] - bic[1] < 2.5
    pois = out["results"]["HSMM poisson"]
    assert [(r["n_states"], r["max_duration"]) for r in pois.table] == [(1, 107), (2, 10), (3, 10)]
    # the one-state model is the i.i.d. Poisson whatever its duration family (D raised to T = 107)
    np.testing.assert_allclose(pois.table[0]["log_likelihood"], ll[0], atol=1e-3)
    assert pois.best_params_ == {"n_states": 3, "max_duration": 10}
    assert out["overall"]["bic"][0] == "HMM (geometric, no D)"
    assert out["overall"]["bic"][1]["n_states"] == 2
    printed = capsys.readouterr().out
    assert "overall by BIC: HMM (geometric, no D), M = 2, D = None" in printed
