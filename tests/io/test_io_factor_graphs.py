"""libDAI ``.fg`` and UAI model / evidence / result files: round trips, variable-order conventions, errors.

The files are written by the small generators below (not by the code under test), so the conventions are
pinned independently: libDAI lists a table with the first variable changing fastest, UAI with the last.
"""
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structlearn.io import (FGFormatError, UAIFormatError, evidence_mask, read_evid, read_fg, read_uai,
                            read_uai_result, write_evid, write_fg, write_uai, write_uai_result)
from structlearn.engine.structures import FactorGraph
from tests.oracles.factor_graph import factor_oracle

RTOL = 1e-10


def random_model(rng, n=4, F=4):
    card = [int(k) for k in rng.integers(1, 4, size=n)]
    factors, tables = [], []
    for _ in range(F):
        a = int(rng.integers(1, min(3, n) + 1))
        s = tuple(int(v) for v in rng.choice(n, size=a, replace=False))
        factors.append(s)
        tables.append(rng.uniform(0.1, 2.0, size=[card[v] for v in s]))   # linear values
    for v in sorted(set(range(n)) - {v for s in factors for v in s}):   # .fg knows variables by factors
        factors.append((v,))
        tables.append(rng.uniform(0.1, 2.0, size=card[v]))
    return card, factors, tables


def fg_text(card, factors, tables, labels=None):
    """A libDAI file by hand: entries enumerated with the FIRST variable fastest."""
    labels = labels or list(range(len(card)))
    out = [str(len(factors)), ""]
    for s, t in zip(factors, tables):
        out += [str(len(s)), " ".join(str(labels[v]) for v in s), " ".join(str(card[v]) for v in s)]
        entries = []
        for i, x in enumerate(itertools.product(*[range(card[v]) for v in reversed(s)])):
            entries.append(f"{i} {float(t[tuple(reversed(x))])!r}")       # reversed product: first var fastest
        out += [str(len(entries))] + entries + [""]
    return "\n".join(out)


def uai_text(card, factors, tables, network="MARKOV"):
    """A UAI file by hand: entries enumerated with the LAST variable fastest."""
    out = [network, str(len(card)), " ".join(map(str, card)), str(len(factors))]
    out += [f"{len(s)} " + " ".join(map(str, s)) for s in factors]
    for s, t in zip(factors, tables):
        vals = [repr(float(t[x])) for x in itertools.product(*[range(card[v]) for v in s])]
        out += ["", str(len(vals)), " " + " ".join(vals)]
    return "\n".join(out) + "\n"


def assert_same_model(g, card, factors, tables):
    np.testing.assert_array_equal(g.n_states, card)
    assert g.scopes == [tuple(s) for s in factors]
    for f, t in enumerate(tables):
        np.testing.assert_allclose(np.exp(g.table(f)), t, rtol=RTOL)


def _model_file(tmp_path_factory, seed, ext, text):
    """A random model from ``seed`` written by ``text`` to a fresh m.<ext>: (path, card, factors, tables)."""
    rng = np.random.default_rng(seed)
    card, factors, tables = random_model(rng)
    path = tmp_path_factory.mktemp(ext) / f"m.{ext}"
    path.write_text(text(card, factors, tables))
    return path, card, factors, tables


def _assert_rejected(tmp_path, bad, ext, read, error):
    """Each text of ``bad`` written to a .<ext> file makes ``read`` raise ``error`` matching its message."""
    for i, (text, msg) in enumerate(bad.items()):
        p = tmp_path / f"b{i}.{ext}"
        p.write_text(text)
        with pytest.raises(error, match=msg):
            read(p)


@settings(max_examples=25)
@given(st.integers(0, 2**31 - 1))
def test_fg_generated_file_reads_and_round_trips(tmp_path_factory, seed):
    path, card, factors, tables = _model_file(tmp_path_factory, seed, "fg", fg_text)
    g = read_fg(path)
    assert_same_model(g, card, factors, tables)
    o = factor_oracle(card, factors, [np.log(t) for t in tables])
    np.testing.assert_allclose(g.log_partition("exact"), [o["log_z"]], rtol=RTOL)
    write_fg(path, g)
    assert_same_model(read_fg(path), card, factors, tables)


