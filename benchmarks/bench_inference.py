"""Forward–backward per token: structlearn vs hmmlearn (compiled) vs torch-struct, in one run.

Workload: log Z + marginals of first-order chains with K in {5, 23, 50} labels, over many short
sequences (default 5,000 of length 20–40) and over one long one (T = 100,000); and of semi-Markov
segmentations with small maximum duration D against torch-struct's SemiMarkovCRF.

Equivalent outputs on identical inputs (a random categorical HMM; ``unary`` = log-emission matrix):

* structlearn ``LinearChain(unary, log A, lengths, start=log π)``: ``marginals(edge="sum")`` and
  ``log_partition()`` (log Z, posteriors (N, K), expected transition counts per sequence (B, K, K));
* hmmlearn 0.3 compiled kernels (``hmmlearn._hmmc``), called per sequence exactly as hmmlearn's
  E-step does: ``implementation="log"`` (``forward_log``, ``backward_log``, ``log_normalize``,
  ``compute_log_xi_sum``) and ``implementation="scaling"`` (``exp`` of the log-emissions,
  ``forward_scaling``, ``backward_scaling``, ``normalize``, ``compute_scaling_xi_sum``);
* torch-struct ``LinearChain.logpartition`` (the engine behind ``LinearChainCRF``; one forward pass
  for log Z, autograd for the full edge marginals, posteriors summed from them), compared with
  structlearn ``marginals(edge="full")`` (same outputs: (N, K, K) edge marginals);
* semi-Markov: structlearn ``SemiMarkov`` ``log_partition`` + ``marginals()`` +
  ``segment_marginals()`` vs torch-struct ``SemiMarkov.logpartition`` + autograd (segment ×
  next-label marginals).

A correctness check on small cases (same log Z and marginals on every side, asserted) runs first,
then Numba is warmed up. Timings are the best of ``--repeats`` runs (wall clock and process CPU
time), all in this one process. A competitor that would exceed ``--budget`` seconds per measurement
is timed on a prefix of its workload (the first sequences, or the first tokens of the long
sequence; column "tokens timed"); ns/token is what is compared. torch-struct's log-semiring scan
materialises (…, C, C, C) tensors, so its chunks are also capped in memory (``--ts-cap``).
structlearn runs with 1 thread and with Numba's default thread count; hmmlearn is single-threaded;
torch uses its default intra-op threads.

    python benchmarks/bench_inference.py            # default, about 2-3 minutes on 2 cores
    python benchmarks/bench_inference.py --quick    # smaller workloads, under a minute
    python benchmarks/bench_inference.py --markdown # the table as a GitHub Markdown table (docs)

Needs the ``bench`` extra (hmmlearn; torch-struct + torch for the torch-struct columns, skipped with a
message when absent).
"""
import argparse
import importlib
import importlib.util
import os
import platform
import time
import warnings
from dataclasses import dataclass, replace

import numba
import numpy as np

from structlearn.engine.structures import LinearChain, SemiMarkov

NEG = -1e9  # torch-struct's additive zero; -inf would give NaN gradients in its logsumexp


# ---------------------------------------------------------------------------------------------------
# workloads
class _Packed:
    """The offsets and token count of a packed batch's ``lengths``."""

    @property
    def offsets(self):
        return np.concatenate([[0], np.cumsum(self.lengths)])

    @property
    def n_tokens(self):
        return int(self.lengths.sum())


@dataclass
class ChainWork(_Packed):
    """A packed batch of HMM sequences: probabilities for hmmlearn, logs for the others."""
    K: int
    lengths: np.ndarray     # (B,) int64
    log_b: np.ndarray       # (N, K) log-emission (log-likelihood of each observation per state)
    pi: np.ndarray          # (K,) start probabilities
    A: np.ndarray           # (K, K) transition probabilities "from, to"

    @property
    def log_pi(self):
        return np.log(self.pi)

    @property
    def log_a(self):
        return np.log(self.A)


