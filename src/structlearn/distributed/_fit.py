"""``structlearn.distributed.fit``: EM of structlearn's estimators, L-BFGS of its CRFs, over persisted dask
shards."""
import pickle

import numpy as np

from ..learning.shards import Shard, concat_shards, slice_shard
from ..utils.validation import as_real_float64
from ._common import block_map, check_timeout, collect, fixed_blocks, placement, shard_map, waiting_at_most
from ._adaboost import fit_adaboost_mrf
from ._crf import fit_crf
from ._graph import fit_graph_crf
from ._higher_order import fit_higher_order_crf
from ._semicrf import fit_semicrf
from ._tree import fit_tree_crf

__all__ = ["fit", "shard_bytes"]


def _load_shard(estimator, part, kind):
    """Worker side: one partition -> a validated Shard (the estimator's own validation of ``fit``)."""
    if kind == "sequences":
        seqs = [as_real_float64(s, "X") for s in part]   # no silent cast of complex values or strings
        if not seqs:
            raise ValueError("a partition of the bag holds no sequence; repartition the bag without empty "
                             "partitions")
        seqs = [s[:, None] if s.ndim == 1 else s for s in seqs]
        return estimator._shard_from_data(np.concatenate(seqs), [s.shape[0] for s in seqs])
    if isinstance(part, tuple) and len(part) == 3:
        _check_labels_supported(estimator)
        return estimator._shard_from_data(*part)
    if isinstance(part, tuple) and len(part) == 2:
        return estimator._shard_from_data(*part)
    return estimator._shard_from_data(part)


def _check_labels_supported(estimator):
    import inspect
    if "labels" not in inspect.signature(estimator._shard_from_data).parameters:
        raise ValueError(f"partial labels ((X, lengths, labels) shards) are supported by the HSMM family "
                         f"(HiddenSemiMarkovModel, GeneralHSMM, ResidentialTimeHMM, VariableTransitionHMM, "
                         f"SwitchingHSMM, MultiChannelHSMM, AdaptiveFactorHSMM); {type(estimator).__name__}.fit "
                         f"takes no labels")


def _known(estimator, shard):
    """The known state of every row of a shard (-1 where its partial labels allow several), or None; an
    estimator whose shards encode labels otherwise (MultiChannelHSMM: (N, C)) says so (``_shard_known``)."""
    if hasattr(estimator, "_shard_known"):
        return estimator._shard_known(shard)
    if shard.allowed is None:
        return None
    single = shard.allowed.sum(axis=1) == 1
    return np.where(single, np.argmax(shard.allowed, axis=1), -1).astype(np.int64)


def _summary(estimator, shard):
    """Worker side: what the estimator counts on a shard before EM (``_shard_summary``, e.g. the
    alphabet of an HHMM's categorical emissions)."""
    return estimator._shard_summary(shard)


def _take(shard, a, b, partition):
    """Worker side: sequences a..b-1 of a Shard (views)."""
    return slice_shard(shard, a, b)


def _lengths(shard):
    """Worker side: the sequence lengths of a Shard (None for another kind of shard)."""
    return shard.lengths if isinstance(shard, Shard) else None


def _shard_meta(shard):
    """(rows, sequences, longest sequence, features) of a shard."""
    return (shard.n_rows, int(shard.lengths.shape[0]), int(shard.lengths.max()), int(shard.X.shape[1]))


def _check_estimator(estimator):
    for name in ("_fit_sharded", "_shard_function", "_shard_from_data", "_validate_hyper"):
        if not hasattr(estimator, name):
            raise ValueError(f"`estimator` must be one of structlearn's EM estimators (HiddenSemiMarkovModel, "
                             f"GeneralHSMM, ResidentialTimeHMM, VariableTransitionHMM, SwitchingHSMM, "
                             f"MultiChannelHSMM, AdaptiveFactorHSMM, the HMMs of structlearn.hmm, "
                             f"HierarchicalHMM), a CRF (LinearChainCRF, SemiMarkovCRF, HigherOrderCRF, TreeCRF, GraphCRF) or an "
                             f"AdaBoostMRF; got "
                             f"{type(estimator).__name__}, which has no {name}")


