"""Padded batches for the torch structures: lengths / prefix masks, packing to the engine's ragged
layout, backend choice and the -inf-safe log-sum-exp every torch recursion uses.

Layout: a padded batch is ``(B, T, ...)`` plus ``lengths`` (B,) — sequence b occupies positions
``0 .. lengths[b] - 1`` — or, equivalently, a boolean *prefix* mask (B, T). The NumPy engine
(:mod:`structlearn.engine.structures`) takes the same data packed: rows of all sequences concatenated,
``(N, ...)`` with ``N = lengths.sum()``.
"""
import contextlib

import numba
import numpy as np
import torch

BACKENDS = ("auto", "numba", "torch")


def check_backend(backend, device):
    """Resolve ``backend``: ``"auto"`` is the Numba engine on CPU and the torch recursions elsewhere."""
    if backend not in BACKENDS:
        raise ValueError(f"`backend` must be one of {list(BACKENDS)}; got {backend!r}")
    if backend == "auto":
        return "numba" if device.type == "cpu" else "torch"
    return backend


_ENGINE_THREADS = [1]


def set_num_threads(n):
    """Numba threads of the engine calls made by :mod:`structlearn.torch` (default 1).

    A torch model already runs torch's own OpenMP thread pool on the cores; the engine's Numba pool
    on top oversubscribes them (measured on 2 cores: 2 + 2 threads made the CRF layer 3-10x slower
    than 1 + 1). Raise it when the CRF dominates and torch's threads are idle; ``None`` uses Numba's
    setting (``NUMBA_NUM_THREADS``). Independently of this count, Numba's started OpenMP pool can stall
    torch's own threads (busy waiting): see the note on threads in :mod:`structlearn.torch`.
    """
    top = numba.config.NUMBA_NUM_THREADS
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= top):
        raise ValueError(f"`n` must be None or an int in [1, {numba.config.NUMBA_NUM_THREADS}]; got {n!r}")
    _ENGINE_THREADS[0] = n


@contextlib.contextmanager
def engine_threads():
    """Run the enclosed engine calls with :func:`set_num_threads`'s thread count."""
    n = _ENGINE_THREADS[0]
    if n is None:
        yield
        return
    old = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(old)


def _compiling():
    return torch.compiler.is_compiling()