@dataclass
class SemiWork(_Packed):
    """A packed batch for semi-Markov inference (log-potentials)."""
    K: int
    D: int
    lengths: np.ndarray
    unary: np.ndarray       # (N, K)
    duration: np.ndarray    # (D, K)
    trans: np.ndarray       # (K, K)
    start: np.ndarray       # (K,)
    end: np.ndarray         # (K,)


def make_chain(K, lengths, rng, V=None):
    """Random categorical HMM (Dirichlet(1) rows) and observations; unary = log-emission matrix."""
    lengths = np.asarray(lengths, dtype=np.int64)
    V = 2 * K if V is None else V
    pi = rng.dirichlet(np.ones(K))
    A = rng.dirichlet(np.ones(K), size=K)
    E = rng.dirichlet(np.ones(V), size=K)
    obs = rng.integers(V, size=int(lengths.sum()))
    log_b = np.ascontiguousarray(np.log(E[:, obs].T))
    return ChainWork(K, lengths, log_b, pi, A)


def make_semi(K, D, lengths, rng):
    lengths = np.asarray(lengths, dtype=np.int64)
    N = int(lengths.sum())
    return SemiWork(K, D, lengths, rng.normal(size=(N, K)), rng.normal(size=(D, K)),
                    rng.normal(size=(K, K)), rng.normal(size=K), rng.normal(size=K))


def take(w, n_tokens):
    """The first sequences of ``w`` holding at least ``n_tokens`` tokens (at least one sequence), or,
    for a single sequence, its first ``n_tokens`` tokens (at least 2)."""
    N = w.n_tokens
    if n_tokens >= N:
        return w
    if w.lengths.shape[0] == 1:
        T = int(max(2, n_tokens))
        lengths = np.array([T])
    else:
        m = int(np.searchsorted(np.cumsum(w.lengths), n_tokens)) + 1
        lengths = w.lengths[:m]
        T = int(lengths.sum())
    if isinstance(w, ChainWork):
        return replace(w, lengths=lengths, log_b=w.log_b[:T])
    return replace(w, lengths=lengths, unary=w.unary[:T])


# ---------------------------------------------------------------------------------------------------
# the contenders; each returns (log_z (B,), outputs...)
def structlearn_chain(w, edge="sum"):
    chain = LinearChain(w.log_b, w.log_a, lengths=w.lengths, start=w.log_pi)
    m = chain.marginals(edge=edge)
    return chain.log_partition(), m.unary, m.edge


def hmmlearn_log(w):
    """hmmlearn's ``implementation="log"`` E-step: per sequence, as ``BaseHMM._fit_log`` +
    ``_accumulate_sufficient_statistics_log``."""
    from hmmlearn import _hmmc
    from hmmlearn.utils import log_normalize

    off = w.offsets
    B, K = w.lengths.shape[0], w.K
    log_z = np.empty(B)
    post = np.empty((w.n_tokens, K))
    xi = np.zeros((B, K, K))
    for b in range(B):
        a, e = off[b], off[b + 1]
        lf = w.log_b[a:e]
        log_z[b], fwd = _hmmc.forward_log(w.pi, w.A, lf)
        bwd = _hmmc.backward_log(w.pi, w.A, lf)
        g = fwd + bwd
        log_normalize(g, axis=1)
        with np.errstate(under="ignore"):
            post[a:e] = np.exp(g)
            if e - a > 1:
                xi[b] = np.exp(_hmmc.compute_log_xi_sum(fwd, w.A, bwd, lf))
    return log_z, post, xi


def hmmlearn_scaling(w):
    """hmmlearn's ``implementation="scaling"`` E-step: per sequence, as ``BaseHMM._fit_scaling`` +
    ``_accumulate_sufficient_statistics_scaling`` (frame likelihoods = exp of the log-emissions)."""
    from hmmlearn import _hmmc
    from hmmlearn.utils import normalize

    off = w.offsets
    B, K = w.lengths.shape[0], w.K
    log_z = np.empty(B)
    post = np.empty((w.n_tokens, K))
    xi = np.zeros((B, K, K))
    frameprob = np.exp(w.log_b)
    for b in range(B):
        a, e = off[b], off[b + 1]
        fp = frameprob[a:e]
        log_z[b], fwd, scale = _hmmc.forward_scaling(w.pi, w.A, fp)
        bwd = _hmmc.backward_scaling(w.pi, w.A, fp, scale)
        p = fwd * bwd
        normalize(p, axis=1)
        post[a:e] = p
        if e - a > 1:
            xi[b] = _hmmc.compute_scaling_xi_sum(fwd, w.A, bwd, fp)
    return log_z, post, xi