def _partitions(data, client, estimator):
    """Delayed loads of the shards (a bag: one per partition) and their kind."""
    import dask
    from dask.bag import Bag
    from distributed import Future

    if isinstance(data, Bag):
        parts, kind = data.to_delayed(), "sequences"
    elif isinstance(data, (list, tuple)) and data:
        parts, kind = list(data), "block"
    else:
        raise ValueError(f"`data` must be a dask bag of sequences or a non-empty list of dask.delayed "
                         f"objects / futures, each giving X or (X, lengths); got {type(data).__name__}")
    load = dask.delayed(_load_shard, pure=True)
    # shard i is loaded on worker i mod W (a loose restriction: another worker takes it when that one is
    # gone), so the E-step tasks, which run where their shard lives, are balanced over the workers
    where = placement(client)
    out = []
    for i, p in enumerate(parts):
        if isinstance(p, Future):
            out.append(client.submit(_load_shard, estimator, p, kind, **where(i)))
        else:
            out.append(client.compute(load(estimator, p, kind), **where(i)))
    return out


_CHAIN_DEV = ("X_dev", "y_dev")
_TREE_DEV = ("X_dev", "y_dev", "parents_dev", "edge_attributes_dev")


def _held_out(estimator, takes, given):
    """The held-out keyword arguments (``given``: name -> value) for the fit of ``estimator``, which
    takes those named in ``takes``; ValueError naming the first one given (not None) that it does not take."""
    name = next((k for k, v in given.items() if v is not None and k not in takes), None)
    if name is not None:
        cls = type(estimator).__name__
        what = f"its held-out data are {', '.join(f'`{k}`' for k in takes)}" if takes else \
            f"{cls}.fit takes no held-out data (the distributed fits of LinearChainCRF, HigherOrderCRF and " \
            f"TreeCRF do)"
        raise ValueError(f"`{name}` is not taken by the distributed fit of a {cls}: {what}")
    return {k: given[k] for k in takes}


