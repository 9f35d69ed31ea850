"""EM for the explicit-duration hidden semi-Markov model (Yu 2010, §2.3.1): initial labels, E-step and M-step.

The estimator (:class:`structlearn.estimators.hsmm.HiddenSemiMarkovModel`) runs them through
:func:`structlearn.learning.em.run_em`. The E-step is the exact forward–backward of the model's
structure (:class:`structlearn.models.hsmm.HSMMPotentials`); the M-step is exact for π and A, and
exact or improving for the duration and emission families, so the likelihood never decreases.
"""
import numpy as np

from ..models.censoring import complete_counts
from ..structures.chain import LinearChain

__all__ = ["initial_labels", "mean_run_lengths", "initial_mean_durations", "e_step", "m_step",
           "check_possible"]


def initial_labels(X, n_states, method, rng, restart, known=None):
    """Initial hard state labels (N,) (-1 = unlabelled row): k-means, quantiles of the first feature, or
    random. Falls back to random labels when there are fewer distinct complete rows than states. Rows
    with a ``known`` (N,) state (>= 0) take it; when every row is known no clustering is done."""
    if known is not None and np.all(known >= 0):
        return known.copy()
    labels = _unsupervised_labels(X, n_states, method, rng, restart)
    if known is not None:
        labels[known >= 0] = known[known >= 0]
    return labels


def _unsupervised_labels(X, n_states, method, rng, restart):
    K = n_states
    N = X.shape[0]
    labels = np.full(N, -1, dtype=np.int64)
    complete = ~np.isnan(X).any(axis=1)
    Xc = X[complete]
    if method == "kmeans" and np.unique(Xc, axis=0).shape[0] < K:
        method = "random"
    if method == "kmeans":
        from sklearn.cluster import KMeans
        km = KMeans(n_clusters=K, n_init=1 if restart else 3,
                    random_state=int(rng.randint(2**31 - 1)))
        lab = km.fit_predict(Xc)
        # order clusters by their first-feature mean, for reproducible state order
        order = np.argsort(km.cluster_centers_[:, 0])
        rank = np.empty(K, dtype=np.int64)
        rank[order] = np.arange(K)
        labels[complete] = rank[lab]
    elif method == "quantile":
        x = X[:, 0]
        obs = ~np.isnan(x)
        if restart == 0:
            levels = (np.arange(1, K)) / K
        else:
            levels = np.sort(rng.uniform(0.05, 0.95, K - 1))
        cuts = np.quantile(x[obs], levels) if obs.any() else np.zeros(K - 1)
        labels[obs] = np.searchsorted(cuts, x[obs], side="right")
    else:
        labels[complete] = rng.randint(K, size=int(complete.sum()))
    return labels


def mean_run_lengths(labels, lengths, K):
    """Mean length of the runs of every label (K,) over the sequences; NaN for a label with no run."""
    tot = np.zeros(K)
    cnt = np.zeros(K)
    o = 0
    for T in lengths:
        lab = labels[o:o + T]
        o += T
        if T == 0:
            continue
        st = np.flatnonzero(np.r_[True, lab[1:] != lab[:-1]])
        en = np.r_[st[1:], T]
        for s, e in zip(st, en):
            if lab[s] >= 0:
                tot[lab[s]] += e - s
                cnt[lab[s]] += 1
    return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)


def initial_mean_durations(labels, lengths, K, D, rng, jitter):
    """Initial mean durations (K,): the mean run lengths of the initial labels (a label without runs
    gets mean(lengths) / 2K), randomly scaled by up to e^±0.7 with ``jitter``, clipped to
    [1.05, max(1.05, 0.75 D)]."""
    means = mean_run_lengths(labels, lengths, K)
    fallback = max(1.0, float(np.mean(lengths)) / (2.0 * K))
    means = np.where(np.isnan(means), fallback, means)
    if jitter:
        means = means * np.exp(rng.uniform(-0.7, 0.7, K))
    return np.clip(means, 1.05, max(1.05, 0.75 * D))