def _next_pow2(n):
    return 1 << max(0, int(np.ceil(np.log2(max(n, 1)))))


def _chunks(lengths, cost_one, cap):
    """Sequence indices sorted by length, grouped so that len(group) · cost_one(max length) <= cap
    (torch-struct pads every chunk to a power of two, so sorting is the kind thing to do)."""
    order = np.argsort(lengths, kind="stable")
    group = []
    for i in order:
        if group and (len(group) + 1) * cost_one(lengths[i]) > cap:
            yield np.array(group)
            group = []
        group.append(i)
    if group:
        yield np.array(group)


def torch_struct_chain(w, cap=2.5e7, keep=False):
    """torch-struct LinearChain: log Z (forward scan) + edge marginals (autograd) + posteriors.

    torch-struct's potentials are ``edge[b, n, to, from]`` and fold the unary of token n + 1 (and
    start + unary of token 0 into n = 0). With ``keep`` the packed (N, K) posteriors and (N, K, K)
    "from, to" edge marginals are returned too (for the correctness check).
    """
    import torch
    from torch_struct import LinearChain as TSLinearChain

    struct = TSLinearChain()
    K = w.K
    off = w.offsets
    B = w.lengths.shape[0]
    log_z = np.empty(B)
    post = np.zeros((w.n_tokens, K)) if keep else None
    edges = np.zeros((w.n_tokens, K, K)) if keep else None
    log_at = torch.from_numpy(np.ascontiguousarray(w.log_a.T))  # (to, from)
    log_pi = torch.from_numpy(w.log_pi)
    for idx in _chunks(w.lengths, lambda T: _next_pow2(T - 1) * K ** 3, cap):
        L = w.lengths[idx]
        Tm = int(L.max())
        U = np.zeros((idx.shape[0], Tm, K))
        for r, b in enumerate(idx):
            U[r, :L[r]] = w.log_b[off[b]:off[b + 1]]
        U = torch.from_numpy(U)
        E = log_at[None, None] + U[:, 1:, :, None]
        E[:, 0] += (log_pi + U[:, 0])[:, None, :]
        E.requires_grad_(True)
        v, parts = struct.logpartition(E, lengths=torch.from_numpy(L), force_grad=True)
        (g,) = torch.autograd.grad(v.sum(), parts)
        g = g[0]                                                  # (Bc, Tm-1, to, from)
        # posteriors: P(y_n) = Σ_to edge n for n < T-1, and Σ_from edge T-2 for the last token
        un = torch.cat([g.sum(-2), torch.zeros_like(g[:, :1, 0])], dim=1)   # (Bc, Tm, K)
        rows = torch.arange(len(idx))
        un[rows, torch.from_numpy(L - 1)] = g[rows, torch.from_numpy(L - 2)].sum(-1)
        log_z[idx] = v.detach()[0].numpy()
        if keep:
            un = un.numpy()
            gt = g.transpose(-1, -2).numpy()
            for r, b in enumerate(idx):
                post[off[b]:off[b + 1]] = un[r, :L[r]]
                edges[off[b]:off[b + 1] - 1] = gt[r, :L[r] - 1]
    return log_z, post, edges


def structlearn_semi(w):
    sm = SemiMarkov(w.unary, w.duration, w.trans, lengths=w.lengths, start=w.start, end=w.end)
    log_z = sm.log_partition()
    m = sm.marginals()
    return log_z, m.unary, sm.segment_marginals()