def fit(estimator, data, client=None, *, init="first", split_every=8, callback=None, X_dev=None, y_dev=None,
        parents_dev=None, edge_attributes_dev=None, timeout=None):
    """Fit an EM estimator, a linear-chain CRF, a graph CRF or AdaBoost.MRF on dask shards; the result
    equals ``estimator.fit`` on the same data.

    Parameters
    ----------
    estimator : HiddenSemiMarkovModel, GeneralHSMM, ResidentialTimeHMM, VariableTransitionHMM,
        SwitchingHSMM, MultiChannelHSMM, AdaptiveFactorHSMM, an HMM of :mod:`structlearn.hmm`,
        HierarchicalHMM, LinearChainCRF, SemiMarkovCRF, HigherOrderCRF, TreeCRF, GraphCRF or AdaBoostMRF
        Fitted in place with its hyper-parameters (EM: ``n_iter``, ``tol``, ``n_init``, ``params``,
        ``init_params``, ``random_state``, ``inference``, …; ``n_jobs`` is not used. LinearChainCRF:
        ``algorithm="lbfgs"`` with its ``c1``, ``c2``, ``min_freq``, stopping rules, … (SemiMarkovCRF,
        HigherOrderCRF, TreeCRF likewise: L-BFGS / OWL-QN with their own options); GraphCRF: its
        ``inference``, ``optimizer``, ``c2``, ``n_labels``, ``max_iterations``).
    data : dask.bag.Bag or list of dask.delayed / distributed.Future
        EM: a bag whose elements are sequences (array-like (T,) or (T, F), float64 — an HHMM with
        categorical emissions: one sequence of symbols 0..V-1, shape (T,); every partition is one
        shard), or one delayed object / future per shard giving ``X`` (one sequence), ``(X,
        lengths)`` or — the HSMM family's partial labels, as ``fit(X, lengths, labels)`` — ``(X, lengths,
        labels)`` with labels (N,) int, -1 unknown. LinearChainCRF: a bag whose elements are ``(items,
        labels)`` pairs or ``(items, labels, allowed)`` triples (partial labels), one per sequence, with
        the items of ``LinearChainCRF.fit`` (dicts attribute -> value or attribute lists). ``allowed``
        names the labels allowed at each token: None (every label), or a list with one entry per token —
        None (every label), a label, or a non-empty set/list of labels — names, not positions, since a
        partition does not know the merged label order; the workers convert it to the (n_items, K) mask
        once the labels are merged. A triple's ``labels`` is one label per token, used as ``fit``'s
        ``y`` is with ``allowed``: for the label order, the vocabulary and the feature counts
        (``min_freq``, the label bigrams), not by the objective, which is log p(y ∈ allowed | x); a pair
        counts as a triple whose tokens allow only their label. The result equals ``fit(X, y,
        allowed=mask)`` on the concatenated data (pairs' rows one-hot), ``mask`` in ``classes_`` order.
        SemiMarkovCRF: ``(items, labels)`` or ``(items, labels, tokens)`` per sequence (labels as BIO tags,
        runs or segment lists, as ``fit``); no partial labels. HigherOrderCRF (chain and
        ``segments=True``): ``(items, labels)`` pairs or, chain form only, ``(items, labels, allowed)``
        triples with partial labels, as for the LinearChainCRF. TreeCRF (``algorithm="lbfgs"``):
        ``(items, labels, parents)`` or ``(items, labels, parents, edge_attributes)`` per tree, or
        ``(items, labels, parents, edge_attributes, allowed)`` with partial labels (``allowed``: one entry
        per node, as above; ``edge_attributes`` None when the bag has none; every tree has edge
        attributes or none, while trees with and without ``allowed`` mix). With partial labels the
        HigherOrderCRF and TreeCRF equal ``fit(..., allowed=mask)`` as the LinearChainCRF does.
        GraphCRF: a bag whose elements are ``(graph, labels)`` pairs or ``(graph, labels,
        sample_weight)`` triples, one per graph, as ``GraphCRF.fit`` takes them (``graph = (node_features
        (n, D), edges (m, 2)[, edge_features (m, F)])``, labels (n,) int, -1 hidden). The shards are
        loaded and validated on the workers and stay there (persisted; a lost one is recomputed from
        its graph). A CRF's vocabulary, labels and features (``min_freq``) are counted on the workers
        and merged in partition order, so they are those of ``fit`` on the concatenated sequences; so
        are a GraphCRF's label count (1 + the largest label unless ``n_labels``) and an HHMM's
        categorical alphabet (1 + the largest symbol, unless the emission's ``n_features`` is set).
    client : distributed.Client, optional
        Default: the current client (``distributed.get_client()``).
    init : "first", (X, lengths) or (X, lengths, labels), default "first"
        EM only (ignored for the CRFs). Data the parameters in ``init_params`` are initialised from
        (k-means, quantiles, …, as ``fit`` does on its data): the first shard (gathered to the client
        once), or arrays given here. With ``init_params=""`` the parameters set on the estimator are used
        and this is only checked. (The result equals ``fit`` on the concatenated data when the
        initialisation does: ``init=(X, lengths)`` of all data, or parameters that need no data.)
    split_every : int, default 8
        Fan-in of the tree reduction of the shard statistics.
    callback : callable (iteration) -> None, optional
        Called on the client before the E-step of every iteration (CRF: before every evaluation of the
        objective) — progress, or fault injection in tests.
    X_dev, y_dev : list of sequences of items, list of lists of labels, optional
        LinearChainCRF and HigherOrderCRF (TreeCRF: held-out trees, with ``parents_dev`` and
        ``edge_attributes_dev``): held-out data, as ``fit``'s. They stay on the client (held-out sets are
        small), are encoded with the vocabulary and labels the distributed fit merged (the estimator's own
        encoding of ``fit``, before any shard is built) and decoded there every L-BFGS iteration, so
        ``training_log_`` gets the ``"dev_accuracy"`` entries of ``fit(X, y, X_dev, y_dev)`` on the
        concatenated data. As in ``fit``, ``y_dev`` without ``X_dev`` is not used.
    parents_dev, edge_attributes_dev : list (per tree), optional
        TreeCRF only: the parents and edge attributes of the held-out trees, as ``fit``'s.
    timeout : float > 0 or None, default None
        The longest the client waits, in seconds, for one round of results from the workers (the shards
        loaded and counted, one E-step, one evaluation of a CRF's objective), after which ``TimeoutError``.
        dask does not fail tasks when every worker is gone: it keeps them until a worker joins, so without
        a timeout a fit whose workers are all lost waits forever. None (the default) waits without limit,
        because a cluster that grows on demand (an adaptive or batch-queue cluster) may start with no
        worker and legitimately wait long for its first one; pass a bound above the longest round you
        expect (e.g. a few times the first iteration's time) to be told instead.

    Returns
    -------
    estimator
        Fitted, with the attributes ``fit`` sets (EM: ``monitor_`` or ``monitor_history_``, ``converged_``,
        ``log_likelihood_``; CRFs: the weights, ``n_iter_``, ``training_log_``, …).

    Raises
    ------
    ValueError
        Bad arguments or data (raised on a worker and re-raised here, e.g. a shard with a sequence of zero
        likelihood); an emission family without additive sufficient statistics (a Gaussian mixture, segment
        emissions) while ``params`` re-estimates it; partial labels for an EM model whose ``fit`` takes none
        (the HMMs, HierarchicalHMM); an ``allowed`` of a LinearChainCRF, HigherOrderCRF or TreeCRF that is
        malformed (naming the element and partition), names a label absent from every ``labels``, leaves
        a token (node) no label, or leaves a sequence no labelling that ``forbidden_transitions`` permits
        (a tree: ``forbidden_edges``); a HigherOrderCRF triple with ``segments=True``; held-out data
        (``X_dev``, ``y_dev``, ``parents_dev``, ``edge_attributes_dev``) for an estimator whose
        distributed fit does not take them (SemiMarkovCRF, GraphCRF, AdaBoostMRF, the EM models; the
        tree arguments for a LinearChainCRF or HigherOrderCRF), naming the argument and the estimator;
        bad held-out data (the errors of ``fit``: labels that do not fit the items, labels absent from
        the training labels, bad ``parents_dev``, ...); a ``timeout`` that is not None or a number > 0.
    TimeoutError
        When one round of results has not arrived after ``timeout`` seconds, naming how many shards were
        still outstanding and how many workers the scheduler has (workers may be lost).

    Notes
    -----
    A GraphCRF: per evaluation of the objective the client sends w (D·K + F·K² float64) and receives one
    summed value and gradient (plus one float: the shards whose message passing did not converge); the
    optimiser runs on the client (``GraphCRF._fit_sharded``). With ``inference="bp"``/``"trw"`` every
    shard keeps its warm-started messages on its worker; a recomputed (lost) shard starts cold, which
    moves the approximate objective within the message-passing ``tol``.

    An HHMM: per iteration the client sends the automaton (its θ and index arrays) and the emission
    parameters, and receives the expected counts (θ layout) and the emission family's sufficient
    statistics (Gaussian, multivariate Gaussian, Poisson, categorical).

    SwitchingHSMM: the E-step of its (regime, state) product and the emission family's sufficient
    statistics travel (tied emissions: of the M-state family on γ summed over regimes), so a Gaussian
    mixture emission is refused. MultiChannelHSMM: per iteration the expected counts of every channel
    (coupling responsibilities, durations, starts) and the emissions' sufficient statistics; partial labels
    are ``(X, lengths, labels)`` shards with labels (N, C). AdaptiveFactorHSMM: the base HSMM's EM, then
    one more map that decodes the shards and returns the per-segment walk measurements (O(segments)
    floats per shard), from which the client estimates the walk variances as ``fit`` does.

    AdaBoostMRF: a bag of ``(graph, labels)`` pairs as for GraphCRF (no sample weights: the boosting
    weights are its own). Per evaluation the client sends the weights (and, for a weak learner, the B
    data weights) and receives n_params + 1 floats (a learner's value and gradient), B floats (per-graph
    tree likelihoods) or S·(n_params + 1) (the parallel bound, S partitions); the boosting runs on the
    client.

    A LinearChainCRF: per evaluation of the objective the client sends w (n_params float64) and receives one summed
    value and gradient (n_params float64), tree-reduced on the workers; L-BFGS / OWL-QN runs on the
    client in the estimator's own training loop (:class:`~structlearn.learning.shards.ShardedObjective`).
    With partial labels a shard also holds its (n_items, K) bool mask (N·K bytes, built on the worker in
    O(N·K); with ``forbidden_transitions``, a feasibility check of O(N·K²)) and each evaluation runs the
    forward–backward twice, unconstrained and constrained, O(N·K²) each, as ``fit(..., allowed=...)``
    does (Lafferty et al. 2001; the constrained partition function of
    :class:`~structlearn.crf.objectives.ChainCLL`).

    EM: per iteration the client sends the parameters once (as a task, so a lost worker's copy is
    recomputed; the workers copy them from each other, one copy per worker) and receives one summed
    statistics object (the tree reduction runs on the workers); per shard one
    statistics object of O(K² + D·K + emission size) float64 travels between workers — independent of
    the number of rows (see ``docs/scaling.md`` and :func:`shard_bytes`). The M-step of the emissions uses
    the families' sufficient statistics (:mod:`structlearn.hsmm._online_statistics`,
    :mod:`structlearn.hmm._online_statistics`) where ``fit`` uses the rows; both give the same estimate up
    to rounding.
    """
    if isinstance(split_every, bool) or not isinstance(split_every, (int, np.integer)) or split_every < 2:
        raise ValueError(f"`split_every` must be an integer >= 2; got {split_every!r}")
    if callback is not None and not callable(callback):
        raise ValueError(f"`callback` must be callable or None; got {type(callback).__name__}")
    timeout = check_timeout(timeout)
    given = dict(X_dev=X_dev, y_dev=y_dev, parents_dev=parents_dev, edge_attributes_dev=edge_attributes_dev)
    with waiting_at_most(timeout):
        return _fit(estimator, data, client, init, split_every, callback, given)


