"""HierarchicalHMM on the sparse (CSR) chain kernels equals the dense LinearChain path, and the pattern
of the flattened transitions is exactly the legal configuration-to-configuration moves."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlearn import HierarchicalHMM
from tests.hhmm.test_hhmm import em_histories, fig1_model, observations, random_model


def _pair(seed, depth, max_k, finish, gaussian):
    dense, rng = random_model(seed, depth, max_k, finish, gaussian=gaussian)
    sparse_ = HierarchicalHMM(dense.hierarchy, dense.emission, root=dense.root, finish=finish,
                              inference="sparse")
    dense.set_params(inference="dense")
    dense._build()
    sparse_._build()
    return dense, sparse_, rng


def _close(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert np.array_equal(np.isneginf(a), np.isneginf(b))
    np.testing.assert_allclose(np.where(np.isfinite(a), a, 0), np.where(np.isfinite(b), b, 0),
                               rtol=1e-10, atol=1e-12)


@settings(max_examples=15)
@given(seed=st.integers(0, 10 ** 6), depth=st.sampled_from([2, 3]), finish=st.sampled_from(["all", "none"]),
       gaussian=st.booleans(), lengths=st.lists(st.integers(0, 7), min_size=1, max_size=3))
def test_sparse_equals_dense(seed, depth, finish, gaussian, lengths):
    dense, sp, rng = _pair(seed, depth, 3, finish, gaussian)
    assert sp.uses_sparse() and not dense.uses_sparse()
    X = observations(dense, rng, sum(lengths))
    ll = dense.log_likelihood(X, lengths)
    _close(sp.log_likelihood(X, lengths), ll)
    pd, ps = dense.posteriors(X, lengths), sp.posteriors(X, lengths)
    for name in pd._fields:
        np.testing.assert_allclose(getattr(ps, name), getattr(pd, name), rtol=1e-10, atol=1e-13,
                                   err_msg=name)
    fd, fs = dense.filter(X, lengths), sp.filter(X, lengths)
    np.testing.assert_allclose(fs.config, fd.config, rtol=1e-10, atol=1e-13)
    _close(fs.log_likelihood, fd.log_likelihood)
    if np.all(np.isfinite(ll)):
        cd, wd, lld = dense.expected_counts(X, lengths)
        cs, ws, lls = sp.expected_counts(X, lengths)
        np.testing.assert_allclose(cs, cd, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(ws, wd, rtol=1e-10, atol=1e-13)
        dd, ds = dense.decode(X, lengths), sp.decode(X, lengths)
        _close(ds.log_prob, dd.log_prob)
        np.testing.assert_array_equal(ds.states, dd.states)
        np.testing.assert_array_equal(ds.finished, dd.finished)
        assert ds.segments == dd.segments
    elif sum(lengths):
        with pytest.raises(ValueError, match="argmax"):
            sp.decode(X, lengths)


def test_pattern_is_the_legal_moves_and_auto_rule():
    model = fig1_model()
    model._build()
    h = model.hierarchy_
    flat = model.flatten()
    nz = flat.transitions.tocoo()
    assert set(zip(h._pair_from.tolist(), h._pair_to.tolist())) == set(zip(nz.row.tolist(),
                                                                           nz.col.tolist()))
    ls, (indptr, indices, lv), le, la = h.flat_sparse("all")
    np.testing.assert_allclose(lv, flat.log_trans[h._pair_from, h._pair_to], rtol=1e-12)
    assert np.all(np.diff(indptr) >= 0) and indptr[-1] == len(indices)
    assert not model.uses_sparse()  # S = 8: the dense kernels
    with pytest.raises(ValueError, match="inference"):
        HierarchicalHMM(model.hierarchy, model.emission, inference="fast").log_likelihood([[0.0]])


def test_em_same_path_dense_and_sparse():
    fits = em_histories(("dense", "sparse"))
    np.testing.assert_allclose(fits[1], fits[0], rtol=1e-10)


def test_save_load_keeps_inference(tmp_path):
    m = fig1_model().set_params(inference="sparse")
    m.save(tmp_path / "m.npz")
    m2 = HierarchicalHMM.load(tmp_path / "m.npz")
    assert m2.inference == "sparse" and m2.uses_sparse()
