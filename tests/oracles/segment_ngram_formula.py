"""Brute-force oracle for the semi-Markov CRF with segment-label n-gram features (Nguyen, Ye, Lee & Chieu
2011), written from the formula alone, on named features: raw tokens (dicts attribute -> value) and the
weights as dictionaries keyed by attribute names and label tuples. Imports nothing from structlearn.

A segmentation s = ((a_1, b_1, k_1), …, (a_m, b_m, k_m)) of the T tokens (end inclusive, k_i ≠ k_{i+1},
b_i − a_i + 1 ≤ L[k_i]) scores

    start[k_1] + end[k_m] + Σ_i ( dur[(k_i, ℓ_i)]
                                  + Σ_{z : |z| ≤ i, (k_{i-|z|+1}, …, k_i) = z} ( [|z| ≥ 2] trans[z]
                                                                            + Σ_{t=a_i..b_i} Σ_a x_t[a] state[(a, z)] ) )

and p(y | x) = exp score(runs of y) / Σ_s exp score(s). Labels are strings; ``patterns`` is the set of label
tuples that carry a weight (every key of ``trans`` of length ≥ 2 and every z of a ``state`` key).
"""
import math

from ._common import logsumexp


def runs(labels):
    """The maximal runs of equal labels as (start, end inclusive, label) triples."""
    out = []
    for t, lab in enumerate(labels):
        if out and out[-1][2] == lab:
            out[-1] = (out[-1][0], t, lab)
        else:
            out.append((t, t, lab))
    return tuple(out)


def all_segmentations(T, classes, max_lengths, previous=None):
    """Every segmentation of T tokens into labelled segments, consecutive labels different."""
    if T == 0:
        yield ()
        return
    for lab in classes:
        if lab == previous:
            continue
        for d in range(1, min(max_lengths[lab], T) + 1):
            for rest in all_segmentations(T - d, classes, max_lengths, lab):
                yield ((0, d - 1, lab),) + tuple((a + d, b + d, k) for a, b, k in rest)


class Formula:
    """The formula's scores from named features: ``state`` (attribute, label tuple) -> w, ``trans`` label tuple
    -> w (n-grams, ("<start>", k), (k, "<end>")), ``dur`` (label, length) -> w, ``max_lengths`` label -> L."""

    def __init__(self, classes, state, trans, dur, max_lengths):
        self.classes, self.dur, self.max_lengths = list(classes), dur, max_lengths
        self.start = {k: trans[("<start>", k)] for k in self.classes}
        self.end = {k: trans[(k, "<end>")] for k in self.classes}
        self.ngrams = {z: w for z, w in trans.items() if "<start>" not in z and "<end>" not in z}
        self.state = {}
        for (a, z), w in state.items():
            self.state.setdefault(z, {})[a] = w
        self.patterns = set(self.ngrams) | set(self.state)

    def score(self, x, segs):
        """Score of one segmentation; -inf when a segment is longer than its label allows."""
        if not segs:
            return 0.0
        labs = [k for _, _, k in segs]
        total = [self.start[labs[0]], self.end[labs[-1]]]
        for i, (a, b, k) in enumerate(segs):
            length = b - a + 1
            if length > self.max_lengths[k]:
                return -math.inf
            total.append(self.dur[(k, length)])
            for n in range(1, i + 2):
                z = tuple(labs[i - n + 1:i + 1])
                if z not in self.patterns:
                    continue
                if n >= 2:
                    total.append(self.ngrams.get(z, 0.0))
                ws = self.state.get(z, {})
                for t in range(a, b + 1):
                    total.extend(v * ws[attr] for attr, v in x[t].items() if attr in ws)
        return math.fsum(total)

    def log_partition(self, x):
        """log Σ_s exp score(s) over every segmentation of ``x`` (a list of dicts attribute -> value)."""
        return logsumexp(self.score(x, s) for s in all_segmentations(len(x), self.classes, self.max_lengths))

    def log_probability(self, x, labels, log_z=None):
        """log p(labels | x); ``log_z`` from :meth:`log_partition` when already known."""
        log_z = self.log_partition(x) if log_z is None else log_z
        return self.score(x, runs(labels)) - log_z