def check_float_tensor(x, name, ndim=None, shape=None):
    """``x`` as a floating tensor (float32 / float64); NaN and +inf are refused."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"`{name}` must be a torch.Tensor; got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(f"`{name}` must be a floating tensor (float32 or float64); got dtype {x.dtype}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if x.dim() not in allowed:
            raise ValueError(f"`{name}` must have {' or '.join(map(str, allowed))} dimensions; got shape "
                             f"{tuple(x.shape)}")
    if shape is not None and tuple(x.shape) != tuple(shape):
        raise ValueError(f"`{name}` must have shape {tuple(shape)}; got {tuple(x.shape)}")
    if _compiling():          # data-dependent checks would break the torch.compile graph
        return x
    with torch.no_grad():
        if bool(torch.isnan(x).any()) or bool((x == float("inf")).any()):
            raise ValueError(f"`{name}` holds NaN or +inf; log-potentials must be finite or -inf")
    return x


def resolve_lengths(lengths, mask, B, T, device):
    """Validated lengths (B,) int64 on ``device`` from ``lengths`` or a boolean prefix ``mask``.

    Exactly one of them may be given; with neither every sequence has length T. A mask must be a
    prefix mask (True for the first lengths[b] positions of row b, then False): a mask with a hole
    raises ``ValueError`` naming the row and position.
    """
    if lengths is not None and mask is not None:
        raise ValueError("give `lengths` or `mask`, not both")
    if mask is not None:
        if not isinstance(mask, torch.Tensor):
            mask = torch.as_tensor(np.asarray(mask))
        if tuple(mask.shape) != (B, T):
            raise ValueError(f"`mask` must have shape (B, T) = ({B}, {T}); got {tuple(mask.shape)}")
        if mask.dtype != torch.bool:
            if mask.is_floating_point() or mask.is_complex():
                raise ValueError(f"`mask` must be boolean (or 0/1 integers); got dtype {mask.dtype}")
            if bool(((mask != 0) & (mask != 1)).any()):
                raise ValueError("`mask` must hold only 0 and 1 (or be boolean)")
            mask = mask != 0
        mask = mask.to(device)
        out = mask.sum(1)
        if _compiling():
            return out.to(torch.int64)
        prefix = torch.arange(T, device=device)[None, :] < out[:, None]
        bad = (prefix != mask)
        if bool(bad.any()):
            b, t = (int(v) for v in bad.nonzero()[0])
            raise ValueError(
                f"`mask` must be a prefix mask (True for the first lengths[b] positions of each row, then "
                f"False); row {b} has a hole: position {t} is {bool(mask[b, t])} but {int(out[b])} of its "
                f"{T} positions are True. Reorder (left-align) the sequence or pass `lengths`")
        return out.to(torch.int64)
    if lengths is None:
        return torch.full((B,), T, dtype=torch.int64, device=device)
    lengths = torch.as_tensor(lengths, device=device)
    if lengths.shape != (B,):
        raise ValueError(f"`lengths` must have shape (B,) = ({B},); got {tuple(lengths.shape)}")
    if lengths.is_floating_point():
        if not bool((lengths == lengths.round()).all()):
            raise ValueError(f"`lengths` must hold whole numbers; got {lengths[:5].tolist()}")
    lengths = lengths.to(torch.int64)
    if _compiling():
        return lengths
    if B and (int(lengths.min()) < 0 or int(lengths.max()) > T):
        raise ValueError(f"`lengths` must lie in [0, T] = [0, {T}]; got min {int(lengths.min())}, max "
                         f"{int(lengths.max())}")
    return lengths


def length_mask(lengths, T):
    """Boolean (B, T) prefix mask of ``lengths``."""
    return torch.arange(T, device=lengths.device)[None, :] < lengths[:, None]


class Packing:
    """Map between a padded (B, T, ...) batch and the engine's packed (N, ...) rows."""

    def __init__(self, lengths, T):
        self.lengths_t = lengths
        self.B, self.T = int(lengths.shape[0]), int(T)
        self.mask = length_mask(lengths, T)
        self.lengths = lengths.detach().cpu().numpy().astype(np.int64)
        self.offsets = np.zeros(self.B + 1, dtype=np.int64)
        np.cumsum(self.lengths, out=self.offsets[1:])
        flat = self.mask.reshape(-1).cpu().numpy()
        self.flat_index = np.flatnonzero(flat)                 # (N,) rows of the (B*T) flattening
        self.n_rows = int(self.flat_index.shape[0])
        nonempty = self.lengths > 0
        self.nonempty = np.flatnonzero(nonempty)
        self.first_rows = self.offsets[:-1][nonempty]           # packed rows of every first token
        self.last_rows = self.offsets[1:][nonempty] - 1

    def pack(self, x):
        """(B, T, ...) tensor -> (N, ...) float64 C-contiguous ndarray (a copy)."""
        flat = x.detach().reshape((self.B * self.T,) + tuple(x.shape[2:]))
        flat = flat.to(device="cpu", dtype=torch.float64)
        return np.ascontiguousarray(flat.numpy()[self.flat_index])

    def pack_labels(self, y):
        flat = y.detach().reshape(-1).to(device="cpu", dtype=torch.int64).numpy()
        return np.ascontiguousarray(flat[self.flat_index])

    def unpack(self, rows, like, fill=0.0, dtype=None):
        """(N, ...) ndarray -> (B, T, ...) tensor on ``like``'s device (``fill`` at padding)."""
        rows = np.asarray(rows)
        out = np.full((self.B * self.T,) + rows.shape[1:], fill, dtype=rows.dtype)
        out[self.flat_index] = rows
        return to_like(out.reshape((self.B, self.T) + rows.shape[1:]), like,
                       dtype=like.dtype if dtype is None else dtype)


