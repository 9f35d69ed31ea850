"""structlearn.distributed.fit of a LinearChainCRF with partial labels (issue 16): bag elements that are
(items, labels, allowed) triples, ``allowed`` naming the labels allowed per token, alone or mixed with
(items, labels) pairs. The fit equals ``LinearChainCRF.fit(X, y, allowed=mask)`` on the concatenated data
(the same iterations, weights to 1e-8), the mask built here in ``classes_`` order (pairs: their gold label
only); malformed ``allowed`` entries, unknown labels, empty label sets and partial labels that leave a
sequence no labelling ``forbidden_transitions`` permits are clear ValueErrors.

The cluster is an in-process ``distributed.LocalCluster`` (2 workers, ``processes=False``) started by this
module; ``memory_limit=0`` because in-process workers share this process's memory, which a limit would
count (every earlier test's allocations) and pause the workers for ever."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from structlearn import LinearChainCRF
from tests.conftest import require_module
from tests.distributed.test_distributed_crf import _same_fit

distributed = require_module("distributed")
dask_bag = require_module("dask.bag")
sd = require_module("structlearn.distributed")


@pytest.fixture(scope="module")
def local_client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, memory_limit=0,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


LABELS = ("A", "B", "C")


def _data(n_seq=30, seed=0):
    """Sequences of dict items (label-correlated words, a rare attribute, a real value) with 3 labels."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n_seq):
        labs = [LABELS[v] for v in rng.integers(0, 3, int(rng.integers(1, 8)))]
        X.append([{f"w:{lab}{int(rng.integers(0, 3))}": 1.0, f"n{int(rng.integers(0, 20))}": 1.0,
                   "x": float(rng.normal()), "bias": 1.0} for lab in labs])
        y.append(labs)
    return X, y


def _partial(y, rng, share=1.0):
    """Per sequence: None (a pair), or the ``allowed`` of a triple — None for the whole sequence, or per
    token None / the gold label alone (a str) / a set or list of labels holding the gold label."""
    out = []
    for seq in y:
        if rng.random() >= share:
            out.append(None)
            continue
        if rng.random() < 0.1:
            out.append("all")   # the triple's allowed is None: every label at every token
            continue
        spec = []
        for lab in seq:
            r = rng.random()
            if r < 0.2:
                spec.append(None)
            elif r < 0.5:
                spec.append(lab)
            elif r < 0.75:
                spec.append({lab, LABELS[int(rng.integers(0, 3))]})
            else:
                spec.append([lab] + [m for m in LABELS if m != lab][:int(rng.integers(0, 2))])
        out.append(spec)
    return out


def _elements(X, y, partial):
    return [(x, s) if p is None else (x, s, None if isinstance(p, str) else p)
            for x, s, p in zip(X, y, partial)]


def _mask(y, partial, classes=None):
    """The (N, K) mask of ``fit(X, y, allowed=...)``: K in first-appearance order of ``y`` (or ``classes``)."""
    classes = list(dict.fromkeys(lab for seq in y for lab in seq)) if classes is None else classes
    index = {lab: k for k, lab in enumerate(classes)}
    rows = []
    for seq, p in zip(y, partial):
        for t, lab in enumerate(seq):
            row = np.zeros(len(classes), bool)
            entry = "all" if isinstance(p, str) else (lab if p is None else p[t])   # a pair: gold only
            if entry == "all" or entry is None:
                row[:] = True
            else:
                for m in ([entry] if isinstance(entry, str) else entry):
                    row[index[m]] = True
            rows.append(row)
    return np.array(rows)


