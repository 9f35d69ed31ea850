r"""Approximate HHMM inference on its DBN: the factored frontier (Murphy & Weiss 2001; Murphy & Paskin
2001 §5, "equivalent to applying loopy belief propagation to the DBN using a left-right scheduling").

The belief state of every slice is kept as a product of per-level factors b_d(Q^d_t); evidence, the F
nodes (as the slice's cut level C_t) and the transition CPDs act exactly on the joint of one slice given
these factors, and the result is projected back onto per-level marginals (Numba kernels in
:mod:`structlearn.engine.kernels.hhmm_ff`):

- filtering and log-likelihood: one left-to-right sweep (:func:`~structlearn.engine.kernels.hhmm_ff.ff_forward`);
- smoothing: a right-to-left sweep with the backward message also a product of per-level factors; every
  slice's posterior over (Q_t, C_t) and its family marginals (what EM needs) are exact given the two
  factored messages (:func:`~structlearn.engine.kernels.hhmm_ff.ff_smooth`);
- Viterbi: the max-product forward sweep, then the traceback of the exact decoder
  (:func:`~structlearn.engine.kernels.hhmm_jtree.viterbi_traceback`) run on the factored max-messages. The
  returned path is legal and its reported log-probability is its exact one; when the traceback of a
  sequence meets an unreachable state (the product of marginals gives weight to stack values the model
  cannot reach) that sequence is decoded exactly (junction tree) with a ``RuntimeWarning``.

All three are exact for a one-level hierarchy (the factors are then the joint). Time per slice
O(nQ·D² + Σ_d n_1·…·n_d·n_d) with nQ = n_1·…·n_D, against (D + 1)·Q^{D+1}·D for the junction
tree; the error is measured in ``tests/hhmm/test_hhmm_ff.py`` and reported in ``docs/hhmm.md``.
"""
import warnings

import numpy as np

from ..engine.kernels import hhmm_ff as _kf
from ..engine.kernels import hhmm_jtree as _kj
from ..engine.semirings import LOG, MAX
from .jtree import DBNInference, Smoothed

__all__ = ["FactoredFrontier"]