def e_step(potentials, X, lengths, offsets, allowed=None):
    """(structure, total log-likelihood) of the current parameters; ``ValueError`` naming the first
    sequence with zero likelihood.

    ``allowed`` (N, K) bool, optional: the states each row may take (partial or full labels). The
    structure is then restricted to the paths they allow and the log-likelihood is the one of the
    observations *and* the labels, log P(o, s ∈ allowed); EM on it is monotone as well.
    """
    sm = potentials.structure(X, lengths, allow_chain=True)
    if allowed is not None:
        sm = sm.constrain(allowed)
    log_z = sm.log_partition()
    check_possible(log_z, lengths, offsets, potentials.max_duration, potentials.censoring)
    return sm, float(log_z.sum())


def check_possible(log_z, lengths, offsets, max_duration, censoring):
    """``ValueError`` naming the first sequence whose log-likelihood ``log_z`` (B,) is -inf."""
    bad = np.flatnonzero(log_z == -np.inf)
    if bad.size:
        b = int(bad[0])
        raise ValueError(f"sequence {b} (rows {offsets[b]}:{offsets[b + 1]}, length {lengths[b]}) "
                         f"has zero likelihood under the current parameters (no segmentation into "
                         f"durations <= {max_duration} with non-zero probability"
                         + (", e.g. with censoring='none' its length cannot be reached"
                            if censoring == "none" else "") + ")")


def m_step(potentials, X, lengths, offsets, sm, params, on_empty=None):
    """Re-estimate the parameters named by the letters of ``params`` (``s`` start, ``t`` transitions,
    ``d`` durations, ``e`` emissions) from the posterior of ``sm``.

    Returns the new (startprob, transmat); the duration and emission objects of ``potentials`` (and its
    ``endprob``, when it has end probabilities) are refitted in place. A state without posterior mass keeps its parameters; ``on_empty(gamma)`` (e.g. a
    warning naming such states) is called with the (N, K) state posteriors when they are computed.
    """
    K = potentials.n_states
    p = params
    startprob, transmat = potentials.startprob, potentials.transmat
    duration = potentials.duration
    need_marg = any(c in p for c in "ste")
    chain = isinstance(sm, LinearChain)
    if need_marg or chain:
        gamma, edge = sm.marginals(edge="total")  # (K, K) expected transition counts
        xi = edge.copy()
        if chain:
            xi[np.arange(K), np.arange(K)] = 0.0
        if on_empty is not None:
            on_empty(gamma)
    if "s" in p:
        first = offsets[:-1][lengths > 0]
        g0 = gamma[first].sum(axis=0)
        if g0.sum() > 0:
            startprob = g0 / g0.sum()
    if "t" in p and K >= 2:
        c = xi.copy()
        np.fill_diagonal(c, 0.0)
        tot = c.sum(axis=1)
        endprob = getattr(potentials, "endprob", None)
        if endprob is not None:  # e_i ∝ expected ends in i (censoring "none": the last segment ends at T)
            ends = gamma[offsets[1:][lengths > 0] - 1].sum(axis=0)
            tot = tot + ends
            ep = endprob.copy()
            ok = tot > 0
            ep[ok] = ends[ok] / tot[ok]
            potentials.endprob = ep
        tm = transmat.copy()
        ok = tot > 0
        tm[ok] = c[ok] / tot[ok, None]
        transmat = tm
    if "d" in p and chain:
        # Baum–Welch update of the equivalent HMM's self-transitions: p = leaves / (stays + leaves)
        stays = np.diag(edge).copy()
        leaves = xi.sum(axis=1)
        if potentials.censoring == "none":
            last = offsets[1:][lengths > 0] - 1
            leaves = leaves + gamma[last].sum(axis=0)
        tot = stays + leaves
        pn = np.asarray(duration.p, dtype=np.float64).copy()
        ok = tot > 0
        # a state never left (one state, an absorbing state) has the MLE p = 0: the smallest positive
        # float keeps the law proper while its chain self-transition 1 - p is 1 in float64
        pn[ok] = np.maximum(leaves[ok] / tot[ok], np.finfo(np.float64).tiny)
        duration.p = pn
    elif "d" in p:
        dm = sm.duration_marginals()
        D = potentials.max_duration
        tables = {}
        for name in ("middle", "first", "last", "single"):
            a = getattr(dm, name).sum(axis=0)
            if a.shape[0] < D:
                a = np.concatenate([a, np.zeros((D - a.shape[0], K))])
            tables[name] = a
        counts, left = complete_counts(tables, duration.log_pmf(D), potentials.censoring)
        duration.fit(counts, left)
    if "e" in p:
        potentials.emission.fit(X, gamma)
    return startprob, transmat