def test_fg_first_variable_fastest_and_labels(tmp_path):
    # factor over labels 7 (2 states) and 3 (3 states): index 1 is (x7 = 1, x3 = 0)
    text = "1\n\n2\n7 3\n2 3\n2\n1 5.0\n2 0.5\n"
    (tmp_path / "a.fg").write_text(text)
    g, labels = read_fg(tmp_path / "a.fg", return_labels=True)
    np.testing.assert_array_equal(labels, [3, 7])
    assert g.scopes == [(1, 0)]                   # the file's order of the factor's variables is kept
    t = np.exp(g.table(0))                        # axes (x7, x3)
    np.testing.assert_allclose(t, [[0, 0.5, 0], [5.0, 0, 0]], rtol=RTOL)


def test_fg_errors(tmp_path):
    bad = {"1\n\n1\n0\n2\n1\n5 1.0\n": "entry index 5",
           "1\n\n1\n0\n2\n1\n0 -1\n": "value",
           "2\n\n1\n0\n2\n0\n\n1\n0\n3\n0\n": "cardinality 2 and 3",
           "1\n\n1\n0\n2\n": "end of file",
           "1\n\n1\n0\n2\n0\n9\n": "trailing"}
    _assert_rejected(tmp_path, bad, "fg", read_fg, FGFormatError)


@settings(max_examples=25)
@given(st.integers(0, 2**31 - 1))
def test_uai_generated_file_reads_and_round_trips(tmp_path_factory, seed):
    path, card, factors, tables = _model_file(tmp_path_factory, seed, "uai", uai_text)
    g, net = read_uai(path, return_network=True)
    assert net == "MARKOV"
    assert_same_model(g, card, factors, tables)
    write_uai(path, g)
    assert_same_model(read_uai(path), card, factors, tables)


def test_uai_last_variable_fastest():
    text = "MARKOV\n2\n2 3\n1\n2 0 1\n\n6\n 1 2 3 4 5 6\n"
    import io
    g = read_uai(io.StringIO(text))
    np.testing.assert_allclose(np.exp(g.table(0)), [[1, 2, 3], [4, 5, 6]], rtol=RTOL)


def test_bayes_network_evidence_and_results(tmp_path):
    # x0 → x1 → x2 as CPTs (child last); PR = P(evidence)
    p0 = np.array([0.3, 0.7])
    p1 = np.array([[0.9, 0.1], [0.2, 0.8]])
    p2 = np.array([[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]])
    card, factors, tables = [2, 2, 3], [(0,), (0, 1), (1, 2)], [p0, p1, p2]
    (tmp_path / "bn.uai").write_text(uai_text(card, factors, tables, "BAYES"))
    g, net = read_uai(tmp_path / "bn.uai", return_network=True)
    assert net == "BAYES"
    np.testing.assert_allclose(g.log_partition("exact"), [0.0], atol=1e-12)
    write_uai(tmp_path / "bn2.uai", g, network="BAYES")
    assert read_uai(tmp_path / "bn2.uai", return_network=True)[1] == "BAYES"
    bad = FactorGraph.from_factors([2], [(0,)], [np.log([0.5, 0.6])])
    with pytest.raises(ValueError, match="not a CPT"):
        write_uai(tmp_path / "x.uai", bad, network="BAYES")
    # evidence x2 = 2: P(x2 = 2) by hand
    (tmp_path / "bn.uai.evid").write_text("1 2 2\n")
    ev = read_evid(tmp_path / "bn.uai.evid")
    assert ev == {2: 2}
    pr = sum(p0[a] * p1[a, b] * p2[b, 2] for a in range(2) for b in range(2))
    cond = g.constrain(evidence_mask(g, ev))
    log_pr = cond.log_partition("exact")[0]
    np.testing.assert_allclose(log_pr, math.log(pr), rtol=RTOL)
    write_evid(tmp_path / "e2.evid", ev)
    assert read_evid(tmp_path / "e2.evid") == ev
    (tmp_path / "old.evid").write_text("1\n1 2 2\n")            # UAI 2010: a sample count first
    assert read_evid(tmp_path / "old.evid") == ev
    # result files
    res = cond.infer("exact")
    write_uai_result(tmp_path / "r.MAR", "MAR", res.unary, n_states=g.n_states)
    kind, mar = read_uai_result(tmp_path / "r.MAR")
    assert kind == "MAR" and [m.size for m in mar] == card
    for v in range(3):
        np.testing.assert_allclose(mar[v], res.unary[v, :card[v]], rtol=RTOL)
    write_uai_result(tmp_path / "r.PR", "PR", log_pr)
    assert (tmp_path / "r.PR").read_text().split()[1] == f"{log_pr / math.log(10):.17g}"
    kind, v = read_uai_result(tmp_path / "r.PR")
    assert kind == "PR" and math.isclose(v, log_pr, rel_tol=1e-12)
    lab = cond.argmax("exact")
    write_uai_result(tmp_path / "r.MAP", "MAP", lab)
    kind, v = read_uai_result(tmp_path / "r.MAP")
    assert kind == "MAP"
    np.testing.assert_array_equal(v, lab)


