r"""Structured mean field on factor graphs: q(x) = Π_c q_c(x_c) over given clusters of variables (trees,
chains, any tractable subgraph), each q_c exact within its cluster.

Saul & Jordan, "Exploiting tractable substructures in intractable networks", NIPS 1996; Wiegerinck,
"Variational approximations between mean field theory and the junction tree algorithm", UAI 2000;
Wainwright & Jordan 2008, §5.5. The factors of a graph split into *inside* factors (every variable of
the scope in one cluster c) and *coupling* factors (variables in several clusters). Coordinate ascent
updates one cluster at a time, in the order given::

    q_c(x_c) ∝ exp( Σ_{I inside c} θ_I(x_I) + Σ_{i ∈ c} θ_i(x_i) + Σ_{I coupling, I ∩ c ≠ ∅} ψ_{I,c}(x_{I∩c}) ),
    ψ_{I,c}(x_{I∩c}) = E_{Π_{c' ≠ c} q_{c'}}[θ_I | x_{I∩c}]

— exact inference on the cluster's own factor graph (:meth:`FactorGraph.infer` ``"exact"``: one sweep on
a tree or chain, a junction tree otherwise), whose node marginals are the new q_i. Every update raises
the evidence lower bound

    L(q) = Σ_c (E_{q_c}[Σ_{I inside c} θ_I + Σ_{i∈c} θ_i] + H(q_c)) + Σ_{I coupling} E_q[θ_I] ≤ log Z,

computed as Σ_c (log Z_c − Σ_I E_{q_c}[ψ_{I,c}]) + Σ_{I coupling} E_q[θ_I] with log Z_c and ψ of the
cluster's last update (the marginals of q_c over I ∩ c are the beliefs of the ψ factors in that update). Singleton clusters in variable order are naive mean field's coordinate ascent; one cluster
holding a whole graph is exact inference.

Cost per sweep: Σ_c (exact inference on cluster c, O(|c|·K²) for a tree of pairwise factors) plus
O(Σ_{I coupling} arity(I)·|table_I|) for the expectations.
"""
import numpy as np

__all__ = ["structured_mean_field", "check_clusters"]


def check_clusters(graph, clusters):
    """Validated clusters: a list of int64 arrays of packed variable indices (every variable in exactly one
    cluster; variables not listed become singletons, appended in index order), each within one graph.

    Raises
    ------
    ValueError
        A cluster that is empty, not integers, out of range, spans two graphs, or a variable in two
        clusters.
    """
    if isinstance(clusters, (str, bytes)) or not hasattr(clusters, "__iter__"):
        raise ValueError(f"`clusters` must be a list of lists of variable indices; got "
                         f"{type(clusters).__name__}")
    N = graph.n_rows
    owner = np.full(N, -1, dtype=np.int64)
    gid = np.repeat(np.arange(graph.batch_size), graph.lengths)
    out = []
    for c, members in enumerate(clusters):
        arr = np.asarray(members)
        if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"`clusters[{c}]` must be a non-empty 1-d list of integer variable indices; got "
                             f"{arr.dtype} {arr.shape}")
        arr = arr.astype(np.int64)
        bad = arr[(arr < 0) | (arr >= N)]
        if bad.size:
            raise ValueError(f"`clusters[{c}]` holds variable {int(bad[0])}, outside 0..{N - 1} (indices are "
                             f"packed over the batch)")
        values, counts = np.unique(arr, return_counts=True)
        again = np.concatenate([arr[owner[arr] >= 0], values[counts > 1]])
        if again.size:
            raise ValueError(f"variable {int(again[0])} is in two clusters (`clusters[{c}]` and an earlier "
                             f"one, or twice in `clusters[{c}]`)")
        if np.unique(gid[arr]).size > 1:
            raise ValueError(f"`clusters[{c}]` spans graphs {sorted(set(gid[arr].tolist()))}; a cluster must "
                             f"lie in one graph")
        owner[arr] = len(out)
        out.append(arr)
    for v in np.flatnonzero(owner < 0):
        owner[v] = len(out)
        out.append(np.array([v], dtype=np.int64))
    return out, owner


def _contract(table, parts, keep):
    """E under the product of the ``parts`` (list of (axes, marginal table over those axes)) of ``table``,
    as a table over the axes ``keep`` (in that order; () gives a scalar), with 0·(-inf) = 0 and a -inf
    entry of positive weight giving -inf."""
    letters = "abcdefghijklmnopqrstuvwxyz"[:table.ndim]
    spec = letters + "".join("," + "".join(letters[a] for a in axes) for axes, _ in parts)
    spec += "->" + "".join(letters[a] for a in keep)
    finite = np.einsum(spec, np.where(np.isfinite(table), table, 0.0), *[m for _, m in parts])
    blocked = np.einsum(spec, (~np.isfinite(table)).astype(np.float64),
                        *[(m > 0).astype(np.float64) for _, m in parts])
    return np.where(blocked > 0, -np.inf, finite)


def _weighted(p, t):
    """Σ p·t over entries with p > 0 (0·(-inf) = 0)."""
    keep = p > 0
    return float(np.sum(p[keep] * t[keep]))


