"""The hierarchical HMM as a dynamic Bayesian network (Murphy & Paskin 2001 §4, Fig. 2): representation (b) of
:mod:`structlearn.models.hhmm`, an independent check of the flattened chain."""
import numpy as np

from .hhmm import log_sum_exp

__all__ = ["HHMMDBN"]


class HHMMDBN:
    r"""The HHMM as a dynamic Bayesian network (Murphy & Paskin 2001 §4, Fig. 2).

    Per level d = 1..D: Q^d_t takes the index of a child within the sub-model selected by the context
    Q^{1:d-1}_t (or the value ``None`` below a production state; such padded levels always have
    F^d_t = 1), F^d_t ∈ {0, 1}. CPDs are tables keyed by the context tuple:

    - ``start[d][ctx]`` (K,): P(Q^d_t = j | F^d_{t-1} = 1 or t = 1, ctx) — the vertical distribution π;
    - ``trans[d][ctx]`` (K, K): Ã(i, j) = P(Q^d_t = j | Q^d_{t-1} = i, F^{d+1}_{t-1} = 1,
      F^d_{t-1} = 0, ctx) — the *rescaled* automaton transitions Ã(i, j) = a(i, j) / (1 - e(i))
      (Murphy & Paskin 2001 §4.1: the DBN never enters the end state; a row with e(i) = 1 is never used and is set to 0);
      Q^d_t = Q^d_{t-1} when F^{d+1}_{t-1} = 0;
    - ``end[d][ctx]`` (K,): P(F^d_t = 1 | Q^d_t = i, F^{d+1}_t = 1, ctx) = e(i); F^d_t = 0 when
      F^{d+1}_t = 0 (F^{D+1} ≡ 1);
    - the root (level 1 parent) is called once: F^1_t = 1 with t < T has probability 0 of continuing.
      ``clamp_final`` (``finish="all"``) clamps all F_T = 1.

    :meth:`log_likelihood` runs a generic forward pass over the joint slice (Q_t, F_t) using only these
    CPDs (time O(T·J²), J = number of joint slice values) — an independent check of the flattened HMM.
    """

    def __init__(self, depth, start, trans, end, production, clamp_final):
        self.depth = depth
        self.start, self.trans, self.end = start, trans, end
        self.production = production  # full context tuple -> production index
        self.clamp_final = clamp_final

    def joint_states(self):
        """All slice values (Q tuple padded with None, F tuple) with non-zero probability."""
        out = []
        for q in self.production:
            k = len(q)
            qq = q + (None,) * (self.depth - k)
            for cut in range(k + 1):  # F^d = 1 for d > cut
                out.append((qq, tuple(int(d > cut) for d in range(1, self.depth + 1))))
        return out

    def _log_q_given(self, q, prev_q, prev_f):
        """log P(Q_t = q | Q_{t-1}, F_{t-1}) (prev_q None: first slice) as a product over levels."""
        lp = 0.0
        D = self.depth
        for d in range(1, D + 1):
            ctx = tuple(q[:d - 1])
            if q[d - 1] is None:
                continue  # padded level: deterministic given the context
            if prev_q is None:
                p = self.start[d][ctx][q[d - 1]]
            else:
                f_self = prev_f[d - 1]
                f_below = prev_f[d] if d < D else 1
                if d == 1 and f_self == 1:
                    return -np.inf  # the root has finished: nothing is emitted after
                if f_self == 1:
                    p = self.start[d][ctx][q[d - 1]]
                elif tuple(prev_q[:d]) != tuple(q[:d - 1]) + (prev_q[d - 1],) or prev_q[d - 1] is None:
                    return -np.inf  # an unfinished level keeps its context
                elif f_below == 1:
                    p = self.trans[d][ctx][prev_q[d - 1], q[d - 1]]
                else:
                    p = 1.0 if prev_q[d - 1] == q[d - 1] else 0.0
            if p <= 0:
                return -np.inf
            lp += np.log(p)
        return lp

    def _log_f_given(self, q, f):
        lp = 0.0
        D = self.depth
        for d in range(D, 0, -1):
            below = f[d] if d < D else 1
            if q[d - 1] is None:
                if f[d - 1] != 1:
                    return -np.inf
                continue
            e = self.end[d][tuple(q[:d - 1])][q[d - 1]] if below == 1 else 0.0
            p = e if f[d - 1] == 1 else 1.0 - e
            if p <= 0:
                return -np.inf
            lp += np.log(p)
        return lp

    def log_likelihood(self, log_emission):
        """log P(o_1:T) from the CPDs alone. ``log_emission`` (T, P): log b_p(o_t) per production."""
        J = self.joint_states()
        T = log_emission.shape[0]
        if T == 0:
            return 0.0
        prod = np.array([self.production[tuple(x for x in q if x is not None)] for q, _ in J])
        lf = np.array([self._log_f_given(q, f) for q, f in J])
        l0 = np.array([self._log_q_given(q, None, None) for q, _ in J]) + lf
        tr = np.array([[self._log_q_given(q, pq, pf) for q, _ in J] for pq, pf in J]) + lf[None, :]
        alpha = l0 + log_emission[0, prod]
        for t in range(1, T):
            alpha = log_sum_exp(alpha[:, None] + tr, axis=0) + log_emission[t, prod]
        if self.clamp_final:
            final = np.array([0.0 if all(f) else -np.inf for _, f in J])
            alpha = alpha + final
        return float(log_sum_exp(alpha))
