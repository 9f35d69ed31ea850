"""Structured mean field (FactorGraph.infer("mf", clusters=...)) against a brute-force coordinate ascent,
naive mean field, exact inference and the bound ordering."""
import numpy as np
import pytest

from structlearn.engine.structures import FactorGraph
from structlearn.engine.structures.graphs import grid_graph
from tests.oracles import structured_mean_field as oracle


def _random_factor_graph(seed, card=(2, 3, 2, 2, 3), scopes=((0, 1), (1, 2), (2, 3), (3, 4), (0, 2, 4), (1, 3)),
                         forbid=False):
    rng = np.random.default_rng(seed)
    tables = [rng.normal(scale=1.0, size=[card[v] for v in sc]) for sc in scopes]
    if forbid:
        tables[0][0, 0] = -np.inf
    unary_tables = [rng.normal(scale=0.5, size=k) for k in card]
    factors = [tuple(sc) for sc in scopes] + [(v,) for v in range(len(card))]
    g = FactorGraph.from_factors(list(card), factors, tables + unary_tables)
    return g, list(card), [tuple(sc) for sc in scopes], tables, unary_tables


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("clusters", [[[0, 1, 2], [3, 4]], [[0, 1], [2, 3], [4]], [[1, 2, 3], [0], [4]]])
def test_matches_brute_force_coordinate_ascent(seed, clusters):
    g, card, scopes, tables, unary = _random_factor_graph(seed, forbid=seed == 3)
    # the package's initial q: ∝ exp(arity-1 factors) (unary potentials are the arity-1 factors here)
    q0 = [np.exp(u - u.max()) / np.exp(u - u.max()).sum() for u in unary]
    n = 7
    res = g.infer("mf", clusters=clusters, max_iter=n, tol=0.0, warn=False)
    all_scopes = scopes + [(v,) for v in range(len(card))]
    zero_unary = [np.zeros(k) for k in card]
    elbo, marg, _ = oracle.structured_mean_field(card, zero_unary, all_scopes, tables + unary, clusters, n, q0)
    np.testing.assert_allclose(res.log_z[0], elbo, rtol=1e-10)
    for v, k in enumerate(card):
        np.testing.assert_allclose(res.unary[v, :k], marg[v], rtol=1e-10, atol=1e-13)
    exact = oracle.log_partition(card, zero_unary, all_scopes, tables + unary)
    assert res.log_z[0] <= exact + 1e-12 and res.bound == "lower"


def test_one_cluster_is_exact_and_singletons_are_naive_mean_field():
    g, card, *_ = _random_factor_graph(1)
    full = g.infer("mf", clusters=[list(range(len(card)))])
    ex = g.infer("exact")
    np.testing.assert_allclose(full.log_z, ex.log_z, rtol=1e-12)
    np.testing.assert_allclose(full.unary, ex.unary, atol=1e-12)
    naive = g.infer("mf", tol=1e-13, max_iter=5000)
    single = g.infer("mf", clusters=[[v] for v in range(len(card))], tol=1e-13, max_iter=5000)
    np.testing.assert_allclose(single.log_z, naive.log_z, rtol=1e-9)
    np.testing.assert_allclose(single.unary, naive.unary, atol=1e-7)


def test_grid_rows_bound_ordering_and_batch():
    rng = np.random.default_rng(0)
    n = 6
    edges = grid_graph(n, n)
    graphs = []
    for _ in range(2):
        graphs.append((rng.normal(size=(n * n, 2)), rng.normal(scale=0.8, size=(len(edges), 2, 2))))
    unary = np.concatenate([u for u, _ in graphs])
    pair = np.concatenate([p for _, p in graphs])
    g = FactorGraph(unary, np.concatenate([edges, edges]), pair, lengths=[n * n] * 2,
                    edge_lengths=[len(edges)] * 2)
    rows = [list(range(b * n * n + r * n, b * n * n + (r + 1) * n)) for b in range(2) for r in range(n)]
    smf = g.infer("mf", clusters=rows)
    naive = g.infer("mf")
    exact = g.infer("exact")
    trw = g.infer("trw")
    assert np.all(smf.converged) and np.all(smf.log_z <= exact.log_z + 1e-10)
    assert np.all(trw.log_z >= exact.log_z - 1e-8)
    assert np.all(smf.log_z >= naive.log_z - 1e-6)  # the chains keep the in-row correlations
    # each graph alone gives the same answer as the batch
    one = FactorGraph(graphs[1][0], edges, graphs[1][1]).infer("mf", clusters=[[v - n * n for v in r]
                                                                                for r in rows[n:]])
    np.testing.assert_allclose(one.log_z[0], smf.log_z[1], rtol=1e-10)
    np.testing.assert_allclose(one.unary, smf.unary[n * n:], atol=1e-10)
    fb = smf.factor_beliefs
    assert np.all(fb >= 0) and np.allclose(np.add.reduceat(fb, smf.factor_offsets[:-1]), 1.0)


@pytest.mark.parametrize("clusters, match", [
    ([[0, 9]], "outside"), ([[0, 1], [1, 2]], "two clusters"), ([[0, 0]], "two clusters"),
    ([[]], "non-empty"), ("abc", "list of lists"),
])
def test_bad_clusters(clusters, match):
    g, *_ = _random_factor_graph(0, scopes=((0, 1), (1, 2), (0, 1, 2)), card=(2, 2, 2))
    with pytest.raises(ValueError, match=match):
        g.infer("mf", clusters=clusters)


def test_clusters_only_for_mean_field():
    g, *_ = _random_factor_graph(0)
    with pytest.raises(ValueError, match="method='mf'"):
        g.infer("bp", clusters=[[0, 1]])
