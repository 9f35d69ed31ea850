"""Tree structure of factor graphs: components, forest test, the leaves-to-root sweep order, and the
TRW factor appearance weights (uniform spanning trees, or sampled hyperforests).

The factor graph is bipartite: V variable nodes, F factor nodes, one edge per slot (factor f, variable
``fvar[p]``). It is a forest when it has no cycle, i.e. P = V + F − (number of components); two factors
on the same pair of variables already make a cycle.
"""
import numpy as np

# scipy.sparse is imported inside the functions that need it: importing structlearn.engine.structures (as
# `structlearn tag` does) must not import SciPy's sparse package


def _bipartite(V, F, fvar, slot_fac):
    from scipy.sparse import coo_matrix

    P = fvar.shape[0]
    return coo_matrix((np.ones(P), (fvar, V + slot_fac)), shape=(V + F, V + F))


def components(V, F, fvar, slot_fac):
    """Connected components of the bipartite graph: (count, labels (V + F,), variables first)."""
    from scipy.sparse.csgraph import connected_components

    return connected_components(_bipartite(V, F, fvar, slot_fac), directed=False)


def forest_flags(V, F, fvar, slot_fac, var_graph, fac_graph, B):
    """Whether every graph's factor graph is a forest, shape (B,) bool."""
    _, lab = components(V, F, fvar, slot_fac)
    graph_of = np.concatenate([var_graph, fac_graph]).astype(np.int64)
    first = np.unique(lab, return_index=True)[1]
    n_comp = np.bincount(graph_of[first], minlength=B)
    n_nodes = np.bincount(graph_of, minlength=B)
    n_slots = np.bincount(fac_graph[slot_fac], minlength=B) if slot_fac.size else np.zeros(B, np.int64)
    return n_slots == n_nodes - n_comp


def sweep_order(V, F, fvar, slot_fac, fac_graph):
    """Factors leaves-to-root: the reverse of a breadth-first order from the first node of every
    component, stable-sorted by graph, shape (F,) int64 (the SEQUENTIAL order of the engine)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import breadth_first_order, connected_components

    if F == 0:
        return np.zeros(0, dtype=np.int64)
    A = _bipartite(V, F, fvar, slot_fac)
    _, lab = connected_components(A, directed=False)
    roots = np.unique(lab, return_index=True)[1]
    S = V + F
    A = A.tocoo()
    rows = np.concatenate([A.row, A.col, np.full(roots.size, S)])
    cols = np.concatenate([A.col, A.row, roots])
    G = coo_matrix((np.ones(rows.size), (rows, cols)), shape=(S + 1, S + 1)).tocsr()
    bfs = breadth_first_order(G, S, directed=True, return_predecessors=False)
    fac = bfs[bfs >= V] - V
    fac = fac[fac < F][::-1]
    return fac[np.argsort(fac_graph[fac], kind="stable")].astype(np.int64)


def edge_appearance(eu, ev, N):
    """Edge appearance probabilities of the uniform distribution over spanning trees, shape (E,).

    ρ_e = P(e ∈ T) for T uniform over the spanning trees (forests) of e's connected component, the
    effective resistance between e's ends with unit resistors (Kirchhoff; Lyons & Peres, "Probability
    on Trees and Networks", §4.2): ρ_e = (1_u − 1_v)ᵀ L⁺ (1_u − 1_v), per component from the
    Laplacian as L⁺ = (L + J/n)⁻¹ − J/n. Bridges get 1; Σ_e ρ_e = n − 1 per component. Time
    O(Σ_components n³), memory O(max n²).
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    E = eu.shape[0]
    rho = np.ones(E)
    if E == 0:
        return rho
    A = coo_matrix((np.ones(E), (eu, ev)), shape=(N, N))
    _, labels = connected_components(A, directed=False)
    ecomp = labels[eu]
    order = np.argsort(ecomp, kind="stable")
    bounds = np.flatnonzero(np.diff(ecomp[order])) + 1
    for idx in np.split(order, bounds):
        nodes, inv = np.unique(np.concatenate([eu[idx], ev[idx]]), return_inverse=True)
        n = nodes.shape[0]
        u, v = inv[:idx.size], inv[idx.size:]
        L = np.zeros((n, n))
        np.add.at(L, (u, v), -1.0)
        np.add.at(L, (v, u), -1.0)
        L[np.diag_indices(n)] = -L.sum(axis=1)
        P = np.linalg.inv(L + 1.0 / n) - 1.0 / n
        r = P[u, u] + P[v, v] - 2.0 * P[u, v]
        rho[idx] = np.clip(r, 1e-12, 1.0)
    return rho


def sampled_appearance(V, fvar, fptr, n_trees, rng):
    """Factor appearance frequencies in random maximal hyperforests, shape (F,) in (0, 1].

    Every sample visits the factors in a random order and keeps a factor when its variables lie in
    distinct components of the factors kept so far (union–find), so the kept factors form an acyclic
    factor graph (a hyperforest); factors of arity 1 are always kept. A factor left out of every sample
    is then put first in extra samples until each appears once, so every ρ_f > 0. ρ_f is the fraction
    of samples holding f. Any distribution over hyperforests makes the TRW free energy an upper bound
    on log Z (Wainwright, Jaakkola & Willsky 2005, §4; libDAI's TRWBP ``nrtrees``). Time
    O(n_trees · P · α(V)).
    """
    F = fptr.shape[0] - 1
    count = np.zeros(F)
    if F == 0:
        return count
    scopes = [fvar[fptr[f]:fptr[f + 1]] for f in range(F)]

    def one(order):
        parent = np.arange(V)

        def find(a):
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        kept = np.zeros(F, dtype=bool)
        for f in order:
            roots = [find(a) for a in scopes[f]]
            if len(set(roots)) == len(roots):
                kept[f] = True
                for r in roots[1:]:
                    parent[r] = roots[0]
        return kept

    n = 0
    for _ in range(n_trees):
        count += one(rng.permutation(F))
        n += 1
    for f in np.flatnonzero(count == 0):
        if count[f] == 0:
            rest = rng.permutation(F)
            count += one(np.concatenate([[f], rest[rest != f]]))
            n += 1
    return np.clip(count / n, 1e-12, 1.0)
