"""FactorGraph: loopy BP, TRW and exact inference against brute-force enumeration."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import ConvergenceWarning

from structlearn.engine.structures.factor_graph import BPOptions, FactorGraph
from tests.oracles.factor_graph import graph_oracle

RTOL = 1e-10
ATOL = 1e-12
seeds = st.integers(0, 2**31 - 1)


def random_forest(rng, n, p_drop=0.0):
    """Edges of a random tree on n nodes (random labels and orientations), some dropped (forest)."""
    perm = rng.permutation(n)
    edges = []
    for i in range(1, n):
        if rng.random() < p_drop:
            continue
        a, b = perm[i], perm[rng.integers(0, i)]
        edges.append((a, b) if rng.random() < 0.5 else (b, a))
    return np.array(edges, dtype=np.int64).reshape(-1, 2)


def random_loopy(rng, n, extra):
    """A random tree plus ``extra`` distinct non-tree edges (cycles)."""
    edges = [tuple(e) for e in random_forest(rng, n)]
    have = {frozenset(e) for e in edges}
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n) if frozenset((u, v)) not in have]
    for i in rng.permutation(len(pairs))[:extra]:
        edges.append(pairs[i])
    return np.array(edges, dtype=np.int64).reshape(-1, 2)


def potentials(rng, n, E, K, scale=1.5, p_inf=0.0):
    un = rng.normal(scale=scale, size=(n, K))
    pw = rng.normal(scale=scale, size=(E, K, K))
    if p_inf:
        un[rng.random(un.shape) < p_inf] = -np.inf
        pw[rng.random(pw.shape) < p_inf] = -np.inf
    return un, pw


def assert_matches(res, log_z, node, edge):
    np.testing.assert_allclose(res.log_z, [log_z], rtol=RTOL)
    np.testing.assert_allclose(res.unary, node, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(res.edge, edge, rtol=RTOL, atol=ATOL)


# -- trees and forests: BP = Tree engine = brute force ----------------------------------------------
@given(seeds, st.integers(1, 8), st.integers(2, 3), st.sampled_from(["sequential", "parallel", "residual"]),
       st.sampled_from([0.0, 0.1]))
def test_bp_exact_on_trees_and_forests(seed, n, K, schedule, p_inf):
    rng = np.random.default_rng(seed)
    if K == 3:
        n = min(n, 6)
    edges = random_forest(rng, n, p_drop=0.3 if rng.random() < 0.5 else 0.0)
    un, pw = potentials(rng, n, len(edges), K, p_inf=p_inf)
    log_z, _, _, node, edge = graph_oracle(un, edges, pw)
    g = FactorGraph(un, edges, pw)
    assert g.is_forest.all()
    exact = g.infer("exact")
    assert_matches(exact, log_z, node, edge)
    if np.isfinite(log_z):
        bp = g.infer("bp", schedule=schedule, tol=1e-300, max_iter=4 * n + 4)
        assert bp.converged[0]
        assert_matches(bp, log_z, node, edge)
        # TRW on a forest: every edge is a bridge, ρ = 1, so TRW is BP
        np.testing.assert_allclose(g.edge_appearance(), 1.0, rtol=RTOL)


@given(seeds, st.integers(2, 8))
def test_max_product_on_trees_gives_map(seed, n):
    rng = np.random.default_rng(seed)
    edges = random_forest(rng, n)
    un, pw = potentials(rng, n, len(edges), 2)
    _, best, _, _, _ = graph_oracle(un, edges, pw)
    g = FactorGraph(un, edges, pw)
    for method in ("bp", "trw", "exact"):
        labels = g.argmax(method)
        np.testing.assert_allclose(g.score(labels), [best], rtol=RTOL)
    np.testing.assert_allclose(g.max("exact"), [best], rtol=RTOL)


# -- loopy graphs: exact = brute force, TRW bound, BP == TRW(ρ ≡ 1) -------------------------------------
@given(seeds, st.integers(3, 8), st.integers(1, 6), st.integers(2, 3), st.sampled_from([0.0, 0.15]))
def test_exact_junction_tree_on_loopy_graphs(seed, n, extra, K, p_inf):
    rng = np.random.default_rng(seed)
    if K == 3:
        n = min(n, 6)
    edges = random_loopy(rng, n, extra)
    un, pw = potentials(rng, n, len(edges), K, p_inf=p_inf)
    log_z, best, _, node, edge = graph_oracle(un, edges, pw)
    g = FactorGraph(un, edges, pw)
    assert_matches(g.infer("exact"), log_z, node, edge)
    if np.isfinite(log_z):
        np.testing.assert_allclose(g.score(g.argmax("exact")), [best], rtol=RTOL)


@given(seeds, st.integers(3, 9), st.integers(1, 8))
def test_trw_upper_bounds_exact_log_z(seed, n, extra):
    rng = np.random.default_rng(seed)
    edges = random_loopy(rng, n, extra)
    un, pw = potentials(rng, n, len(edges), 2)
    g = FactorGraph(un, edges, pw)
    exact = g.log_partition("exact")
    res = g.infer("trw", warn=False)
    if res.converged.all():
        assert res.log_z[0] >= exact[0] - 1e-9
    # and for a user-given ρ from another spanning-tree distribution: one random spanning tree plus
    # the uniform one, mixed
    tree_mask = np.zeros(len(edges))
    tree_mask[: n - 1] = 1.0          # random_loopy lists a spanning tree first
    rho = 0.5 * tree_mask + 0.5 * g.edge_appearance()
    res = g.infer("trw", rho=rho, warn=False)
    if res.converged.all():
        assert res.log_z[0] >= exact[0] - 1e-9


@given(seeds, st.integers(3, 8), st.integers(1, 6), st.sampled_from(["log", "max"]))
def test_bp_is_trw_with_rho_one(seed, n, extra, semiring):
    rng = np.random.default_rng(seed)
    edges = random_loopy(rng, n, extra)
    un, pw = potentials(rng, n, len(edges), 3, p_inf=0.1)
    g = FactorGraph(un, edges, pw)
    bp = g.infer("bp", semiring=semiring, max_iter=30, warn=False)
    trw = g.infer("trw", semiring=semiring, options="bp", rho=np.ones(len(edges)), max_iter=30,
                  warn=False)
    for name in ("log_z", "unary", "edge", "messages", "n_iter", "max_residual", "converged"):
        np.testing.assert_array_equal(getattr(bp, name), getattr(trw, name))


def test_bp_close_to_exact_on_weakly_coupled_loopy_graph():
    rng = np.random.default_rng(3)
    edges = random_loopy(rng, 9, 6)
    un, pw = potentials(rng, 9, len(edges), 2, scale=0.3)
    g = FactorGraph(un, edges, pw)
    log_z, _, _, node, _ = graph_oracle(un, edges, pw)
    res = g.infer("bp")
    assert res.converged.all()
    assert abs(res.log_z[0] - log_z) < 0.05
    assert np.abs(res.unary - node).max() < 0.05
    # every schedule reaches the same fixed point
    for options in ("bp_parallel", "residual"):
        other = g.infer("bp", options=options)
        assert other.converged.all()
        np.testing.assert_allclose(other.log_z, res.log_z, rtol=1e-8)
        np.testing.assert_allclose(other.unary, res.unary, atol=1e-8)


# -- stability -------------------------------------------------------------------------------------
@given(seeds, st.integers(2, 8), st.integers(0, 6), st.sampled_from(["bp", "trw"]),
       st.sampled_from(["log", "max"]), st.sampled_from(["sequential", "parallel", "residual"]))
def test_neg_inf_potentials_never_nan(seed, n, extra, method, semiring, schedule):
    rng = np.random.default_rng(seed)
    edges = random_loopy(rng, n, extra)
    un, pw = potentials(rng, n, len(edges), 3, scale=4.0, p_inf=0.4)
    g = FactorGraph(un, edges, pw)
    res = g.infer(method, semiring=semiring, schedule=schedule, damping=0.3, max_iter=40, warn=False)
    for a in (res.log_z, res.unary, res.edge, res.max_residual):
        assert not np.isnan(a).any()
    assert not np.isnan(res.messages).any()


def test_infeasible_graph():
    neq = np.where(np.eye(2, dtype=bool), -np.inf, 0.0)
    g = FactorGraph(np.zeros((3, 2)), [[0, 1], [1, 2], [0, 2]], neq)   # odd cycle, 2 colours
    assert g.log_partition("exact")[0] == -np.inf
    assert np.all(g.marginals("exact").unary == 0)
    with pytest.raises(ValueError, match="no labeling"):
        g.argmax("exact")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = g.infer("bp", max_iter=20)
    assert not np.isnan(res.unary).any()


def test_non_convergence_warns():
    # a frustrated 3-cycle of strong antiferromagnetic couplings with a small field: flooding BP
    # oscillates
    J = 4.0
    pw = np.array([[-J, J], [J, -J]])
    g = FactorGraph([[0.1, 0.0], [0.0, 0.2], [0.3, 0.0]], [[0, 1], [1, 2], [2, 0]], pw)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        res = g.infer("bp", schedule="parallel", max_iter=3, tol=1e-12)
    assert not res.converged[0] and res.n_iter[0] == 3 and res.max_residual[0] > 0


# -- batches, ragged labels, clamping --------------------------------------------------------------
def test_batch_equals_one_by_one():
    rng = np.random.default_rng(7)
    graphs = [random_loopy(rng, 5, 3), random_forest(rng, 4), random_loopy(rng, 6, 2),
              np.zeros((0, 2), dtype=np.int64)]
    sizes = [5, 4, 6, 2]
    pots = [potentials(rng, n, len(e), 3) for n, e in zip(sizes, graphs)]
    g = FactorGraph(np.concatenate([p[0] for p in pots]), np.concatenate(graphs),
                    np.concatenate([p[1] for p in pots]), lengths=sizes,
                    edge_lengths=[len(e) for e in graphs])
    for method in ("bp", "trw", "exact"):
        kw = {} if method == "exact" else {"warn": False}
        res = g.infer(method, **kw)
        n0 = e0 = 0
        for b, (e, n, (un, pw)) in enumerate(zip(graphs, sizes, pots)):
            one = FactorGraph(un, e, pw).infer(method, **kw)
            np.testing.assert_allclose(res.log_z[b], one.log_z[0], rtol=RTOL)
            np.testing.assert_allclose(res.unary[n0:n0 + n], one.unary, rtol=RTOL, atol=ATOL)
            np.testing.assert_allclose(res.edge[e0:e0 + len(e)], one.edge, rtol=RTOL, atol=ATOL)
            n0, e0 = n0 + n, e0 + len(e)
    log_z, *_ = graph_oracle(pots[3][0], graphs[3], pots[3][1])
    np.testing.assert_allclose(g.log_partition("exact")[3], log_z, rtol=RTOL)


@given(seeds, st.integers(2, 6), st.integers(0, 4))
def test_ragged_numbers_of_labels(seed, n, extra):
    rng = np.random.default_rng(seed)
    edges = random_loopy(rng, n, extra)
    ks = rng.integers(1, 4, size=n)
    ks[0] = 3
    K = 3
    un_list = [rng.normal(size=k) for k in ks]
    pw_list = [rng.normal(size=(ks[u], ks[v])) for u, v in edges]
    un = np.full((n, K), -np.inf)
    pw = np.full((len(edges), K, K), -np.inf)
    for v, r in enumerate(un_list):
        un[v, :len(r)] = r
    for e, p in enumerate(pw_list):
        pw[e, :p.shape[0], :p.shape[1]] = p
    log_z, _, _, node, edge = graph_oracle(un, edges, pw, n_labels=ks)
    g = FactorGraph(un_list, edges, pw_list)
    np.testing.assert_array_equal(g.n_states, ks)
    assert_matches(g.infer("exact"), log_z, node, edge)
    res = g.infer("bp", warn=False)
    assert np.all(res.unary[np.arange(K)[None, :] >= ks[:, None]] == 0)
    if g.is_forest[0]:
        assert_matches(res, log_z, node, edge)
    # array form with n_labels gives the same graph
    g2 = FactorGraph(np.where(np.isinf(un), 0.0, un), edges, np.where(np.isinf(pw), 0.0, pw), n_labels=ks)
    np.testing.assert_allclose(g2.log_partition("exact"), [log_z], rtol=RTOL)


@settings(max_examples=30)
@given(seeds, st.integers(2, 6), st.integers(0, 5))
def test_constrain_partial_labels(seed, n, extra):
    rng = np.random.default_rng(seed)
    edges = random_loopy(rng, n, extra)
    un, pw = potentials(rng, n, len(edges), 3)
    labels = rng.integers(0, 3, size=n)
    observed = rng.random(n) < 0.5
    allowed = np.ones((n, 3), dtype=bool)
    allowed[observed] = False
    allowed[observed, labels[observed]] = True
    g = FactorGraph(un, edges, pw)
    c = g.constrain(allowed)
    log_zc, *_ = graph_oracle(np.where(allowed, un, -np.inf), edges, pw)
    np.testing.assert_allclose(c.log_partition("exact"), [log_zc], rtol=RTOL)
    assert np.all(c.marginals("exact").unary[~allowed] == 0)
    # all observed: incomplete log-likelihood = supervised one
    full = np.zeros((n, 3), dtype=bool)
    full[np.arange(n), labels] = True
    ll = g.constrain(full).log_partition("exact") - g.log_partition("exact")
    np.testing.assert_allclose(ll, g.score(labels) - g.log_partition("exact"), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(g.unary, un)      # the original is untouched


# -- spanning-tree edge appearance -----------------------------------------------------------------
def test_edge_appearance_uniform_spanning_trees():
    n = 5
    edges = np.array([(u, v) for u in range(n) for v in range(u + 1, n)])
    g = FactorGraph(np.zeros((n, 2)), edges, np.zeros((2, 2)))
    np.testing.assert_allclose(g.edge_appearance(), 2.0 / n, rtol=RTOL)    # complete graph K_n
    # a 4-cycle with a pendant edge and a separate triangle: Σ ρ = n − 1 per component
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [3, 4], [5, 6], [6, 7], [7, 5]])
    g = FactorGraph(np.zeros((8, 2)), edges, np.zeros((2, 2)))
    rho = g.edge_appearance()
    np.testing.assert_allclose(rho[:4], 0.75, rtol=RTOL)
    np.testing.assert_allclose(rho[4], 1.0, rtol=RTOL)
    np.testing.assert_allclose(rho[5:], 2.0 / 3.0, rtol=RTOL)


# -- options and validation ------------------------------------------------------------------------
def test_options_and_presets():
    assert BPOptions.preset("bp_parallel").schedule == "parallel"
    assert BPOptions.preset("trw", max_iter=7).max_iter == 7
    with pytest.raises(ValueError, match="preset"):
        BPOptions.preset("nope")
    g = FactorGraph(np.zeros((3, 2)), [[0, 1], [1, 2], [2, 0]], np.zeros((2, 2)))
    with pytest.raises(ValueError, match="damping"):
        g.infer("bp", damping=1.0)
    with pytest.raises(ValueError, match="schedule"):
        g.infer("bp", schedule="random")
    with pytest.raises(ValueError, match="unknown option"):
        g.infer("bp", dampign=0.5)
    with pytest.raises(ValueError, match="method"):
        g.infer("lbp")
    with pytest.raises(ValueError, match="rho"):
        g.infer("trw", rho=np.zeros(3))
    res = g.infer("bp", options="bp_parallel")
    res2 = g.infer("bp", init=res.messages)
    assert res2.n_iter[0] == 1 and res2.converged[0]


def test_validation_errors():
    un = np.zeros((3, 2))
    with pytest.raises(ValueError, match="self loop"):
        FactorGraph(un, [[0, 0]], np.zeros((2, 2)))
    with pytest.raises(ValueError, match="out of range"):
        FactorGraph(un, [[0, 3]], np.zeros((2, 2)))
    with pytest.raises(ValueError, match=r"\(E, 2\)"):
        FactorGraph(un, [0, 1], np.zeros((2, 2)))
    with pytest.raises(ValueError, match="pairwise"):
        FactorGraph(un, [[0, 1]], np.zeros((2, 3, 2)))
    with pytest.raises(ValueError, match="NaN"):
        FactorGraph(np.full((3, 2), np.nan), [[0, 1]], np.zeros((2, 2)))
    with pytest.raises(ValueError, match="edge_lengths"):
        FactorGraph(un, [[0, 1]], np.zeros((2, 2)), lengths=[1, 2])
    with pytest.raises(ValueError, match="out of range"):   # local indices of graph 0 (1 node)
        FactorGraph(un, [[0, 1]], np.zeros((2, 2)), lengths=[1, 2], edge_lengths=[1, 0])
    with pytest.raises(ValueError, match="labels"):
        FactorGraph(un, [[0, 1]], np.zeros((2, 2))).score(np.array([0, 2, 0]))


def test_junction_tree_memory_budget():
    side = 6
    idx = np.arange(side * side).reshape(side, side)
    edges = np.concatenate([np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
                            np.stack([idx[:-1].ravel(), idx[1:].ravel()], 1)])
    g = FactorGraph(np.zeros((side * side, 3)), edges, np.zeros((3, 3)))
    with pytest.raises(ValueError, match="max_table_size"):
        g.infer("exact", max_table_size=1000)
    # within budget it runs and agrees with BP's symmetry: uniform marginals
    m = g.marginals("exact")
    np.testing.assert_allclose(m.unary, 1.0 / 3.0, rtol=1e-9)
    np.testing.assert_allclose(g.log_partition("exact"), [side * side * np.log(3)], rtol=1e-12)
