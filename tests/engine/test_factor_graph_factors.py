"""FactorGraph with factors of any arity and mixed cardinalities: exact (junction tree), BP, TRW and mean
field against brute-force enumeration (tests/oracles/factor_graph.py)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlearn.engine.structures import FactorGraph
from structlearn.engine.structures.graphs import grid_graph
from tests.oracles.factor_graph import factor_oracle, graph_oracle, grid_log_z

RTOL = 1e-10
ATOL = 1e-12
seeds = st.integers(0, 2**31 - 1)


def random_factors(rng, n, F, max_arity=4, p_inf=0.0):
    """Random cardinalities 1..3 and F random factors of arity 1..max_arity (distinct variables)."""
    card = rng.integers(1, 4, size=n)
    card[rng.integers(n)] = 3
    factors, tables = [], []
    for _ in range(F):
        a = int(rng.integers(1, min(max_arity, n) + 1))
        scope = tuple(int(v) for v in rng.choice(n, size=a, replace=False))
        t = rng.normal(scale=1.5, size=[card[v] for v in scope])
        if p_inf:
            t[rng.random(t.shape) < p_inf] = -np.inf
        factors.append(scope)
        tables.append(t)
    return card, factors, tables


def random_factor_tree(rng, n, max_arity=3):
    """A random acyclic factor graph: every new factor joins one existing variable to 0..max_arity-1 new
    ones; plus a few arity-1 factors."""
    card = rng.integers(2, 4, size=n)
    factors, tables = [], []
    have = 1
    while have < n:
        k = int(min(rng.integers(1, max_arity), n - have))
        old = int(rng.integers(have))
        scope = [old] + list(range(have, have + k))
        rng.shuffle(scope)
        factors.append(tuple(scope))
        have += k
    for v in rng.choice(n, size=n // 2, replace=False):
        factors.append((int(v),))
    tables = [rng.normal(scale=1.5, size=[card[v] for v in s]) for s in factors]
    perm = rng.permutation(len(factors))
    return card, [factors[i] for i in perm], [tables[i] for i in perm]


def check_sum(res, o):
    np.testing.assert_allclose(res.log_z, [o["log_z"]], rtol=RTOL)
    K = res.unary.shape[1]
    np.testing.assert_allclose(res.unary, o["var"][:, :K], rtol=RTOL, atol=ATOL)
    for f, t in enumerate(o["factor"]):
        np.testing.assert_allclose(res.factor(f), t, rtol=RTOL, atol=ATOL)


def check_max(g, res, o):
    np.testing.assert_allclose(res.log_z, [o["max"]], rtol=RTOL)
    assert tuple(res.labels.tolist()) in o["maps"]
    K = res.unary.shape[1]
    np.testing.assert_allclose(res.unary, o["var_max"][:, :K], rtol=RTOL, atol=ATOL)
    for f, t in enumerate(o["factor_max"]):
        np.testing.assert_allclose(res.factor(f), t, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(g.score(res.labels), [o["max"]], rtol=RTOL)


# -- exact: junction tree = brute force -------------------------------------------------------------
@given(seeds, st.integers(2, 6), st.integers(1, 6), st.sampled_from([0.0, 0.15]),
       st.sampled_from(["auto", "min-fill", "min-weight"]))
def test_exact_any_arity_matches_brute_force(seed, n, F, p_inf, order):
    rng = np.random.default_rng(seed)
    card, factors, tables = random_factors(rng, n, F, p_inf=p_inf)
    o = factor_oracle(card, factors, tables)
    g = FactorGraph.from_factors(card, factors, tables)
    res = g.infer("exact", order=order)
    check_sum(res, o)
    np.testing.assert_allclose(g.log_partition("exact", order=order), [o["log_z"]], rtol=RTOL)
    if o["max"] > -np.inf:
        check_max(g, g.infer("exact", semiring="max", order=order), o)
    else:
        with pytest.raises(ValueError, match="no labeling"):
            g.infer("exact", semiring="max")


def test_exact_max_marginals_issue_example():
    # unary 0, one edge with linear potentials [[1e-12, 3], [2, 2]]: max-marginals [[0.6, 0.4], [0.4, 0.6]]
    g = FactorGraph(np.zeros((2, 2)), [[0, 1]], np.log([[1e-12, 3.0], [2.0, 2.0]]))
    for method in ("exact", "bp", "trw"):
        res = g.infer(method, semiring="max")
        np.testing.assert_allclose(res.unary, [[0.6, 0.4], [0.4, 0.6]], rtol=RTOL)
        np.testing.assert_allclose(res.edge[0], np.array([[1e-12, 3.0], [2.0, 2.0]]) / (7.0 + 1e-12), rtol=RTOL)
        np.testing.assert_array_equal(res.labels, [0, 1])
    # and on a loopy graph (junction tree): max-marginals = brute force, never all 0
    rng = np.random.default_rng(0)
    edges = np.array([[0, 1], [1, 2], [2, 0], [2, 3]])
    un, pw = rng.normal(size=(4, 2)), rng.normal(size=(4, 2, 2))
    g = FactorGraph(un, edges, pw)
    o = factor_oracle([2] * 4, [(0,), (1,), (2,), (3,)] + [tuple(e) for e in edges], list(un) + list(pw))
    res = g.infer("exact", semiring="max")
    np.testing.assert_allclose(res.unary, o["var_max"], rtol=RTOL)
    for e in range(4):
        np.testing.assert_allclose(res.edge[e], o["factor_max"][4 + e], rtol=RTOL)


# -- message passing exact on factor trees ------------------------------------------------------------
@given(seeds, st.integers(2, 7), st.sampled_from(["sequential", "parallel", "residual"]),
       st.sampled_from(["bp", "trw"]))
def test_bp_exact_on_factor_trees(seed, n, schedule, method):
    rng = np.random.default_rng(seed)
    card, factors, tables = random_factor_tree(rng, n)
    o = factor_oracle(card, factors, tables)
    g = FactorGraph.from_factors(card, factors, tables)
    assert g.is_forest.all()
    check_sum(g.infer("exact"), o)
    kw = dict(schedule=schedule, tol=1e-300, max_iter=4 * n + 8, damping=0.0)
    res = g.infer(method, **kw)
    assert res.converged[0]
    check_sum(res, o)
    check_max(g, g.infer(method, semiring="max", **kw), o)
    check_max(g, g.infer("exact", semiring="max"), o)


def test_map_decoding_resolves_ties():
    # a chain of binary variables that must alternate: every max-marginal is (0.5, 0.5) and the per-node
    # argmax (all 0) is infeasible; the decoding walks the factor graph and stays consistent
    n = 7
    neq = np.where(np.eye(2, dtype=bool), -np.inf, 0.0)
    g = FactorGraph(np.zeros((n, 2)), [[i, i + 1] for i in range(n - 1)], neq)
    for method in ("exact", "bp", "trw"):
        res = g.infer(method, semiring="max")
        np.testing.assert_allclose(res.unary, 0.5, rtol=RTOL)
        assert np.all(np.diff(res.labels) != 0)
        assert res.log_z[0] == 0.0
    # a 3-ary "exactly one" factor with equal scores: one consistent winner
    t = np.full((2, 2, 2), -np.inf)
    t[1, 0, 0] = t[0, 1, 0] = t[0, 0, 1] = 0.0
    g = FactorGraph.from_factors([2, 2, 2], [(0, 1, 2)], [t])
    lab = g.argmax("bp")
    assert lab.sum() == 1 and np.isfinite(g.score(lab)[0])


# -- loopy graphs: bounds ------------------------------------------------------------------------------
@settings(max_examples=40)
@given(seeds, st.integers(3, 6), st.integers(3, 7))
def test_trw_upper_mean_field_lower_bound(seed, n, F):
    rng = np.random.default_rng(seed)
    card, factors, tables = random_factors(rng, n, F, max_arity=3)
    g = FactorGraph.from_factors(card, factors, tables)
    exact = g.log_partition("exact")[0]
    mf = g.infer("mf")
    assert mf.bound == "lower" and mf.log_z[0] <= exact + 1e-9
    assert np.all(mf.unary.sum(axis=1) > 1 - 1e-9)
    for rho in (None, "sample", rng.uniform(0.3, 1.0, size=F)):
        if rho is None or isinstance(rho, str):
            trw = g.infer("trw", rho=rho, warn=False, max_iter=2000)
        else:
            # user weights: any point of the hyperforest polytope; the uniform mix of two samples
            w = 0.5 * g.sampled_appearance(1, seed) + 0.5 * g.sampled_appearance(1, seed + 1)
            trw = g.infer("trw", rho=np.clip(w, 1e-3, 1.0), warn=False, max_iter=2000)
        if trw.converged[0]:
            assert trw.bound == "upper" and trw.log_z[0] >= exact - 1e-8


def test_sampled_appearance_covers_every_factor():
    rng = np.random.default_rng(1)
    card, factors, tables = random_factors(rng, 6, 9, max_arity=3)
    g = FactorGraph.from_factors(card, factors, tables)
    rho = g.sampled_appearance(20, random_state=0)
    assert np.all(rho > 0) and np.all(rho <= 1)
    np.testing.assert_array_equal(rho, g.sampled_appearance(20, random_state=0))
    assert np.all(rho[[f for f, s in enumerate(factors) if len(s) == 1]] == 1.0)


# -- both constructors, batches --------------------------------------------------------------------------
@settings(max_examples=20)
@given(seeds)
def test_pairwise_and_factor_constructors_agree(seed):
    rng = np.random.default_rng(seed)
    n = 6
    edges = np.array([[0, 1], [1, 2], [2, 0], [2, 3], [3, 4], [4, 5], [5, 3]])
    un, pw = rng.normal(size=(n, 3)), rng.normal(size=(len(edges), 3, 3))
    a = FactorGraph(un, edges, pw)
    b = FactorGraph.from_factors([3] * n, [(v,) for v in range(n)] + [tuple(e) for e in edges],
                                 list(un) + list(pw))
    log_z, best, _, node, edge = graph_oracle(un, edges, pw)
    for method in ("exact", "bp", "mf"):
        kw = {} if method == "exact" else {"warn": False}
        ra, rb = a.infer(method, **kw), b.infer(method, **kw)
        if method == "exact":
            np.testing.assert_allclose(ra.log_z, [log_z], rtol=RTOL)
            np.testing.assert_allclose(ra.edge, edge, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(ra.unary, rb.unary, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(ra.log_z, rb.log_z, rtol=1e-8)
    np.testing.assert_allclose(a.max("exact"), [best], rtol=RTOL)
    np.testing.assert_allclose(b.max("exact"), [best], rtol=RTOL)


def test_batch_of_factor_graphs_equals_one_by_one():
    rng = np.random.default_rng(5)
    parts = [random_factors(rng, 5, 4), random_factor_tree(rng, 6), random_factors(rng, 4, 3)]
    card = np.concatenate([p[0] for p in parts])
    factors = [s for p in parts for s in p[1]]
    tables = [t for p in parts for t in p[2]]
    g = FactorGraph.from_factors(card, factors, tables, lengths=[len(p[0]) for p in parts],
                                 factor_lengths=[len(p[1]) for p in parts])
    for method in ("exact", "bp", "trw", "mf"):
        kw = {} if method == "exact" else {"warn": False}
        res = g.infer(method, **kw)
        n0 = 0
        for b, (c, fs, ts) in enumerate(parts):
            one = FactorGraph.from_factors(c, fs, ts).infer(method, **kw)
            np.testing.assert_allclose(res.log_z[b], one.log_z[0], rtol=RTOL)
            np.testing.assert_allclose(res.unary[n0:n0 + len(c), :one.unary.shape[1]], one.unary, rtol=RTOL,
                                       atol=ATOL)
            n0 += len(c)


# -- junction tree: limits, report, grids ------------------------------------------------------------------
def test_junction_tree_report_and_refusal():
    side = 6
    g = FactorGraph(np.zeros((side * side, 3)), grid_graph(side, side), np.zeros((3, 3)))
    jt = g.junction_tree()
    assert jt.treewidth == side and jt.table_sizes.max() == 3 ** (side + 1)
    assert jt.total_size == jt.table_sizes.sum() and len(jt.cliques) == side * side
    with pytest.raises(ValueError, match=r"largest clique \d+ has variables \[.*treewidth 6"):
        g.infer("exact", max_table_size=1000)
    with pytest.raises(ValueError, match="memory_limit"):
        g.infer("exact", memory_limit=10_000)
    with pytest.raises(ValueError, match="order"):
        g.infer("exact", order="random")
    np.testing.assert_allclose(g.log_partition("exact"), [side * side * np.log(3)], rtol=1e-12)


@pytest.mark.parametrize("side,K", [(8, 3), pytest.param(20, 2, marks=pytest.mark.slow)])
def test_exact_grid_against_variable_elimination(side, K):
    rng = np.random.default_rng(side)
    e = grid_graph(side, side)
    un, pw = rng.normal(size=(side * side, K)), rng.normal(size=(len(e), K, K))
    g = FactorGraph(un, e, pw)
    nh = side * (side - 1)
    ve = grid_log_z(un.reshape(side, side, K), pw[:nh].reshape(side, side - 1, K, K),
                    pw[nh:].reshape(side - 1, side, K, K))
    np.testing.assert_allclose(g.log_partition("exact"), [ve], rtol=RTOL)


def test_validation_of_factors():
    with pytest.raises(ValueError, match="cardinalities"):
        FactorGraph.from_factors([2, 0], [(0,)], [np.zeros(2)])
    with pytest.raises(ValueError, match="repeats"):
        FactorGraph.from_factors([2, 2], [(0, 0)], [np.zeros((2, 2))])
    with pytest.raises(ValueError, match="out of range"):
        FactorGraph.from_factors([2, 2], [(0, 2)], [np.zeros((2, 2))])
    with pytest.raises(ValueError, match=r"shape \(2, 3\)"):
        FactorGraph.from_factors([2, 3], [(0, 1)], [np.zeros((3, 2))])
    with pytest.raises(ValueError, match="one table per factor"):
        FactorGraph.from_factors([2, 3], [(0, 1)], [])
    with pytest.raises(ValueError, match="factor_lengths"):
        FactorGraph.from_factors([2, 3], [(0,)], [np.zeros(2)], lengths=[1, 1])
    g = FactorGraph.from_factors([2, 2, 2], [(0, 1, 2)], [np.zeros((2, 2, 2))])
    with pytest.raises(ValueError, match="arity"):
        g.infer("trw", rho="uniform")
    with pytest.raises(ValueError, match="mean field"):
        g.infer("mf", semiring="max")
    with pytest.raises(ValueError, match=r"rho.*shape \(1,\)"):
        g.infer("trw", rho=[0.5, 0.5])


def test_explicit_orders_and_warm_starts():
    rng = np.random.default_rng(4)
    card, factors, tables = random_factors(rng, 6, 7, max_arity=3)
    g = FactorGraph.from_factors(card, factors, tables)
    o = factor_oracle(card, factors, tables)
    for order in ("natural", rng.permutation(6), [5, 4, 3, 2, 1, 0]):
        check_sum(g.infer("exact", order=order), o)
    with pytest.raises(ValueError, match="permutation"):
        g.infer("exact", order=[0, 0, 1, 2, 3, 4])
    bp = g.infer("bp", max_iter=1000, warn=False)
    again = g.infer("bp", init=bp.messages)
    assert again.n_iter[0] <= 2 and again.converged[0]
    mf = g.infer("mf")
    # restarted from its fixed point, mean field stays there (one sweep to confirm)
    restart = g.infer("mf", init=mf.messages)
    assert restart.n_iter[0] <= 2
    np.testing.assert_allclose(restart.log_z, mf.log_z, rtol=1e-9)


def test_large_cliques_numpy_path_equals_compiled_path(monkeypatch):
    # cliques above BIG_CLIQUE entries are built by NumPy, the others by the compiled pass: same answers
    import structlearn.engine.structures.factor_graph_exact as fx

    rng = np.random.default_rng(9)
    e = grid_graph(7, 7)
    g = FactorGraph(rng.normal(size=(49, 3)), e, rng.normal(size=(len(e), 3, 3)))
    assert g.junction_tree().table_sizes.max() > fx.BIG_CLIQUE
    out = {}
    for thr in (fx.BIG_CLIQUE, 2**62):
        monkeypatch.setattr(fx, "BIG_CLIQUE", thr)
        g2 = g.constrain(np.ones((49, 3), dtype=bool))          # a copy sharing the compiled plan
        out[thr] = (g2.infer("exact"), g2.infer("exact", semiring="max"), g2.log_partition("exact"))
    a, b = out.values()
    for x, y in zip(a[:2], b[:2]):
        np.testing.assert_allclose(x.log_z, y.log_z, rtol=RTOL)
        np.testing.assert_allclose(x.unary, y.unary, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(x.edge, y.edge, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(a[1].labels, b[1].labels)
    np.testing.assert_allclose(a[2], b[2], rtol=RTOL)
    np.testing.assert_allclose(g.score(a[1].labels), a[1].log_z, rtol=RTOL)


def test_repr_is_one_line_of_counts_whatever_the_size():
    g = FactorGraph(np.zeros((3, 2)), [[0, 1], [1, 2], [0, 2]], np.zeros((2, 2)))
    assert repr(g) == ("FactorGraph(batch_size=1, n_variables=3, n_factors=3, cardinalities=2, "
                       "max_factor_arity=2, pairwise=True)")
    g = FactorGraph.from_factors([2, 3, 2], [(0, 1, 2), (1,)], [np.zeros((2, 3, 2)), np.zeros(3)])
    assert repr(g) == ("FactorGraph(batch_size=1, n_variables=3, n_factors=2, cardinalities={2: 2, 3: 1}, "
                       "max_factor_arity=3, pairwise=False)")
    n = 5000  # a big chain of variables with 1..9 labels: the repr stays a short summary
    card = np.arange(n) % 9 + 1
    g = FactorGraph.from_factors(card, [(i, i + 1) for i in range(n - 1)],
                                 [np.zeros((card[i], card[i + 1])) for i in range(n - 1)])
    assert repr(g) == ("FactorGraph(batch_size=1, n_variables=5000, n_factors=4999, cardinalities=1..9, "
                       "max_factor_arity=2, pairwise=False)")
