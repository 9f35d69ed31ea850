"""Brute-force oracle of partial labels on a chain: enumerate every labelling a token-wise mask allows.

Imports nothing from structlearn. A sequence of T tokens with the bool mask ``allowed`` (T, K) has a
feasible labelling when some y with allowed[t, y_t] for every t avoids the forbidden start labels
(``fstart[y_0]``), the forbidden transitions (``forb[y_t, y_{t+1}]``) and the forbidden end labels
(``fend[y_{T-1}]``); under a CRF that forbids them, every other labelling has probability zero.
"""
import itertools

import numpy as np


def feasible_labellings(allowed, forb, fstart, fend):
    """Every labelling (tuple of label indices) of one sequence that ``allowed`` (T, K) permits and
    that uses no forbidden start, transition or end; by enumeration, O(K^T)."""
    allowed = np.asarray(allowed, bool)
    choices = [np.flatnonzero(row).tolist() for row in allowed]
    out = []
    for y in itertools.product(*choices):
        if not y:
            continue
        if fstart[y[0]] or fend[y[-1]]:
            continue
        if any(forb[a, b] for a, b in zip(y[:-1], y[1:])):
            continue
        out.append(y)
    return out
