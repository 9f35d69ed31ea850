r"""Parsimonious horizontal-transition CPDs for HHMMs (Murphy & Paskin 2001 §4.2): a mixture of small
transition matrices at different depths ("mixed memory", Saul & Jordan 1999), learnable by generalised EM.

With the automaton's structure unknown, level d's horizontal CPD — the next child j ∈ {0..K-1, end} given
the child i that just finished and the context (the ancestors' positions q_1..q_{d-1}) — has
Q^{d-1}·K·(K + 1) free entries. The mixed-memory CPD ties them::

    P(j | i, q_1..q_{d-1}) = w_0 M_0[i, j] + Σ_{l=1}^{d-1} w_l M_l[q_l, j]

(M_0: the within-level chain; M_l: the influence of the ancestor at level l; weights w on the simplex):
(d + 1)·K·(K + 1) + d parameters per level instead of Q^{d-1}·K·(K + 1). The root level keeps its full
table (it has no ancestors).

M-step (generalised EM): from the expected horizontal counts n[ctx, i, j] of the E-step, inner EM
iterations over the mixture component (responsibilities r_l ∝ w_l M_l[cond_l, j]; w, M_l ∝ the
responsibility-weighted counts), started from the current parameters, each raising
Σ n log P(j | i, ctx) — so the outer likelihood never decreases.
"""
import numpy as np

from .dbn import dense_dbn

__all__ = ["MixedMemoryTransitions"]


class MixedMemoryTransitions:
    """Mixed-memory horizontal CPDs for the levels below the root of a hierarchy.

    Parameters
    ----------
    h : Hierarchy
        Every sub-model must be called from exactly one context (no sharing) and all sub-models of a
        level must have the same number of children K_d.
    n_inner : int
        Inner EM iterations per M-step.

    Raises
    ------
    ValueError
        A shared sub-model, or sub-models of one level with different numbers of children.
    """

    def __init__(self, h, n_inner=10):
        self.n_inner = int(n_inner)
        dbn = dense_dbn(h)
        self.dims = dims = dbn.dims
        self.levels = []  # per level d >= 2 (0-based d >= 1): (sub-models (C,), ancestor digits (C, d))
        seen = {}
        for d in range(len(dims)):
            subs = np.flatnonzero(dbn.ctx_sub[d] >= 0)
            ms = dbn.ctx_sub[d][subs]
            for m in ms:
                if m in seen:
                    raise ValueError(f"sub-model {h.submodel_names[m]!r} is called from several contexts "
                                     f"(shared); mixed-memory transitions need one context per sub-model")
                seen[m] = d
            if d == 0 or len(ms) == 0:
                continue
            Ks = {len(h.children[m]) for m in ms}
            if len(Ks) != 1:
                raise ValueError(f"level {d + 1} has sub-models with {sorted(Ks)} children; mixed-memory "
                                 f"transitions need the same number of children per level")
            anc = np.stack(np.unravel_index(subs, tuple(dims[:d])), axis=1)
            self.levels.append((d, ms, anc, Ks.pop()))
        self.params = None

    def n_parameters(self):
        """(mixed-memory, full) numbers of horizontal-CPD entries of the levels below the root."""
        mix = full = 0
        for d, ms, anc, K in self.levels:
            mix += K * (K + 1) + sum(int(self.dims[l]) * (K + 1) for l in range(d)) + d + 1
            full += len(ms) * K * (K + 1)
        return mix, full

    def _init(self, rows_list):
        params = []
        for (d, ms, anc, K), n in zip(self.levels, rows_list):
            M = [n.sum(axis=0) + 1.0]
            for l in range(d):
                Ml = np.ones((int(self.dims[l]), K + 1))
                np.add.at(Ml, anc[:, l], n.sum(axis=1))
                M.append(Ml)
            M = [x / x.sum(axis=1, keepdims=True) for x in M]
            params.append((np.full(d + 1, 1.0 / (d + 1)), M))
        return params

    def _rows(self, theta, h):
        """Current or counted (C, K, K + 1) horizontal rows of every level, from a θ-layout vector."""
        out = []
        for d, ms, anc, K in self.levels:
            r = np.empty((len(ms), K, K + 1))
            for c, m in enumerate(ms):
                b = h._base[m]
                r[c, :, :K] = theta[b + K:b + K + K * K].reshape(K, K)
                r[c, :, K] = theta[b + K + K * K:b + 2 * K + K * K]
            out.append(r)
        return out

    def probabilities(self, level_index):
        """(C, K, K + 1) mixed-memory rows P(j | i, context) of one level."""
        d, ms, anc, K = self.levels[level_index]
        w, M = self.params[level_index]
        p = w[0] * M[0][None, :, :]
        for l in range(d):
            p = p + w[l + 1] * M[l + 1][anc[:, l]][:, None, :]
        return p

    def m_step(self, counts, theta, h):
        """θ with the horizontal rows of the levels below the root replaced by the fitted mixture.

        ``counts``: expected θ-layout counts (E-step); ``theta``: the θ after the ordinary M-step.
        """
        n_list = self._rows(counts, h)
        if self.params is None:
            self.params = self._init(n_list)
        out = theta.copy()
        for k, ((d, ms, anc, K), n) in enumerate(zip(self.levels, n_list)):
            w, M = self.params[k]
            for _ in range(self.n_inner):
                comp = [w[0] * np.broadcast_to(M[0][None], n.shape)]
                for l in range(d):
                    comp.append(w[l + 1] * np.broadcast_to(M[l + 1][anc[:, l]][:, None, :], n.shape))
                comp = np.stack(comp)                      # (d + 1, C, K, K + 1)
                tot = comp.sum(axis=0)
                with np.errstate(invalid="ignore", divide="ignore"):
                    r = np.where(tot > 0, comp / tot, 0.0) * n  # responsibility-weighted counts
                w = r.sum(axis=(1, 2, 3))
                w = w / w.sum() if w.sum() > 0 else np.full(d + 1, 1.0 / (d + 1))
                M0 = r[0].sum(axis=0)
                newM = [M0]
                for l in range(d):
                    Ml = np.zeros_like(M[l + 1])
                    np.add.at(Ml, anc[:, l], r[l + 1].sum(axis=1))
                    newM.append(Ml)
                M = [np.where(x.sum(axis=1, keepdims=True) > 0, x / np.maximum(x.sum(axis=1, keepdims=True),
                                                                              1e-300), old)
                     for x, old in zip(newM, M)]
            self.params[k] = (w, M)
            p = self.probabilities(k)
            for c, m in enumerate(ms):
                b = h._base[m]
                out[b + K:b + K + K * K] = p[c, :, :K].ravel()
                out[b + K + K * K:b + 2 * K + K * K] = p[c, :, K]
        return out