def _fit_both(est, X, y, partial, client, npartitions=3):
    bag = dask_bag.from_sequence(_elements(X, y, partial), npartitions=npartitions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits, the same in both
        ref = clone(est).fit(X, y, allowed=_mask(y, partial))
        got = sd.fit(clone(est), bag, client)
    return ref, got


def test_triples_equal_fit_with_allowed(local_client):
    X, y = _data(seed=1)
    partial = _partial(y, np.random.default_rng(1))
    assert any(isinstance(p, str) for p in partial) and all(p is not None for p in partial)
    ref, got = _fit_both(LinearChainCRF(c2=0.5, max_iterations=30), X, y, partial, local_client)
    _same_fit(ref, got)
    full = LinearChainCRF(c2=0.5, max_iterations=30).fit(X, y)
    assert np.abs(full.coef_ - got.coef_).max() > 1e-3   # the partial labels changed the objective


@pytest.mark.parametrize("params", [
    dict(c2=1.0, max_iterations=30),
    dict(c1=0.2, c2=0.1, min_freq=2, max_iterations=30),                                   # OWL-QN, cut
    dict(c2=0.5, start_end_features=False, all_possible_states=True, max_iterations=25,
         forbidden_transitions=[("A", "C"), ("<start>", "C")]),
])
def test_mixed_pairs_and_triples_equal_fit_with_allowed(local_client, params):
    X, y = _data(seed=2)
    if "forbidden_transitions" in params:  # gold labellings (pairs) must avoid the forbidden transitions
        for seq in y:
            for t in range(len(seq)):
                if seq[t] == "C" and (t == 0 or seq[t - 1] == "A"):
                    seq[t] = "B"
    rng = np.random.default_rng(3)
    partial = _partial(y, rng, share=0.5)
    partial[-8:] = [None] * 8                       # the last partition: pairs only (no mask on that shard)
    if "forbidden_transitions" in params:           # a triple's allowed sets may hold a forbidden path,
        partial[0] = [{"A", "C"}] + [None] * (len(y[0]) - 1)   # as long as some path avoids it
    assert any(p is None for p in partial) and any(p is not None for p in partial)
    ref, got = _fit_both(LinearChainCRF(**params), X, y, partial, local_client)
    _same_fit(ref, got)
    Xt, _ = _data(n_seq=10, seed=5)
    assert got.predict(Xt) == ref.predict(Xt)


def _fails(client, elements, match, est=None):
    bag = dask_bag.from_sequence(elements, npartitions=2)
    with pytest.raises(ValueError, match=match):
        sd.fit(est or LinearChainCRF(max_iterations=2), bag, client)


def test_bad_partial_labels(local_client):
    X, y = _data(n_seq=6, seed=4)
    el = _elements(X, y, [None] * 6)
    x0, y0 = X[-1], y[-1]                           # element 2 of partition 1
    n = len(y0)

    def with_last(allowed):
        return el[:-1] + [(x0, y0, allowed)]

    _fails(local_client, with_last({"A"}), r"element 2 of partition 1: `allowed` must be None or a list "
                                           r"with one entry .* per token; got a set")
    _fails(local_client, with_last("A"), r"element 2 of partition 1: `allowed` must be None or a list")
    _fails(local_client, with_last([None] * (n + 1)),
           rf"element 2 of partition 1: `allowed` must have one entry per token \({n} labels\); got {n + 1}")
    _fails(local_client, with_last([{"A": 1}] + [None] * (n - 1)),
           r"element 2 of partition 1: `allowed\[0\]` must be None \(every label\), a label or a set/list "
           r"of labels; got \{'A': 1\}")
    _fails(local_client, with_last([None] * (n - 1) + [set()]),
           rf"element 2 of partition 1: token {n - 1} has no allowed label")
    _fails(local_client, with_last(np.ones((n, 3), bool)), r"element 2 of partition 1: .* boolean array")
    _fails(local_client, with_last([None] * (n - 1) + [{"A", "Z"}]),
           rf"element 2 of partition 1: `allowed\[{n - 1}\]` names label 'Z', which is not a label of the "
           rf"model")
    _fails(local_client, el[:-1] + [(x0,)], r"must be a pair \(items, labels\) or a triple \(items, labels, "
                                            r"allowed\) of one sequence; element 2 of partition 1 is a tuple "
                                            r"of length 1")
    # every path through the allowed labels is forbidden (no gold A -> C elsewhere: only this error)
    el = _elements(X, [["B" if lab == "C" else lab for lab in seq] for seq in y], [None] * 6)
    _fails(local_client, el[:3] + [(({"bias": 1.0}, {"bias": 1.0}), ["C", "B"], [{"A"}, {"C"}])] + el[4:],
           r"element 0 of partition 1: every labelling .* `forbidden_transitions` forbids",
           LinearChainCRF(max_iterations=2, forbidden_transitions=[("A", "C")]))


# -- the worker-side conversion and checks, without a cluster ------------------------------------------
@settings(max_examples=60)
@given(st.data())
def test_mask_of_named_allowed_labels_is_the_independent_mask(data):
    """Label names -> the (N, K) mask of the merged label order, for any order the merge produced."""
    from structlearn.distributed._crf import _mask as worker_mask, _split
    from structlearn.crf.features import AttributeVocabulary

    lengths = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    y = [data.draw(st.lists(st.sampled_from(LABELS), min_size=n, max_size=n)) for n in lengths]
    entry = st.one_of(st.none(), st.sampled_from(LABELS),
                      st.sets(st.sampled_from(LABELS), min_size=1).map(sorted))
    partial = [data.draw(st.one_of(st.none(), st.just("all"), st.lists(entry, min_size=n, max_size=n)))
               for n in lengths]
    X = [[{"b": 1.0}] * n for n in lengths]
    classes = data.draw(st.permutations(LABELS))   # the merged order (other partitions' labels too)
    _, _, allowed = _split(_elements(X, y, partial), 0)
    packed = AttributeVocabulary(["b"]).encode(X, None)
    index = {lab: k for k, lab in enumerate(classes)}
    yy = np.array([index[lab] for s in y for lab in s])
    got = worker_mask(allowed, yy, packed, index, 0)
    if all(p is None for p in partial):
        assert got is None
        return
    np.testing.assert_array_equal(got, _mask(y, partial, classes))


@settings(max_examples=80)
@given(st.data())
def test_feasibility_check_matches_the_enumeration(data):
    from structlearn.distributed._crf import _check_feasible
    from structlearn.crf.features import AttributeVocabulary
    from tests.oracles.partial_label_paths import feasible_labellings

    K = data.draw(st.integers(1, 3))
    lengths = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    N = sum(lengths)
    bools = st.booleans()
    mask = np.array(data.draw(st.lists(st.lists(bools, min_size=K, max_size=K), min_size=N, max_size=N)))
    mask[np.arange(N), data.draw(st.lists(st.integers(0, K - 1), min_size=N, max_size=N))] = True
    forb = np.array(data.draw(st.lists(st.lists(bools, min_size=K, max_size=K), min_size=K, max_size=K)))
    fstart = np.array(data.draw(st.lists(bools, min_size=K, max_size=K)))
    fend = np.array(data.draw(st.lists(bools, min_size=K, max_size=K)))
    packed = AttributeVocabulary(["b"]).encode([[{"b": 1.0}] * n for n in lengths], None)
    off = np.concatenate([[0], np.cumsum(lengths)])
    bad = [j for j in range(len(lengths))
           if not feasible_labellings(mask[off[j]:off[j + 1]], forb, fstart, fend)]
    if bad:
        with pytest.raises(ValueError, match=f"element {bad[0]} of partition 7: every labelling"):
            _check_feasible(mask, packed, forb, fstart, fend, 7)
    else:
        _check_feasible(mask, packed, forb, fstart, fend, 7)
