"""Second-order chains as a state expansion of :class:`~structlearn.torch.LinearChain` (an adapter:
no recursion of its own)."""
import torch

from ._base import KBest, Marginals
from ._batch import as_index, check_float_tensor, resolve_lengths
from .chain import LinearChain


class HigherOrderChain:
    r"""Distribution over label sequences of a second-order chain, for a padded batch.

    .. math:: s(y) = start[y_0] + \sum_t unary[t, y_t] + \sum_{t \ge 1} transition[y_{t-1}, y_t]
              + \sum_{t \ge 2} transition2[y_{t-2}, y_{t-1}, y_t] + end[y_{L-1}]

    Implemented as a first-order chain over states (y_{t-1}, y_t), with a begin symbol for t = 0
    (K(K+1) states; the classic order reduction, e.g. Sutton & McCallum 2012 §2.6): every operation
    of :class:`~structlearn.torch.LinearChain` carries over, on either backend.

    Parameters
    ----------
    unary : Tensor, shape (B, T, K)
    transition : Tensor, shape (K, K)
        First-order "from, to" scores (every step).
    transition2 : Tensor, shape (K, K, K)
        Second-order scores ``transition2[a, b, c]`` of labels a, b, c at t-2, t-1, t.
    lengths, mask, start, end, backend, scan
        As for :class:`~structlearn.torch.LinearChain`.

    Notes
    -----
    Time O(B·T·K⁴) (dense K(K+1)-state chain), memory O(B·T·K²). ``marginals().edge`` holds the
    pairwise marginals P(y_t = i, y_{t+1} = j) (B, T, K, K), read off the state marginals.
    """

    def __init__(self, unary, transition, transition2, *, lengths=None, mask=None, start=None, end=None,
                 backend="auto", scan="auto"):
        unary = check_float_tensor(unary, "unary", ndim=3)
        B, T, K = unary.shape
        transition = check_float_tensor(transition, "transition", shape=(K, K)).to(unary.dtype)
        transition2 = check_float_tensor(transition2, "transition2", shape=(K, K, K)).to(unary.dtype)
        start = unary.new_zeros(K) if start is None else check_float_tensor(start, "start", shape=(K,))
        end = unary.new_zeros(K) if end is None else check_float_tensor(end, "end", shape=(K,))
        self.n_labels = K
        lengths = resolve_lengths(lengths, mask, B, T, unary.device)
        neg = float("-inf")
        S = (K + 1) * K
        dev, dt = unary.device, unary.dtype
        lab = torch.arange(S, device=dev) % K
        tri = torch.cat([transition2, transition2.new_zeros(1, K, K)], dim=0)     # a = K: begin symbol
        base = transition[None] + tri                                              # (K+1, K, K) [a, b, c]
        link = torch.arange(K, device=dev)[:, None] == torch.arange(K + 1, device=dev)[None, :]  # [b, a']
        M = torch.where(link[None, :, :, None], base[:, :, None, :], torch.full((), neg, dtype=dt, device=dev))
        first = torch.arange(S, device=dev) // K == K
        st = torch.where(first, start.to(dt)[lab], torch.full((), neg, dtype=dt, device=dev))
        self.chain = LinearChain(unary[:, :, lab], M.reshape(S, S), lengths=lengths, start=st,
                                 end=end.to(dt)[lab], backend=backend, scan=scan)
        self.unary, self.lengths = unary, lengths

    def _states(self, y):
        B, T = y.shape
        y = as_index(y, "y", (B, T), self.n_labels, self.chain.mask)
        K = self.n_labels
        prev = torch.cat([torch.full_like(y[:, :1], K), y[:, :-1]], dim=1)
        return prev * K + y

    def _labels(self, s):
        return torch.where(s >= 0, s % self.n_labels, s)

    def log_partition(self):
        """log Z (B,), differentiable."""
        return self.chain.log_partition()

    def marginals(self):
        """Marginals: ``unary`` (B, T, K) and ``edge`` (B, T, K, K), row t = P(y_t = i, y_{t+1} = j)."""
        B, T, K = self.unary.shape
        su = self.chain.marginals(edge="none").unary.reshape(B, T, K + 1, K)
        pair = torch.cat([su[:, 1:, :K], su.new_zeros(B, min(T, 1), K, K)], dim=1)
        return Marginals(su.sum(2), pair)

    def entropy(self):
        """Entropy (B,) (nats) — that of the state chain, a bijective image."""
        return self.chain.entropy()

    def argmax(self):
        """Best labeling (B, T), -1 at padding."""
        return self._labels(self.chain.argmax())

    def max(self):
        """Score of the best labeling (B,) (-inf if infeasible; no gradient)."""
        return self.chain.max()

    def kbest(self, k):
        """The k best labelings: KBest(labels (k, B, T), scores (k, B))."""
        res = self.chain.kbest(k)
        return KBest(self._labels(res.labels), res.scores)

    def sample(self, n, generator=None):
        """Exact samples (n, B, T)."""
        return self._labels(self.chain.sample(n, generator))

    def score(self, y):
        """Log-score (B,) of labelings ``y`` (B, T); differentiable."""
        return self.chain.score(self._states(y))

    def log_prob(self, y):
        """log p(y) (B,), ≤ 0; differentiable."""
        return self.chain.log_prob(self._states(y))