class FactoredFrontier(DBNInference):
    """Factored-frontier inference of one hierarchy, with the interface of
    :class:`~structlearn.hhmm.jtree.DBNInference` (``log_likelihood``, ``filter``, ``smooth``,
    ``posteriors``, ``expected_counts``, ``decode``; ``log_b`` (N, P) log emission densities per
    production state, ragged ``offsets`` (B + 1,)). Results are approximations (exact for depth 1)."""

    def _level_priors(self, semiring):
        dbn, D = self.dbn, self.D
        dims = tuple(int(n) for n in dbn.dims)
        lp = np.full((D, int(max(dims))), -np.inf)
        pr = np.exp(dbn.log_prior.reshape(dims))
        for d in range(D):
            axes = tuple(k for k in range(D) if k != d)
            m = pr.max(axis=axes) if semiring == MAX else pr.sum(axis=axes)
            with np.errstate(divide="ignore"):
                lp[d, :dims[d]] = np.log(m)
        return lp

    def _sweep(self, em, semiring=LOG, clamp=True):
        """(log_c (T,), post (T, nQ), belief (T, D, nmax)) of one sequence (kernel ``ff_forward``).
        Sum-product starts from the product of the prior's level marginals; max-product from the exact
        joint prior (so that the traceback starts at a reachable stack)."""
        key = "_lp_max" if semiring == MAX else "_lp_sum"
        lp = self.__dict__.get(key)
        if lp is None:
            lp = self.__dict__[key] = self._level_priors(semiring)
        return _kf.ff_forward(em, np.asarray(self.dbn.dims, dtype=np.int64), lp, self.dbn.log_prior,
                              semiring == MAX, self.fscore, self.q_flat, self.q_off,
                              clamp and self.finish == "all", semiring)

    def _log_norms(self, em):
        return self._sweep(em)[0]

    def _filter_one(self, em):
        lc, p, _ = self._sweep(em, clamp=False)
        return np.cumsum(lc), p

    def log_likelihood(self, log_b, offsets):
        """Approximate log P(X_b) per sequence (B,)."""
        return super().log_likelihood(log_b, offsets)

    def filter(self, log_b, offsets):
        """(approximate config posteriors (N, S) P(s_t | o_1:t), running log P(o_1:t) (N,))."""
        return super().filter(log_b, offsets)

    def smooth(self, log_b, offsets, store_f=False):
        """Factored-frontier forward–backward; see :data:`~structlearn.hhmm.jtree.Smoothed`
        (``log_z`` is the factored frontier's approximate log-likelihood)."""
        em = self._em(log_b)
        N = em.shape[0]
        dims = np.asarray(self.dbn.dims, dtype=np.int64)
        nF = int(self.f_off[-1])
        gamma = np.zeros((N, self.nQ))
        fam_f = np.zeros((N, nF)) if store_f else None
        acc_q = np.zeros(int(self.q_off[-1]))
        acc_f = np.zeros(nF)
        log_z = np.zeros(len(offsets) - 1)
        clamp = self.finish == "all"
        for i, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
            if b == a:
                continue
            lc, _, belief = self._sweep(em[a:b])
            log_z[i] = lc.sum()
            if not np.isfinite(log_z[i]):
                continue
            g, aq, af, ft = _kf.ff_smooth(em[a:b], dims, belief, self.fscore, self.q_flat, self.q_off,
                                          self.f_off, clamp, bool(store_f))
            gamma[a:b] = g
            acc_q += aq
            acc_f += af
            if store_f:
                fam_f[a:b] = ft
        return Smoothed(log_z, gamma, fam_f, acc_q, acc_f)

    def decode(self, log_b, offsets):
        """Approximate Viterbi parse: (exact log-prob of the returned parse (B,), configuration (N,),
        cut level (N,)); see :meth:`DBNInference.decode`."""
        D = self.D
        em, cfg, cut, best, final = self._decode_start(log_b, offsets)
        dims = np.asarray(self.dbn.dims, dtype=np.int64)
        digits = np.stack(np.unravel_index(np.arange(self.nQ), tuple(int(n) for n in dims)))  # (D, nQ)
        for i, (a, b) in enumerate(zip(offsets[:-1], offsets[1:])):
            if b == a:
                continue
            lc, _, belief = self._sweep(em[a:b], MAX)
            score = -np.inf
            if np.isfinite(lc.sum()):
                with np.errstate(divide="ignore"):
                    lb = np.log(belief)
                alpha = lb[:, np.arange(D)[:, None], digits].sum(axis=1)  # (T, nQ) Σ_d log b_d(q_d)
                alpha[0] = self.dbn.log_prior
                q, c = _kj.viterbi_traceback(alpha, em[a:b], self.fscore, final, dims, self.q_flat,
                                             self.q_off)
                score = _kf.path_log_prob(q, c, em[a:b], self.dbn.log_prior, self.fscore, final, dims,
                                          self.q_flat, self.q_off)
            if not np.isfinite(score):
                # the factored max-messages led the traceback to a stack value with no legal
                # predecessor (or the string is impossible): decode this sequence exactly
                warnings.warn(f"factored-frontier Viterbi found no legal parse of sequence {i}; it is "
                              f"decoded exactly (junction tree)", RuntimeWarning, stacklevel=3)
                sc, cf, ct = DBNInference.decode(self, log_b[a:b], np.array([0, b - a]))
                best[i], cfg[a:b], cut[a:b] = sc[0], cf, ct
                continue
            best[i] = score
            cfg[a:b] = self.dbn.stack_cfg[q]
            cut[a:b] = c
            cut[b - 1] = 0 if self.finish == "all" else -1
        return best, cfg, cut