def _ts_semi_potentials(w, idx):
    """torch-struct SemiMarkov potentials ``edge[b, n, d, next, label]`` for sequences ``idx``: the
    segment [n, n+d-1] of ``label`` followed by a segment of ``next`` at n + d. A sequence of T tokens
    has T + 1 boundary points; the last segment's "next" label is a dummy (only 0 allowed) carrying
    the end score."""
    K, D = w.K, w.D
    off = w.offsets
    L = w.lengths[idx]
    Tm = int(L.max())
    Bc = idx.shape[0]
    cs = np.zeros((Bc, Tm + 1, K))
    for r, b in enumerate(idx):
        cs[r, 1:L[r] + 1] = np.cumsum(w.unary[off[b]:off[b + 1]], axis=0)
    n = np.arange(Tm)[:, None]
    d = np.arange(1, D + 1)[None, :]
    stop = n + d                                                  # (Tm, D) first token after
    seg = cs[:, np.minimum(stop, Tm)] - cs[:, n]                  # (Bc, Tm, D, K)
    seg += w.duration[None, None]
    seg[:, 0] += w.start
    E = np.full((Bc, Tm, D + 1, K, K), NEG)
    inner = stop[None] < L[:, None, None]                         # (Bc, Tm, D)
    final = stop[None] == L[:, None, None]
    E[:, :, 1:] = np.where(inner[..., None, None],
                           seg[:, :, :, None, :] + w.trans.T[None, None, None], NEG)
    E[:, :, 1:, 0, :] = np.where(final[..., None], seg + w.end, E[:, :, 1:, 0, :])
    return E