def test_pairwise_graph_writes_unaries_as_factors(tmp_path):
    rng = np.random.default_rng(2)
    g = FactorGraph(rng.normal(size=(3, 2)), [[0, 1], [1, 2], [2, 0]], rng.normal(size=(3, 2, 2)))
    for write, read, name in ((write_fg, read_fg, "p.fg"), (write_uai, read_uai, "p.uai")):
        write(tmp_path / name, g)
        h = read(tmp_path / name)
        assert h.n_factors == 6
        np.testing.assert_allclose(h.log_partition("exact"), g.log_partition("exact"), rtol=RTOL)
        np.testing.assert_allclose(h.infer("exact").unary, g.infer("exact").unary, rtol=RTOL, atol=1e-14)


def test_uai_errors(tmp_path):
    bad = {"GRAPH\n1\n2\n0\n": "header",
           "MARKOV\n1\n2\n1\n1 3\n\n2\n1 1\n": "variables",
           "MARKOV\n1\n2\n1\n1 0\n\n3\n1 1 1\n": "entries",
           "MARKOV\n1\n2\n1\n1 0\n\n2\n1 -1\n": "negative",
           "MARKOV\n1\n2\n1\n1 0\n\n2\n1 1 7\n": "trailing"}
    _assert_rejected(tmp_path, bad, "uai", read_uai, UAIFormatError)
    (tmp_path / "e.evid").write_text("2 0 1\n")
    with pytest.raises(UAIFormatError, match="expected"):
        read_evid(tmp_path / "e.evid")


def test_uai_and_fg_files_in_shortest_form_are_written_back_byte_for_byte(tmp_path):
    # exp(log(3)) is 3.0000000000000004: the writers give the shortest decimal that reads back into the same
    # log-table, so a file written in that form comes back unchanged
    uai = ("MARKOV\n3\n2 3 2\n2\n1 0\n3 0 1 2\n"
           "\n2\n 3 0.1\n"
           "\n12\n 1e-300 0.7 3 2.5 0 1 0.30000000000000004 123456.789 1e+300 0.001 17 4.940656458412e-300\n")
    (tmp_path / "a.uai").write_text(uai)
    write_uai(tmp_path / "b.uai", read_uai(tmp_path / "a.uai"))
    assert (tmp_path / "b.uai").read_bytes() == uai.encode()
    fg = "2\n\n1\n0\n2\n2\n0 3\n1 0.1\n\n2\n0 1\n2 3\n3\n0 1e-300\n3 0.7\n5 2.5\n"
    (tmp_path / "a.fg").write_text(fg)
    write_fg(tmp_path / "b.fg", read_fg(tmp_path / "a.fg"))
    assert (tmp_path / "b.fg").read_bytes() == fg.encode()


def test_written_tables_read_back_bit_for_bit(tmp_path):
    rng = np.random.default_rng(5)
    tables = [rng.normal(size=(2, 3)) * 50, np.log(rng.random(3))]
    tables[0][0, 1] = -np.inf
    g = FactorGraph.from_factors([2, 3], [(0, 1), (1,)], tables)
    for write, read, name in ((write_fg, read_fg, "r.fg"), (write_uai, read_uai, "r.uai")):
        write(tmp_path / name, g)
        back = read(tmp_path / name)
        for f in range(2):
            np.testing.assert_array_equal(back.table(f), g.table(f))
