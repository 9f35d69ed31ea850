"""Mixed-memory (parsimonious) horizontal CPDs of HHMMs (Murphy & Paskin 2001 §4.2) learnt by generalised
EM on simulated data."""
import numpy as np
import pytest

from structlearn import HierarchicalHMM
from structlearn.hhmm.parsimonious import MixedMemoryTransitions
from tests.hhmm.test_hhmm import fig1_model
from tests.hhmm.test_hhmm_dbn_inference import balanced


def test_mixed_memory_generalised_em_on_simulated_data():
    truth, _ = balanced(3, 2, 5, "all")
    smp = truth.sample(60, max_length=60, random_state=4)
    m = HierarchicalHMM(truth.hierarchy, "categorical", init_params="ste", n_iter=15, tol=1e-9,
                        random_state=1, inference="jtree", transitions="mixed-memory")
    with pytest.warns(Warning):
        m.fit(smp.X.astype(int), smp.lengths)
    hist = np.array(m.monitor_history_)
    assert np.all(np.diff(hist[1:]) >= -1e-8 * np.abs(hist[1:-1]))  # GEM: never decreases
    tm = m.transition_model_
    mix, full = tm.n_parameters()
    assert mix < full
    # the fitted automaton's rows below the root are the mixture's
    h = m.hierarchy_
    for k, (d, ms, anc, K) in enumerate(tm.levels):
        p = tm.probabilities(k)
        for c, sub in enumerate(ms):
            np.testing.assert_allclose(h.trans[sub], p[c, :, :K], rtol=1e-12)
            np.testing.assert_allclose(h.end[sub], p[c, :, K], rtol=1e-12)
    assert np.isfinite(m.score(smp.X.astype(int), smp.lengths))


def test_mixed_memory_needs_unshared_submodels():
    with pytest.raises(ValueError, match="shared"):
        MixedMemoryTransitions(_built())


def _built():
    m = fig1_model()
    m._build()
    return m.hierarchy_


def test_bad_transitions_name():
    with pytest.raises(ValueError, match="transitions"):
        HierarchicalHMM(fig1_model().hierarchy, fig1_model().emission, transitions="tree").log_likelihood([[0.0]])