def to_like(arr, like, dtype=None):
    """ndarray -> tensor on ``like``'s device and dtype. Values below the smallest normal number of a
    float32/float16 target are flushed to 0: marginals (gradients) of 1e-40 would otherwise arrive as
    subnormals, which slow the backward pass of the encoder beneath by 10-30x on CPUs (measured: a
    BiLSTM's backward, 50 ms -> 1 s)."""
    dtype = like.dtype if dtype is None else dtype
    arr = np.ascontiguousarray(arr)
    if dtype.is_floating_point and dtype != torch.float64 and arr.dtype.kind == "f":
        tiny = torch.finfo(dtype).tiny
        arr = np.where(np.abs(arr) < tiny, 0.0, arr)
    return torch.from_numpy(arr).to(device=like.device, dtype=dtype)


def logsumexp(x, dim):
    """log Σ exp(x) along ``dim`` that stays finite-gradient where every entry is -inf.

    ``torch.logsumexp`` returns -inf there but its gradient is NaN (exp(-inf - (-inf))); here the
    value is -inf and the gradient 0, to any order of differentiation.
    """
    m = x.detach().amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    s = torch.exp(x - m).sum(dim=dim, keepdim=True)
    pos = s > 0
    out = torch.log(torch.where(pos, s, torch.ones_like(s))) + m
    out = torch.where(pos, out, torch.full_like(out, float("-inf")))
    return out.squeeze(dim)


def safe_dot(mu, theta, dims):
    """Σ mu·theta over ``dims``, where mu = 0 contributes 0 even if theta = -inf (no NaN, no NaN
    gradient)."""
    finite = torch.isfinite(theta)
    prod = mu * torch.where(finite, theta, torch.zeros_like(theta))
    return prod.sum(dim=dims)


def clamp_nonpositive(x):
    """min(x, 0) with the gradient of x (log-probabilities may round to +1e-16)."""
    return x - torch.relu(x).detach()


def as_index(y, name, shape, K, valid):
    """Integer label tensor of ``shape`` with values in [0, K) at ``valid`` positions; padding -> 0."""
    if not isinstance(y, torch.Tensor):
        y = torch.as_tensor(np.asarray(y))
    if tuple(y.shape) != tuple(shape):
        raise ValueError(f"`{name}` must have shape {tuple(shape)}; got {tuple(y.shape)}")
    if y.is_floating_point() or y.dtype == torch.bool:
        raise ValueError(f"`{name}` must hold integer labels; got dtype {y.dtype}")
    y = y.to(device=valid.device, dtype=torch.int64)
    bad = valid & ((y < 0) | (y >= K))
    if bool(bad.any()):
        idx = tuple(int(v) for v in bad.nonzero()[0])
        raise ValueError(f"`{name}` must hold labels in [0, {K}) at unpadded positions; got {int(y[idx])} "
                         f"at {idx}")
    return torch.where(valid, y, torch.zeros_like(y))


def check_positive_int(k, name):
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"`{name}` must be a positive integer; got {k!r}")
    return int(k)


def numpy_seed(generator):
    """An int seed for the engine's samplers from a ``torch.Generator``, an int or None."""
    if generator is None:
        return int(torch.randint(0, 2 ** 31 - 1, (1,)).item())
    if isinstance(generator, torch.Generator):
        return int(torch.randint(0, 2 ** 31 - 1, (1,), generator=generator).item())
    if isinstance(generator, (int, np.integer)) and not isinstance(generator, bool):
        return int(generator)
    raise ValueError(f"`generator` must be None, an int seed or a torch.Generator; got "
                     f"{type(generator).__name__}")


#: The ``reduction`` arguments of the CRF layers' log-likelihoods.
REDUCTIONS = ("none", "sum", "mean", "token_mean")


def reduce_log_likelihood(llh: torch.Tensor, lengths: torch.Tensor, reduction: str) -> torch.Tensor:
    """Per-sequence log-likelihoods ``llh`` (B,) reduced as one of :data:`REDUCTIONS` says: ``"none"``
    as they are, ``"sum"`` / ``"mean"`` over sequences, ``"token_mean"`` the sum over the number of
    tokens ``lengths.sum()``. Scriptable (the CRF layer's TorchScript path calls it)."""
    if reduction == "none":
        return llh
    if reduction == "sum":
        return llh.sum()
    if reduction == "mean":
        return llh.mean()
    return llh.sum() / lengths.sum().to(llh.dtype)
