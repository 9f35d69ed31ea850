"""Initial hard state labels of the EM families (HMM, HSMM): k-means, quantiles of the first feature, or
random; rows whose state is known keep it."""
import numpy as np

__all__ = ["initial_labels"]


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
