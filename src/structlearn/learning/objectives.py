"""Training objectives: value and gradient of the negative conditional log-likelihood (CLL).

For a chain CRF with weights w and training pairs (x_b, y_b) (Lafferty et al. 2001; seed 000 eqs.
"llhood" and "pderiv")::

    L(w)  = Σ_b [log Z(x_b) - s(x_b, y_b)] + c2 ‖w‖²
    ∇L(w) = Σ_b (E_{p(y|x_b)}[f(x_b, y)] - f(x_b, y_b)) + 2 c2 w

The expectations are the engine's marginals. With partial labels (a boolean mask of allowed labels per
token), s(x, y) is replaced by log Z(x | allowed) and the empirical counts by the constrained
marginals: the same dynamic program run twice. L1 (c1 ‖w‖₁) is left to the optimiser (OWL-QN).
"""
import numpy as np

class ChainCLL:
    """Negative CLL of a packed training batch under a :class:`~structlearn.models.crf.ChainFeatureModel`.

    Parameters
    ----------
    model : ChainFeatureModel
    packed : Packed
        Training items (N tokens in B sequences).
    y : ndarray of int64, shape (N,)
        Gold labels; ignored where ``allowed`` is given.
    c2 : float
        L2 coefficient (CRFsuite scaling: c2·‖w‖²).
    c1 : float
        L1 coefficient: adds c1·‖w‖₁ to the value and c1·sign(w) to the gradient (a subgradient;
        exact wherever no weight is 0). Optimisers that handle L1 themselves (OWL-QN) get ``c1=0``
        here and the coefficient separately.
    allowed : ndarray of bool, shape (N, K), optional
        Partial labels: the set of labels allowed at each token.

    Notes
    -----
    One call costs one forward–backward over the batch, O(N·K²), plus O(nnz · labels per attribute) for
    potentials and gradient; both run in parallel over sequences / attributes.
    """

    def __init__(self, model, packed, y, c2=0.0, allowed=None, c1=0.0):
        self.model = model
        self.packed = packed
        self.y = np.asarray(y, dtype=np.int64)
        self.c2 = float(c2)
        self.c1 = float(c1)
        self.allowed = allowed
        self.mask = model.free_mask()
        off = packed.offsets
        nz = np.flatnonzero(packed.lengths > 0)
        self._first = off[nz]
        self._last = off[nz + 1] - 1
        self.n_evals = 0
        if allowed is None:
            self.empirical = model.feature_counts(packed, self.y)

    def _expected(self, chain):
        m = chain.marginals(edge="total")
        um = m.unary
        return (um, m.edge, um[self._first].sum(axis=0), um[self._last].sum(axis=0),
                chain.log_partition())

    def __call__(self, w, g=None):
        """Return L(w); write ∇L(w) into ``g`` if given (shape (n_params,))."""
        self.n_evals += 1
        chain = self.model.structure(w, self.packed)
        um, em, st, en, log_z = self._expected(chain)
        if self.allowed is None:
            gold = chain.score(self.y)
            value = float(np.sum(log_z) - np.sum(gold))
            if g is not None:
                g[...] = self.model.gradient(um, em, st, en, self.packed) - self.empirical
        else:
            cchain = chain.constrain(self.allowed)
            cum, cem, cst, cen, clog_z = self._expected(cchain)
            value = float(np.sum(log_z) - np.sum(clog_z))
            if g is not None:
                g[...] = self.model.gradient(um - cum, em - cem, st - cst, en - cen, self.packed)
        if not np.isfinite(value):
            bad = int(np.flatnonzero(~np.isfinite(log_z - (gold if self.allowed is None else clog_z)))[0])
            raise ValueError(f"training sequence {bad} has zero probability under the model (its labels "
                             f"use a forbidden transition or label); check `forbidden_transitions`")
        if self.c2 > 0:
            value += self.c2 * float(w @ w)
            if g is not None:
                g += 2.0 * self.c2 * w
        if self.c1 > 0:
            value += self.c1 * float(np.abs(w[self.mask]).sum())
            if g is not None:
                g += self.c1 * np.sign(w)
        if g is not None:
            g *= self.mask
        return value