def torch_struct_semi(w, cap=2.5e7, keep=False):
    """torch-struct SemiMarkov: log Z + autograd marginals (segment × next label); with ``keep`` also
    the dense (N, D, K) segment marginals indexed [end, d-1, label] (for the correctness check)."""
    import torch
    from torch_struct import SemiMarkov as TSSemiMarkov

    struct = TSSemiMarkov()
    K, D = w.K, w.D
    off = w.offsets
    B = w.lengths.shape[0]
    log_z = np.empty(B)
    segm = np.zeros((w.n_tokens, D, K)) if keep else None
    # torch-struct's SemiMarkov scan is not exact on a chunk of mixed lengths (it uses the batch's
    # shortest length for its duration countdown); chunks of one length keep it exact
    lengths = w.lengths
    for T in np.unique(lengths):
        same = np.flatnonzero(lengths == T)
        per = max(1, int(cap // (_next_pow2(T) * (D * K) ** 3)))
        for idx in (same[i:i + per] for i in range(0, same.shape[0], per)):
            E = torch.from_numpy(_ts_semi_potentials(w, idx))
            E.requires_grad_(True)
            v, parts = struct.logpartition(E, lengths=torch.full((idx.shape[0],), int(T) + 1),
                                           force_grad=True)
            (g,) = torch.autograd.grad(v.sum(), parts)
            log_z[idx] = v.detach()[0].numpy()
            if keep:
                gs = g[0].sum(-2).numpy()                         # (Bc, T, D+1, label)
                for r, b in enumerate(idx):
                    for dd in range(1, D + 1):
                        for s in range(0, int(T) - dd + 1):
                            segm[off[b] + s + dd - 1, dd - 1] = gs[r, s, dd]
    return log_z, segm


# ---------------------------------------------------------------------------------------------------
# correctness
def check_equivalence(use_torch=True, rng=None, rtol=1e-8):
    """Assert that every contender computes the same log Z and marginals on small cases.

    Returns the list of contenders checked. Raises AssertionError on a mismatch.
    """
    rng = np.random.default_rng(12345) if rng is None else rng
    checked = ["structlearn"]
    w = make_chain(4, [5, 1, 8, 2, 3], rng)
    lz, post, esum = structlearn_chain(w, "sum")
    _, post_f, efull = structlearn_chain(w, "full")
    np.testing.assert_allclose(post_f, post, rtol=1e-12, atol=1e-14)
    off = w.offsets
    np.testing.assert_allclose(
        np.stack([efull[off[b]:off[b + 1]].sum(0) for b in range(len(w.lengths))]), esum,
        rtol=1e-12, atol=1e-14)
    if importlib.util.find_spec("hmmlearn") is not None:
        for name, fn in [("hmmlearn-log", hmmlearn_log), ("hmmlearn-scaling", hmmlearn_scaling)]:
            hz, hp, hx = fn(w)
            np.testing.assert_allclose(hz, lz, rtol=rtol, err_msg=f"{name}: log Z")
            np.testing.assert_allclose(hp, post, rtol=rtol, atol=1e-12, err_msg=f"{name}: posteriors")
            np.testing.assert_allclose(hx, esum, rtol=rtol, atol=1e-12, err_msg=f"{name}: xi sums")
            checked.append(name)
    if use_torch and _torch_struct_status() is None:
        w2 = make_chain(3, [6, 2, 9, 4], rng)   # torch-struct needs sequences of length >= 2
        lz2, post2, ef2 = structlearn_chain(w2, "full")
        tz, tp, te = torch_struct_chain(w2, keep=True)
        np.testing.assert_allclose(tz, lz2, rtol=rtol, err_msg="torch-struct chain: log Z")
        np.testing.assert_allclose(tp, post2, rtol=rtol, atol=1e-12,
                                   err_msg="torch-struct chain: posteriors")
        np.testing.assert_allclose(te, ef2, rtol=rtol, atol=1e-12,
                                   err_msg="torch-struct chain: edge marginals")
        s = make_semi(3, 3, [5, 7, 5, 2], rng)
        sz, _, sseg = structlearn_semi(s)
        tz, tseg = torch_struct_semi(s, keep=True)
        np.testing.assert_allclose(tz, sz, rtol=rtol, err_msg="torch-struct semi-Markov: log Z")
        np.testing.assert_allclose(tseg, sseg, rtol=rtol, atol=1e-12,
                                   err_msg="torch-struct semi-Markov: segment marginals")
        checked.append("torch-struct")
    return checked


def _torch_struct_status():
    """None if torch-struct is usable, else the reason it is not."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importlib.import_module("torch")
            importlib.import_module("torch_struct")
    except Exception as exc:  # ImportError, or a torch-struct that does not load with this torch
        return f"{type(exc).__name__}: {exc}"
    return None


# ---------------------------------------------------------------------------------------------------
# timing
def best_time(fn, repeats, min_total=0.0, max_repeats=30):
    """(best wall seconds, best process CPU seconds) over at least ``repeats`` calls, more (up to
    ``max_repeats``) while their total is under ``min_total`` seconds. CPU time (all threads of this
    process) does not count time spent descheduled, so it is the steadier number on a busy machine."""
    best_wall = best_cpu = np.inf
    total = 0.0
    count = 0
    while count < repeats or (total < min_total and count < max_repeats):
        c0 = time.process_time()
        t0 = time.perf_counter()
        fn()
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
        best_wall = min(best_wall, wall)
        best_cpu = min(best_cpu, cpu)
        total += wall
        count += 1
    return best_wall, best_cpu


def timed(fn, w, budget, repeats, max_tokens=None, start_tokens=64):
    """Best-of-``repeats`` (wall, CPU) seconds of ``fn`` on ``w`` or on a prefix that fits ``budget``.

    A geometric pilot estimates seconds per token; the measured prefix is then the largest whose
    ``repeats`` runs fit the budget. Returns (wall, cpu, tokens timed).
    """
    N = w.n_tokens if max_tokens is None else min(w.n_tokens, int(max_tokens))
    n = min(N, start_tokens)
    while True:
        sub = take(w, n)
        t = best_time(lambda: fn(sub), 2)[0]   # best of 2: a busy machine inflates single runs
        if sub.n_tokens >= N or t > budget / 20:
            break
        n = min(N, n * 4)
    per_token = t / sub.n_tokens
    n_final = int(min(N, max(sub.n_tokens, budget / (repeats * per_token))))
    sub = take(w, n_final)
    return (*best_time(lambda: fn(sub), repeats), sub.n_tokens)


def _long_cap(w, cap, per_point):
    """For a single long sequence: the longest prefix (a power of two) whose torch-struct scan stays
    within ``cap`` elements (padded length · per_point); None for a batch (chunks are capped)."""
    if w.lengths.shape[0] != 1:
        return None
    p = 2
    while 2 * p * per_point <= cap:
        p *= 2
    return p


# ---------------------------------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="1,000 short sequences, T = 20,000, 1 s budget, 2 repeats")
    ap.add_argument("--ks", default="5,23,50", help="chain label counts (default 5,23,50)")
    ap.add_argument("--semi", default="5:4,10:4", help="semi-Markov K:D pairs (default 5:4,10:4)")
    ap.add_argument("--n-seqs", type=int, default=None, help="short sequences (default 5000)")
    ap.add_argument("--long", type=int, default=None, help="length of the long sequence (100000)")
    ap.add_argument("--repeats", type=int, default=None, help="best of (default 3)")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds per competitor measurement before it is cut to a prefix (default 4)")
    ap.add_argument("--ts-cap", type=float, default=2.5e7,
                    help="torch-struct chunk cap, batch · padded length · C³ elements (default 2.5e7)")
    ap.add_argument("--full-cap", type=float, default=4e7,
                    help="cap on N·K² for structlearn edge='full' (default 4e7 = 320 MB)")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch-struct columns")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--markdown", action="store_true",
                    help="the result table as a GitHub Markdown table, the notes as paragraphs")
    args = ap.parse_args(argv)
    n_seqs = args.n_seqs or (1000 if args.quick else 5000)
    long_T = args.long or (20_000 if args.quick else 100_000)
    repeats = args.repeats or (2 if args.quick else 3)
    budget = args.budget or (1.0 if args.quick else 4.0)
    ks = [int(k) for k in args.ks.split(",") if k]
    semis = [tuple(int(x) for x in p.split(":")) for p in args.semi.split(",") if p]
    rng = np.random.default_rng(args.seed)
    t_start = time.perf_counter()
    warnings.filterwarnings("ignore", category=UserWarning, module="torch_struct")

    try:
        import hmmlearn
        hmm_version = hmmlearn.__version__
    except ImportError:
        hmm_version = None
    ts_reason = "--no-torch" if args.no_torch else _torch_struct_status()
    if ts_reason is None:
        import torch
        from importlib.metadata import version

        ts_version = f"torch-struct {version('torch-struct')} / torch {torch.__version__} " \
                     f"({torch.get_num_threads()} threads)"
    else:
        ts_version = f"skipped ({ts_reason})"
    checked = check_equivalence(use_torch=ts_reason is None)
    print(f"correctness check passed (log Z, posteriors, edge/segment marginals agree): "
          f"{', '.join(checked)}")
    if args.markdown:
        print()
    print(f"python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__} "
          f"({numba.get_num_threads()} threads, layer {numba.threading_layer()}), "
          f"hmmlearn {hmm_version or 'missing: columns skipped'}, {ts_version}")
    if args.markdown:
        print()
    env = ", ".join(f"{k}={os.environ[k]}" for k in ("OMP_WAIT_POLICY", "NUMBA_THREADING_LAYER",
                                                     "NUMBA_NUM_THREADS") if k in os.environ)
    print(f"cpus {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} (shared machine: timings "
          f"are noisy){', ' + env if env else ''}; best of {repeats}; budget {budget:g} s per "
          f"competitor measurement")

    min_total = 0.3 if args.quick else 1.0   # structlearn is cheap: repeat it more
    n_threads = numba.get_num_threads()
    rows = []
    refs = {}

    def add(group, method, secs, n_timed, ref=None, ref2=None, set_ref=None):
        """One table row; ``ref``/``ref2``: the structlearn rows this competitor is compared with
        (ratio = structlearn ns/token / this ns/token)."""
        wall, cpu = secs
        row = dict(group=group, method=method, wall=wall, n=n_timed, ns=wall / n_timed * 1e9,
                   cpu_ns=cpu / n_timed * 1e9, ref=ref, ref2=ref2)
        rows.append(row)
        if set_ref:
            refs[(group, set_ref)] = row
        return row

    # warm up Numba (first calls compile or load the on-disk cache) on every code path timed
    wu = make_chain(3, [4, 5], rng)
    for edge in ("sum", "full"):
        structlearn_chain(wu, edge)
        structlearn_chain(take(wu, 4), edge)
    structlearn_semi(make_semi(3, 2, [4, 5], rng))

    chains = []
    for K in ks:
        chains.append(make_chain(K, rng.integers(20, 41, size=n_seqs), rng))
        chains.append(make_chain(K, [long_T], rng))
    semi_works = []
    for K, D in semis:
        semi_works.append(make_semi(K, D, rng.integers(20, 41, size=n_seqs), rng))
        semi_works.append(make_semi(K, D, [long_T], rng))

    def group_of(w):
        shape = f"1x{w.n_tokens}" if w.lengths.shape[0] == 1 else f"{w.lengths.shape[0]}x[20,40]"
        kind = "chain" if isinstance(w, ChainWork) else f"semi D={w.D}"
        return (kind, w.K, shape, w.n_tokens)

    thread_counts = [1] if n_threads == 1 else [1, n_threads]

    def structlearn_rows(w, g, fn, label, ref):
        """Time ``fn`` with 1 thread and with Numba's default; refs ``ref + "1"``, ``ref + "N"``."""
        for nt in thread_counts:
            numba.set_num_threads(nt)
            try:
                secs = best_time(fn, repeats, min_total)
            finally:
                numba.set_num_threads(n_threads)
            add(g, f"structlearn {label}({nt} thr)", secs,
                w.n_tokens, set_ref=ref + ("1" if nt == 1 else "N"))

    # phase 1: structlearn and hmmlearn (no torch work in between)
    for w in chains:
        g = group_of(w)
        structlearn_rows(w, g, lambda: structlearn_chain(w, "sum"), "sum ", "sum")
        wf = take(w, int(min(w.n_tokens, args.full_cap / w.K ** 2)))
        structlearn_rows(wf, g, lambda: structlearn_chain(wf, "full"), "full ", "full")
        if hmm_version:
            for name, fn in [("hmmlearn log", hmmlearn_log), ("hmmlearn scaling", hmmlearn_scaling)]:
                wall, cpu, n = timed(fn, w, budget, repeats)
                add(g, name, (wall, cpu), n, ref="sum1", ref2="sumN")
    for w in semi_works:
        structlearn_rows(w, group_of(w), lambda: structlearn_semi(w), "", "semi")
    # phase 2: torch-struct, with 1 thread and with torch's default (its OpenMP barriers stall on a
    # busy machine much as Numba's do), each with half the budget
    if ts_reason is None:
        import torch

        torch_default = torch.get_num_threads()
        ts_threads = [1] if torch_default == 1 else [1, torch_default]
        for nt in ts_threads:
            torch.set_num_threads(nt)
            sfx = "1" if nt == 1 else "N"
            for w in chains:
                wall, cpu, n = timed(lambda x: torch_struct_chain(x, cap=args.ts_cap), w,
                                     budget / len(ts_threads), repeats,
                                     max_tokens=_long_cap(w, args.ts_cap, w.K ** 3), start_tokens=32)
                add(group_of(w), f"torch-struct ({nt} thr)", (wall, cpu), n, ref="full" + sfx,
                    ref2="fullN")
            for w in semi_works:
                wall, cpu, n = timed(lambda x: torch_struct_semi(x, cap=args.ts_cap), w,
                                     budget / len(ts_threads), repeats,
                                     max_tokens=_long_cap(w, args.ts_cap, (w.D * w.K) ** 3),
                                     start_tokens=32)
                add(group_of(w), f"torch-struct ({nt} thr)", (wall, cpu), n, ref="semi" + sfx,
                    ref2="semiN")
        torch.set_num_threads(torch_default)

    (print_markdown if args.markdown else print_table)(rows, refs, n_threads)
    if args.markdown:
        print()
    if ts_reason is not None:
        print(f"torch-struct columns skipped: {ts_reason}")
    if not hmm_version:
        print("hmmlearn columns skipped: hmmlearn is not installed")
    if args.markdown:
        print()
    print(f"total wall time {time.perf_counter() - t_start:.1f} s, load average now "
          f"{os.getloadavg()[0]:.1f}")
    return rows


def _ratio_cols(r, refs):
    """The three ratio cells of a row (empty where it has no reference)."""
    cols = ["", "", ""]
    if r["ref"]:
        ref = refs[(r["group"], r["ref"])]
        cols[0] = f"{ref['ns'] / r['ns']:.3f}"
        cols[1] = f"{ref['cpu_ns'] / r['cpu_ns']:.3f}"
    if r["ref2"] and (r["group"], r["ref2"]) in refs:   # no N-thread rows when Numba has one thread
        cols[2] = f"{refs[(r['group'], r['ref2'])]['ns'] / r['ns']:.3f}"
    return cols


def _print_notes(n_threads, markdown=False):
    print("ratio = structlearn ns/token / this ns/token (< 1: structlearn faster): 'wall' and 'cpu' "
          "vs structlearn with the same thread count as this row (hmmlearn: 1), "
          f"'wall {n_threads}t' vs structlearn with Numba's default {n_threads} threads. "
          "Same outputs on both sides: hmmlearn rows vs structlearn edge='sum' (log Z, posteriors, "
          "per-sequence expected transition counts); torch-struct chain rows vs edge='full' (log Z, "
          "posteriors, (N, K, K) edge marginals); semi-Markov rows vs log Z + token, transition and "
          "segment marginals.")
    if markdown:
        print()
    print(("\\* " if markdown else "* ") + "timed on a prefix (the first sequences, or the first tokens of "
          "the long one) to fit the time budget or torch-struct's memory cap; ns/token is comparable. "
          "cpu = process CPU time (all threads; steadier than wall on a busy machine; includes spin-waiting threads).")


def print_markdown(rows, refs, n_threads):
    """The table of :func:`print_table` as one GitHub Markdown table (same rows, numbers and columns)."""
    print()
    print("| structure | K | workload | method | tokens timed | wall s | ns/tok wall | ns/tok cpu | "
          f"ratio wall | ratio cpu | ratio wall {n_threads}t |")
    print("|:--|--:|:--|:--|--:|--:|--:|--:|--:|--:|--:|")
    order = []
    for r in rows:
        if r["group"] not in order:
            order.append(r["group"])
    for r in sorted(rows, key=lambda r: order.index(r["group"])):
        kind, K, shape, N = r["group"]
        cut = "\\*" if r["n"] < N else ""
        cols = _ratio_cols(r, refs)
        print(f"| {kind} | {K} | {shape} | {r['method'].strip()} | {r['n']}{cut} | {r['wall']:.4f} | "
              f"{r['ns']:.1f} | {r['cpu_ns']:.1f} | {cols[0]} | {cols[1]} | {cols[2]} |")
    print()
    _print_notes(n_threads, markdown=True)


def print_table(rows, refs, n_threads):
    """Rows grouped by workload (structlearn first); ratios = structlearn ns/token / this ns/token."""
    order = []
    for r in rows:
        if r["group"] not in order:
            order.append(r["group"])
    head = (f"{'structure':<10} {'K':>3} {'workload':<13} {'method':<24} {'tokens timed':>13} "
            f"{'wall s':>8} {'ns/tok':>11} {'cpu ns/tok':>11} {'ratio':>7} {'ratio':>7} "
            f"{'ratio':>7}")
    sub = (f"{'':<10} {'':>3} {'':<13} {'':<24} {'':>13} {'':>8} {'wall':>11} {'cpu':>11} "
           f"{'wall':>7} {'cpu':>7} {f'wall {n_threads}t':>7}")
    print()
    print(head)
    print(sub)
    print("-" * len(head))
    for g in order:
        kind, K, shape, N = g
        for r in (r for r in rows if r["group"] == g):
            cut = "*" if r["n"] < N else " "
            cols = _ratio_cols(r, refs)
            print(f"{kind:<10} {K:>3} {shape:<13} {r['method']:<24} {r['n']:>12}{cut} "
                  f"{r['wall']:>8.4f} {r['ns']:>11.1f} {r['cpu_ns']:>11.1f} {cols[0]:>7} "
                  f"{cols[1]:>7} {cols[2]:>7}")
        print()
    _print_notes(n_threads)


if __name__ == "__main__":
    main()