def _fit(estimator, data, client, init, split_every, callback, given):
    """:func:`fit` after the checks of its own arguments (``given``: the held-out keyword arguments)."""
    from ..graph.adaboost_mrf import AdaBoostMRF
    from ..crf.linear_chain import LinearChainCRF
    from ..graph.graph_crf import GraphCRF
    from ..crf.higher_order import HigherOrderCRF
    from ..crf.semi_markov import SemiMarkovCRF
    from ..crf.tree import TreeCRF

    crf = {LinearChainCRF: (fit_crf, _CHAIN_DEV), GraphCRF: (fit_graph_crf, ()),
           AdaBoostMRF: (fit_adaboost_mrf, ()), SemiMarkovCRF: (fit_semicrf, ()),
           TreeCRF: (fit_tree_crf, _TREE_DEV), HigherOrderCRF: (fit_higher_order_crf, _CHAIN_DEV)}
    for cls, (fit_one, takes) in crf.items():
        if isinstance(estimator, cls):
            dev = _held_out(estimator, takes, given)
            if client is None:
                from distributed import get_client
                client = get_client()
            return fit_one(estimator, data, client, split_every=split_every, callback=callback, **dev)
    _check_estimator(estimator)
    _held_out(estimator, (), given)
    estimator._validate_hyper()
    if client is None:
        from distributed import get_client
        client = get_client()
    shards = _partitions(data, client, estimator)
    meta = collect(client, client.map(_shard_meta, shards, pure=False))
    if isinstance(init, str) and init == "first":
        first = collect(client, shards[:1])[0]
        init_data = (first.X, first.lengths, _known(estimator, first))
    elif isinstance(init, tuple) and len(init) in (2, 3):
        if len(init) == 3:
            _check_labels_supported(estimator)
        s = estimator._shard_from_data(*init)
        init_data = (s.X, s.lengths, _known(estimator, s))
    else:
        raise ValueError(f"`init` must be 'first' or a tuple (X, lengths) or (X, lengths, labels); got "
                         f"{init!r}")
    features = {m[3] for m in meta}
    if len(features) != 1 or init_data[0].shape[1] not in features:
        raise ValueError(f"the shards (and `init`) must have the same number of features; got "
                         f"{sorted(features | {init_data[0].shape[1]})}")
    extra = {}
    if hasattr(estimator, "_shard_summary"):
        extra = estimator._merge_shard_summaries(
            collect(client, [client.submit(_summary, estimator, s, pure=False) for s in shards]))
    lengths = collect(client, client.map(_lengths, shards, pure=False))
    if all(x is not None for x in lengths):
        # the data's own blocks (fixed by the sequences, not by the partitions or workers): the model is
        # bitwise that of estimator.fit on the concatenated data
        blocks, ranges = fixed_blocks(client, shards, lengths, _take, concat_shards)
        map_statistics = block_map(client, blocks, ranges, callback)
    else:
        map_statistics = shard_map(client, shards, placement(client), split_every, callback)

    try:
        return estimator._fit_sharded(map_statistics, init_data, max(m[2] for m in meta), features.pop(), None,
                                      **extra)
    finally:
        for s in shards:   # released, not cancelled (see _crf.py: a later fit may hold futures of the same keys)
            s.release()


def shard_bytes(estimator, shard):
    """(parameter bytes, statistics bytes): the pickled sizes of what one iteration of :func:`fit` sends to
    a worker and what one shard sends back, for a fitted ``estimator`` and a Shard (``_shard_from_data``)."""
    function, params = estimator._shard_function(posteriors=False)
    return len(pickle.dumps(params, protocol=5)), len(pickle.dumps(function(params, shard), protocol=5))