def structured_mean_field(graph, clusters, opt, init=None):
    """Run structured mean field on a :class:`~structlearn.engine.structures.FactorGraph` (see the module
    docstring).

    Parameters
    ----------
    graph : FactorGraph
    clusters : list of lists of int
        Packed variable indices of every cluster (variables not listed are singletons).
    opt : BPOptions
        ``max_iter`` (sweeps), ``tol`` (largest change of a q_i(x_i) in a sweep), ``warn``.
    init : ndarray of float64, shape (N, K), optional
        Initial q (node marginals; the clusters start as their products); default
        q_i ∝ exp(θ_i + arity-1 factors).

    Returns
    -------
    (elbo (B,), q (N, K), factor_beliefs (Σ|table|,), converged (B,), n_iter (B,), max_residual (B,))

    Raises
    ------
    ValueError
        Bad ``clusters`` (:func:`check_clusters`) or ``init``; a cluster without a feasible labeling
        given the others.
    """
    from .factor_graph import FactorGraph  # the cluster graphs are factor graphs themselves

    clusters, owner = check_clusters(graph, clusters)
    N, K, B = graph.n_rows, graph.n_labels, graph.batch_size
    card = graph.n_states
    fptr, fvar = graph._fptr, graph._fvar
    F = graph.n_factors
    scopes = [fvar[fptr[f]:fptr[f + 1]] for f in range(F)]
    tables = [graph.table(f) for f in range(F)]
    # factors inside one cluster; coupling factors cut into groups of axes, one group per cluster touched
    inside = [[] for _ in clusters]
    groups = {}                                   # f -> list of (cluster, axes)
    entries = [[] for _ in clusters]              # cluster -> coupling factors touching it
    for f, sc in enumerate(scopes):
        owners = owner[sc]
        if np.all(owners == owners[0]):
            inside[int(owners[0])].append(f)
            continue
        groups[f] = [(int(c), tuple(int(a) for a in np.flatnonzero(owners == c))) for c in np.unique(owners)]
        for c, _ in groups[f]:
            entries[c].append(f)
    local = np.empty(N, dtype=np.int64)
    for members in clusters:
        local[members] = np.arange(members.size)
    q = graph._initial_q(init)
    # the marginal of q_c over every group (f, c): products of the node marginals to start
    marg = {}
    for f, gs in groups.items():
        for c, axes in gs:
            t = np.ones(())
            for a in axes:
                v = scopes[f][a]
                t = np.multiply.outer(t, q[v, :card[v]])
            marg[f, c] = t
    gid = np.repeat(np.arange(B), graph.lengths)
    cgraph = np.array([int(gid[c[0]]) for c in clusters], dtype=np.int64)
    term = np.zeros(len(clusters))
    fb_inside = [None] * len(clusters)
    converged = np.zeros(B, dtype=bool)
    n_iter = np.zeros(B, dtype=np.int64)
    residual = np.full(B, np.inf)
    for it in range(1, int(opt.max_iter) + 1):
        change = np.zeros(B)
        for c, members in enumerate(clusters):
            b = cgraph[c]
            if converged[b]:
                continue
            kc = card[members]
            fac = [tuple(int(local[u]) for u in scopes[f]) for f in inside[c]]
            tab = [tables[f] for f in inside[c]]
            fac += [(r,) for r in range(members.size)]
            tab += [graph.unary[v, :card[v]] for v in members]
            psi = []
            for f in entries[c]:
                axes = dict(groups[f])[c]
                others = [(ax, marg[f, c2]) for c2, ax in groups[f] if c2 != c]
                psi.append(_contract(tables[f], others, axes))
                fac.append(tuple(int(local[scopes[f][a]]) for a in axes))
                tab.append(psi[-1])
            res = FactorGraph.from_factors(kc, fac, tab).infer("exact")
            if not np.isfinite(res.log_z[0]):
                raise ValueError(f"structured mean field: cluster {c} (variables {members.tolist()}) has no "
                                 f"feasible labeling given the other clusters' q (log Z_c = -inf)")
            new = np.zeros((members.size, K))
            new[:, :res.unary.shape[1]] = res.unary
            change[b] = max(change[b], float(np.abs(new - q[members]).max()))
            q[members] = new
            fo, fbel = res.factor_offsets, res.factor_beliefs
            n_in, first = len(inside[c]), len(inside[c]) + members.size
            e = 0.0
            for j, f in enumerate(entries[c]):
                m = fbel[fo[first + j]:fo[first + j + 1]].reshape(psi[j].shape)
                marg[f, c] = m
                e += _weighted(m, psi[j])
            term[c] = float(res.log_z[0]) - e
            fb_inside[c] = [fbel[fo[j]:fo[j + 1]] for j in range(n_in)]
        active = ~converged
        n_iter[active] = it
        residual[active] = change[active]
        converged |= active & (change < float(opt.tol))
        if converged.all():
            break
    elbo = np.zeros(B)
    np.add.at(elbo, cgraph, term)
    fb = np.empty(graph._boff[-1])
    for c in range(len(clusters)):
        for j, f in enumerate(inside[c]):
            fb[graph._boff[f]:graph._boff[f + 1]] = fb_inside[c][j]
    for f, gs in groups.items():
        parts = [(axes, marg[f, c]) for c, axes in gs]
        elbo[gid[scopes[f][0]]] += float(_contract(tables[f], parts, ()))
        letters = "abcdefghijklmnopqrstuvwxyz"[:len(scopes[f])]
        spec = ",".join("".join(letters[a] for a in axes) for axes, _ in parts) + "->" + letters
        fb[graph._boff[f]:graph._boff[f + 1]] = np.einsum(spec, *[m for _, m in parts]).ravel()
    return elbo, q, fb, converged, n_iter, residual
