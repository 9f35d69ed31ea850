"""Brute-force oracle for hierarchical HMMs: enumerate every parse (stack sequence with its moves) of a
tiny automaton by simulating the call/return semantics directly. Imports nothing from structlearn.

An automaton is ``submodels = {name: {"children": [...], "start": [...], "trans": [[...]], "end": [...]}}``
with a root name; a child that is a key is abstract, any other name a production state.
``log_emission(t, name)`` gives log b_name(o_t).
"""
import math

from ._common import logsumexp


def _log(p):
    return math.log(p) if p > 0 else -math.inf


def _descend(sub, m, prefix):
    """(path, log-prob) of every vertical descent from sub-model m down to a production state."""
    sm = sub[m]
    for i, c in enumerate(sm["children"]):
        p = sm["start"][i]
        if p <= 0:
            continue
        if c in sub:
            for path, lp in _descend(sub, c, prefix + (c,)):
                yield path, _log(p) + lp
        else:
            yield prefix + (c,), _log(p)


def _moves(sub, root, path):
    """(next path or None, level of the horizontal move (0 = root ended), log-prob) after emitting."""
    lp_end = 0.0
    for d in range(len(path), 0, -1):
        m = root if d == 1 else path[d - 2]
        sm = sub[m]
        i = sm["children"].index(path[d - 1])
        for j, c in enumerate(sm["children"]):
            a = sm["trans"][i][j]
            if a <= 0:
                continue
            base = lp_end + _log(a)
            if c in sub:
                for p2, lp in _descend(sub, c, path[:d - 1] + (c,)):
                    yield p2, d, base + lp
            else:
                yield path[:d - 1] + (c,), d, base
        e = sm["end"][i]
        if e <= 0:
            return
        lp_end += _log(e)
    yield None, 0, lp_end


def parses(sub, root, log_emission, T, finish="all"):
    """Every parse of length T: (paths (T tuples), levels (T ints: move after t; at T-1 the final
    move, 0 = the root ended), log-prob including emissions). ``finish="all"``: the root ends right after
    T-1; ``"none"``: any final move (their probabilities sum to one, so the likelihood is the prefix's)."""
    out = []

    def rec(t, path, paths, levels, lp):
        lp = lp + log_emission(t, path[-1])
        if lp == -math.inf:
            return
        for nxt, d, lm in _moves(sub, root, path):
            if t == T - 1:
                if finish == "all" and nxt is not None:
                    continue
                out.append((paths + [path], levels + [d], lp + lm))
            elif nxt is not None:
                rec(t + 1, nxt, paths + [path], levels + [d], lp + lm)

    if T == 0:
        return [([], [], 0.0)]
    for path, lp in _descend(sub, root, ()):
        rec(0, path, [], [], lp)
    return out


def log_likelihood(sub, root, log_emission, T, finish="all"):
    return logsumexp([lp for _, _, lp in parses(sub, root, log_emission, T, finish)])


def marginals(sub, root, log_emission, T, finish="all", depth=None):
    """log Z, P(path active at t) and P(prefix finishes at t) as dicts path -> list over t.

    A prefix of length l (a node in context) finishes after t (its span ends) when the move after t
    happens at a level <= l (0 = root ended: every node ends). Also P(F^d_t = 1) = P(move level < d) as
    ``levels[d - 1]`` lists.
    """
    ps = parses(sub, root, log_emission, T, finish)
    lz = logsumexp([lp for _, _, lp in ps])
    active, fin = {}, {}
    if depth is None:
        depth = max((len(p) for paths, _, _ in ps for p in paths), default=0)
    flags = [[0.0] * T for _ in range(depth)]
    for paths, levels, lp in ps:
        w = math.exp(lp - lz)
        for t, (path, d) in enumerate(zip(paths, levels)):
            for dd in range(1, depth + 1):
                if d < dd:
                    flags[dd - 1][t] += w
            for l in range(1, len(path) + 1):
                pre = path[:l]
                active.setdefault(pre, [0.0] * T)[t] += w
                fin.setdefault(pre, [0.0] * T)
                if d <= l:  # the node at level l ends: it moved (d = l) or its level ended (d < l)
                    fin[pre][t] += w
    return lz, active, fin, flags


def viterbi(sub, root, log_emission, T):
    """Best complete parse (paths, levels, log-prob) under ``finish="all"``."""
    best = None
    for paths, levels, lp in parses(sub, root, log_emission, T, "all"):
        if best is None or lp > best[2]:
            best = (paths, levels, lp)
    return best
