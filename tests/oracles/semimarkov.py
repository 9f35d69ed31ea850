"""Brute-force semi-Markov oracle: enumerate every segmentation of one sequence.

Imports nothing from structlearn. A segmentation is a tuple of (start, end, label) triples (end
inclusive) tiling [0, T). Its score follows the definition in the SemiMarkov docstring, written out
again here from scratch:

    start[k_1] + Σ_i (Σ_{u=s_i..e_i} unary[u, k_i] + dur_i[d_i - 1, k_i] (+ segment[e_i, d_i - 1, k_i]))
               + Σ_{i<m} transition[k_i, k_{i+1}] + end[k_m]

with dur_i = single if the segment is the whole sequence, first if it starts at 0, last if it ends
at T-1, else duration; consecutive equal labels score -inf when allow_same_label is False. A
time-varying transition (T, K, K) scores the boundary between segment i (ending at e_i) and segment
i+1 with transition[e_i, k_i, k_{i+1}] (row e_i = the boundary after token e_i).
"""
import math

import numpy as np

from ._common import logsumexp, segmentations


def score(segs, p):
    """Score of one segmentation of one sequence under the parameter dict ``p`` (see enumerate_all)."""
    T = p["unary"].shape[0]
    if T == 0:
        return 0.0
    total = 0.0
    prev = None
    for (s, e, k) in segs:
        d = e - s + 1
        if s == 0 and e == T - 1:
            table = p["single"]
        elif s == 0:
            table = p["first"]
        elif e == T - 1:
            table = p["last"]
        else:
            table = p["duration"]
        terms = [float(p["unary"][u, k]) for u in range(s, e + 1)]
        terms.append(float(table[d - 1, k]))
        if p.get("segment") is not None:
            terms.append(float(p["segment"][e, d - 1, k]))
        if prev is None:
            terms.append(float(p["start"][k]))
        else:
            if prev == k and not p["allow_same_label"]:
                return -math.inf
            tr = np.asarray(p["transition"])
            terms.append(float(tr[s - 1, prev, k] if tr.ndim == 3 else tr[prev, k]))
        if any(t == -math.inf for t in terms):
            return -math.inf
        total += math.fsum(terms)
        prev = k
    end = float(p["end"][prev])
    return -math.inf if end == -math.inf else total + end


def enumerate_all(p):
    """List of (score, segs) over all segmentations with score > -inf, best first.

    ``p``: dict with unary (T, K), duration/first/last/single (D, K), transition (K, K) or (T, K, K),
    start, end
    (K,), segment (T, D, K) or None, allow_same_label (bool)."""
    T, K = p["unary"].shape
    D = p["duration"].shape[0]
    items = [(score(segs, p), segs) for segs in segmentations(T, D, K)]
    items = [it for it in items if it[0] > -math.inf]
    items.sort(key=lambda it: -it[0])
    return items


def summary(p):
    """Everything the tests compare, for one sequence: dict with log_z, max, items (sorted),
    token (T, K), edge (T, K, K), seg (T, D, K), entropy, dur (4, D, K) (tables middle, first,
    last, single), probs (dict segs -> probability)."""
    T, K = p["unary"].shape
    D = p["duration"].shape[0]
    items = enumerate_all(p)
    out = {"items": items, "token": np.zeros((T, K)), "edge": np.zeros((T, K, K)),
           "seg": np.zeros((T, D, K)), "dur": np.zeros((4, D, K)), "probs": {}}
    if not items:
        out.update(log_z=-math.inf, max=-math.inf, entropy=-math.inf)
        return out
    log_z = logsumexp([s for s, _ in items])
    out["log_z"] = log_z
    out["max"] = items[0][0]
    ent = []
    for s, segs in items:
        pr = math.exp(s - log_z)
        out["probs"][segs] = pr
        if pr > 0:
            ent.append(-pr * (s - log_z))
        for i, (a, e, k) in enumerate(segs):
            out["token"][a:e + 1, k] += pr
            out["seg"][e, e - a, k] += pr
            table = 3 if (a == 0 and e == T - 1) else 1 if a == 0 else 2 if e == T - 1 else 0
            out["dur"][table, e - a, k] += pr
            if i + 1 < len(segs):
                out["edge"][e, k, segs[i + 1][2]] += pr
    out["entropy"] = math.fsum(ent)
    return out
