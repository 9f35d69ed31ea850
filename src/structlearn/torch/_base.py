"""Pieces shared by the torch structures (chain, semi-Markov, tree): result types, validation,
log_prob, k-best, sampling and constraints."""
from collections import namedtuple

import numpy as np
import torch

from ._batch import (Packing, as_index, check_float_tensor, check_positive_int, clamp_nonpositive, engine_threads,
                     length_mask, numpy_seed)

#: Posterior marginals of a torch structure, linear space. ``unary``: (B, T, K) P(y_t = k) (0 at
#: padding); ``edge``: (B, T, K, K) pairwise marginals (chain: position t with t+1; tree: node t with
#: its parent), or their per-sequence sums (B, K, K), or None.
Marginals = namedtuple("Marginals", ["unary", "edge"])

#: The k best labelings, best first. ``labels``: (k, B, T) int64 — ``labels[r, b]`` is the r-th best
#: labeling of sequence b (-1 at padding and where a sequence has fewer than r + 1 feasible
#: labelings); ``scores``: (k, B) log-scores (-inf padding), dtype of the potentials.
KBest = namedtuple("KBest", ["labels", "scores"])


class StructureMixin:
    """Shared behaviour; subclasses define ``_potentials()``, ``_engine()`` (the NumPy structure),
    ``log_partition()`` and ``score(y)``."""

    @staticmethod
    def _vector(x, name, K, like):
        if x is None:
            return like.new_zeros(K)
        x = check_float_tensor(x, name, shape=(K,))
        return x.to(dtype=like.dtype)

    @staticmethod
    def _np(x):
        return np.ascontiguousarray(x.detach().to(device="cpu", dtype=torch.float64).numpy())

    def _unary_score(self, y):
        """Labelings ``y`` (B, T) checked as int64 labels (padding 0), the mask (B, T) and the unary part
        of their log-scores, shape (B,) (zeros when T = 0)."""
        B, T, K = self.unary.shape
        on = self.mask
        y = as_index(y, "y", (B, T), K, on)
        if T == 0:
            return y, on, self.unary.new_zeros(B)
        return y, on, (self.unary.gather(2, y[:, :, None])[:, :, 0] * on.to(self.unary.dtype)).sum(1)

    @property
    def batch_size(self):
        """Number of sequences B."""
        return int(self.unary.shape[0])

    @property
    def mask(self):
        """Boolean prefix mask (B, T) of the lengths."""
        return length_mask(self.lengths, self.unary.shape[1])

    @property
    def _pk(self):
        if self._pk_cache is None:
            self._pk_cache = Packing(self.lengths, self.unary.shape[1])
        return self._pk_cache

    def _replace(self, **changes):
        """A copy with some potentials replaced (the engine twin is rebuilt on demand)."""
        out = type(self).__new__(type(self))
        out.__dict__.update(self.__dict__)
        out.__dict__.update(changes)
        out._eng = None
        return out

    def _engine_marginals(self, edge):
        """The engine's explicit marginals, unpacked: Marginals((B, T, K), edge as requested)."""
        m = self._call("marginals", edge=edge)
        pk = self._pk
        em = None
        if edge == "full":
            em = pk.unpack(m.edge, self.unary)
        elif edge == "sum":
            em = torch.from_numpy(m.edge).to(self.unary)
        return Marginals(pk.unpack(m.unary, self.unary), em)

    def _call(self, method, *args, **kwargs):
        """``self._engine().method(*args, **kwargs)`` with the engine's thread setting."""
        eng = self._engine()
        with engine_threads():
            return getattr(eng, method)(*args, **kwargs)

    def _needs_graph(self):
        return torch.is_grad_enabled() and any(p is not None and p.requires_grad for p in self._potentials())

    def _raise_if_infeasible(self, best, what):
        bad = (best == float("-inf")).nonzero()
        if bad.numel():
            b = int(bad[0, 0])
            raise ValueError(f"cannot compute {what}: sequence {b} (length {int(self.lengths[b])}) has no "
                             f"labeling with non-zero potential (log_partition is -inf); {bad.shape[0]} "
                             f"infeasible sequence(s) in the batch")

    def _ends_marginals(self, um):
        """Marginals of the first and the last position of every sequence, (B, K) each (0 if empty)."""
        B, T, K = um.shape
        if T == 0:
            z = um.new_zeros(B, K)
            return z, z
        last = (self.lengths - 1).clamp(min=0)
        nonempty = (self.lengths > 0)[:, None]
        first = torch.where(nonempty, um[:, 0], torch.zeros_like(um[:, 0]))
        lastm = um.gather(1, last[:, None, None].expand(B, 1, K))[:, 0]
        return first, torch.where(nonempty, lastm, torch.zeros_like(lastm))

    def log_prob(self, y):
        """log p(y) = s(y) - log Z per sequence, shape (B,), always ≤ 0; differentiable.

        Time O(B·T·K²) (the log partition function).
        """
        return clamp_nonpositive(self.score(y) - self.log_partition())

    def _unpack_rows(self, rows, fill=-1):
        """(n, N) engine labels -> (n, B, T) int64 tensor on the potentials' device."""
        out = self._pk.unpack(np.ascontiguousarray(rows.T), self.unary, fill=fill, dtype=torch.int64)
        return out.permute(2, 0, 1).contiguous()

    def kbest(self, k):
        """The k best labelings, best first (exact k-best max-product on the engine).

        Returns
        -------
        KBest
            ``labels`` (k, B, T) int64 (-1 at padding or where a sequence has fewer feasible
            labelings), ``scores`` (k, B) (-inf padding). Not differentiable: rescore with
            :meth:`score` for gradients.

        Raises
        ------
        ValueError
            If ``k`` is not a positive integer or a sequence is infeasible.
        """
        k = check_positive_int(k, "k")
        res = self._call("kbest", k)
        scores = torch.from_numpy(np.ascontiguousarray(res.scores.T)).to(self.unary)
        return KBest(self._unpack_rows(res.labels), scores)

    def sample(self, n, generator=None):
        """``n`` exact samples from p(y) (forward filtering, backward sampling on the engine).

        Parameters
        ----------
        n : int
        generator : None, int or torch.Generator
            Source of the seed handed to the engine's sampler (reproducible with a seeded generator).

        Returns
        -------
        Tensor of int64, shape (n, B, T)
            -1 at padding.

        Raises
        ------
        ValueError
            If a sequence is infeasible.
        """
        n = check_positive_int(n, "n")
        return self._unpack_rows(self._call("sample", n, random_state=numpy_seed(generator)))

    def constrain(self, allowed):
        """A new structure restricted to labelings allowed by the boolean mask ``allowed`` (B, T, K).

        Forced decoding allows one label per position, partial labels several; the partial-label loss
        is ``log_partition() - constrain(allowed).log_partition()``. Differentiable in the potentials.
        """
        shape = tuple(self.unary.shape)
        if not isinstance(allowed, torch.Tensor):
            allowed = torch.as_tensor(np.asarray(allowed))
        if tuple(allowed.shape) != shape or allowed.dtype != torch.bool:
            raise ValueError(f"`allowed` must be a boolean tensor of shape (B, T, K) = {shape}; got "
                             f"{allowed.dtype} {tuple(allowed.shape)}")
        allowed = allowed.to(self.unary.device) | ~self.mask[:, :, None]
        unary = torch.where(allowed, self.unary, torch.full_like(self.unary, float("-inf")))
        return self._replace(unary=unary)
