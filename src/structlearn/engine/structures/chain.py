"""Linear chains: first-order label sequences over a packed ragged batch."""
import numpy as np
from numba import get_num_threads

from ..kernels import chain as _k
from ..semirings import LOG
from ...utils.validation import check_labels, check_log_potentials
from ._base import LabelingStructure, Marginals, check_pairwise


class LinearChain(LabelingStructure):
    r"""Distribution over label sequences of a first-order chain (linear-chain CRF / HMM posterior).

    The score of labels :math:`y_{0:T}` of one sequence is

    .. math:: s(y) = start[y_0] + \sum_t unary[t, y_t] + \sum_{t<T-1} transition[t, y_t, y_{t+1}] + end[y_{T-1}]

    and :math:`p(y) = \exp(s(y) - \log Z)` (Lafferty, McCallum & Pereira 2001, eq. (1)).

    Parameters
    ----------
    unary : array-like of float64, shape (N, K)
        Log-potentials of label k at token n; N = sum(lengths). -inf forbids a label.
    transition : array-like of float64, shape (K, K) or (N, K, K)
        Log-potentials "from, to": ``transition[i, j]`` scores label i at t followed by j at t+1.
        Time-varying form: row n scores the step from token n to n+1 of the same sequence; rows at
        sequence ends are ignored. -inf forbids a transition.
    lengths : array-like of int, shape (B,), optional
        Lengths of the B sequences packed in ``unary``; default one sequence of N tokens.
    start, end : array-like of float64, shape (K,), optional
        Log-potentials of the first / last label of every sequence; default 0.

    Raises
    ------
    ValueError
        Shapes that disagree, NaN or +inf potentials, lengths that do not sum to N.

    Notes
    -----
    All methods run Numba kernels in parallel over sequences (one sequence, or a batch too small for
    threads to pay, runs on the calling thread). Cost per call: time O(N·K²), memory
    O(N·K) (forward–backward, Sutton & McCallum 2012, "An introduction to conditional random fields",
    §4.1); ``kbest(k)`` O(N·K²·k log(Kk)).
    Infeasible sequences (every labeling has potential -inf) get ``log_partition`` -inf, zero
    marginals, and make ``argmax``/``kbest``/``sample`` raise ``ValueError`` naming the sequence.
    """

    def __init__(self, unary, transition, *, lengths=None, start=None, end=None):
        unary = check_log_potentials(unary, "unary", ndim=2)
        N, K = unary.shape
        self._init_batch(N, K, lengths)
        transition, shared = check_pairwise(transition, "transition", N, K)
        self.stationary = shared or N == 0  # an empty batch has no steps: treat it as stationary
        self.unary = unary
        # kernels read trans[0] to prepare the stationary fast path: give an empty batch a dummy row
        self._trans = np.ascontiguousarray(transition if N else np.zeros((1, K, K)))
        self.start = (np.zeros(K) if start is None
                      else check_log_potentials(start, "start", (K,)))
        self.end = np.zeros(K) if end is None else check_log_potentials(end, "end", (K,))
        self._cache = {}

    @classmethod
    def _unchecked(cls, unary, transition, lengths, start, end=None):
        """A stationary chain from potentials its caller guarantees: ``unary`` float64 C-contiguous
        (N, K), ``transition`` (K, K), ``start`` (and ``end``) (K,), every value finite or -inf. Only
        the lengths are checked (for the hidden Markov estimators, whose emission families build the
        potentials: two passes over (N, K) saved per call)."""
        self = cls.__new__(cls)
        N, K = unary.shape
        self._init_batch(N, K, lengths)
        self.stationary = True
        self.unary = unary
        self._trans = np.ascontiguousarray(transition[None] if N else np.zeros((1, K, K)))
        self.start = start
        self.end = np.zeros(K) if end is None else end
        self._cache = {}
        return self

    # -- parameters ---------------------------------------------------------------------------------
    @property
    def transition(self):
        """Transition log-potentials, (K, K) if stationary else (N, K, K)."""
        return self._trans[0] if self.stationary else self._trans

    def _args(self):
        return self.unary, self._trans, self.start, self.end, self.offsets

    def _forward(self):
        if "forward" not in self._cache:
            self._cache["forward"] = _k.chain_forward(*self._args(), LOG, get_num_threads())
        return self._cache["forward"]

    # -- log semiring -------------------------------------------------------------------------------
    def log_partition(self):
        """Log partition function log Z of every sequence.

        Returns
        -------
        log_z : ndarray of float64, shape (B,)
            -inf for an infeasible sequence, 0.0 for an empty one. Time O(N·K²).
        """
        if "log_z" in self._cache:
            return self._cache["log_z"].copy()
        return self._forward()[2].copy()

    def forward(self):
        """Forward log-scores α, shape (N, K): log-sum of scores of prefixes ending in label k at n.

        (Kernels keep α normalised per token; this adds the running normalisers back.)
        """
        ahat, inc, _ = self._forward()
        return ahat + _segmented_cumsum(inc, self.offsets)[:, None]

    def backward(self):
        """Backward log-scores β, shape (N, K): log-sum of scores of suffixes after label k at n."""
        bhat, inc = _k.chain_backward(self.unary, self._trans, self.end, self.offsets, get_num_threads())
        return bhat + _segmented_cumsum(inc[::-1], self.offsets[-1] - self.offsets[::-1])[::-1, None]

    def marginals(self, edge="full"):
        """Posterior marginals (the gradient of log Z with respect to the potentials).

        Parameters
        ----------
        edge : {"full", "sum", "total", "none"}
            ``"full"``: edge marginals (N, K, K), row t = P(y_t = i, y_{t+1} = j), 0 at sequence ends;
            ``"sum"``: their per-sequence sums (B, K, K) (expected transition counts, memory O(B·K²));
            ``"total"``: their sum over the whole batch (K, K) (what training needs, memory O(K²));
            ``"none"``: ``edge`` is None.

        Returns
        -------
        Marginals
            ``unary`` (N, K) P(y_n = k), linear space; ``edge`` as above. Rows of infeasible sequences
            are 0.
        """
        modes = {"none": 0, "full": 1, "sum": 2, "total": 3}
        if edge not in modes:
            raise ValueError(f"`edge` must be one of {sorted(modes)}; got {edge!r}")
        log_z, um, em = _k.chain_marginals(*self._args(), modes[edge], get_num_threads())
        self._cache.setdefault("log_z", log_z)
        if edge == "total":
            em = em[0]
        return Marginals(um, None if edge == "none" else em)

    def entropy(self):
        """Entropy of p(y) per sequence, H = log Z - E[s(y)] (nats), shape (B,); -inf if infeasible.

        Time O(N·K²); computed from the marginals (Rush 2020, "Torch-Struct", §entropy).
        """
        log_z, um, em = _k.chain_marginals(*self._args(), 2 if self.stationary else 1, get_num_threads())
        B, K = self.batch_size, self.n_labels
        seq = np.repeat(np.arange(B), self.lengths)
        expected = np.zeros(B)
        np.add.at(expected, seq, _safe_dot(um, self.unary, axis=1))
        firsts = self.offsets[:-1][self.lengths > 0]
        lasts = self.offsets[1:][self.lengths > 0] - 1
        ok = np.flatnonzero(self.lengths > 0)
        expected[ok] += _safe_dot(um[firsts], self.start[None, :], axis=1)
        expected[ok] += _safe_dot(um[lasts], self.end[None, :], axis=1)
        if self.stationary:
            expected += _safe_dot(em.reshape(B, -1), self._trans.reshape(1, -1), axis=1)
        else:
            np.add.at(expected, seq, _safe_dot(em.reshape(self.n_rows, K * K),
                                               self._trans.reshape(self.n_rows, K * K), axis=1))
        return np.where(log_z == -np.inf, -np.inf, log_z - expected)

    def _sampler(self):
        """Forward filtering, backward sampling (see :meth:`LabelingStructure.sample`)."""
        alpha, _, log_z = self._forward()
        return log_z, lambda u: _k.chain_sample(alpha, log_z, self._trans, self.end, self.offsets, u,
                                                get_num_threads())

    # -- max semiring -------------------------------------------------------------------------------
    def _viterbi(self):
        if "viterbi" not in self._cache:
            self._cache["viterbi"] = _k.chain_viterbi(*self._args(), get_num_threads())
        return self._cache["viterbi"]

    def _kbest(self, k):
        return _k.chain_kbest(*self._args(), k, get_num_threads())

    # -- other --------------------------------------------------------------------------------------
    def score(self, labels):
        """Log-score s(y) of the packed labeling ``labels`` (N,), shape (B,); -inf if forbidden."""
        labels = check_labels(labels, self.n_rows, self.n_labels)
        return _k.chain_score(*self._args(), labels, get_num_threads())


def _segmented_cumsum(x, offsets):
    """Cumulative sums of x restarting at every offset (-inf stays -inf, never NaN)."""
    out = np.empty_like(x)
    for a, b in zip(offsets[:-1], offsets[1:]):
        with np.errstate(invalid="ignore"):
            out[a:b] = np.cumsum(x[a:b])
        out[a:b][np.isnan(out[a:b])] = -np.inf
    return out


def _safe_dot(mu, theta, axis):
    """Σ mu·theta skipping entries with mu == 0 (so -inf potentials with zero mass give 0, not NaN)."""
    prod = np.where(mu > 0, mu * np.where(np.isfinite(theta), theta, 0.0), 0.0)
    bad = (mu > 0) & ~np.isfinite(theta)
    if bad.any():  # positive mass on a -inf potential cannot happen for exact marginals
        prod = np.where(bad, -np.inf, prod)
    return prod.sum(axis=axis)
