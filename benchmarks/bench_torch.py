"""Linear-chain CRF layers in PyTorch: structlearn.torch.CRF vs pytorch-crf vs torch-struct, in one run.

Workloads: B = 32 sequences of T ∈ {50, 500} tokens (``--lengths``), K ∈ {10, 50} tags, float32
(``--dtype``), every sequence full length; random emissions (requires_grad) and random gold tags. Two
measurements per contender:

* ``nll f+b``: the negative log-likelihood of the gold tags summed over the batch, forward and backward
  (gradients for the emissions and the transition parameters) — one training step of the CRF layer;
* ``viterbi``: best tag sequence of every sequence, as a (B, T) tensor (or list of lists).

Contenders (each in its own subprocess, so that peak memory is its own):

* ``structlearn``: ``structlearn.torch.CRF`` with the default backend (CPU: the Numba engine, float64
  inside; its explicit forward–backward is the gradient);
* ``sl-script``: ``torch.jit.script(structlearn.torch.CRF(...))``, the layer's pure-torch path
  (``forward`` under autograd; ``viterbi`` for the tensor of best tags) — what a TorchScript deployment
  runs; 3 calls on the measured batch first (``WARMUP_CALLS``: the profiling executor optimises after a
  few calls with the same shapes);
* ``sl-torch-seq`` / ``sl-torch-scan``: the same layer on ``backend="torch"`` (pure torch recursions:
  the sequential loop, and the O(log T)-depth parallel scan that is the default on CUDA) — the
  measurement behind "the sequential loop on CPU when faster";
* ``pytorch-crf``: ``torchcrf.CRF`` (0.7.2; Python loop over T, autograd);
* ``torch-struct``: ``torch_struct.LinearChainCRF`` on potentials ``phi[b, n, to, from] =
  transitions[from, to] + emissions[b, n+1, to]`` (+ ``emissions[b, 0, from]`` at n = 0), NLL =
  log Z - score(gold); Viterbi = ``argmax`` (max semiring + autograd), read back to labels with
  tensor ops (torch-struct's own ``from_parts`` loops in Python and would dominate).

Times are the median of ``--repeat`` runs after a warm-up on a small batch (one run when it takes over
10 s; a contender still running after ``--timeout`` seconds is reported as timed out); "peak MB" is the
growth of the process's peak resident memory (CPU; ``ru_maxrss``; below ~1 MB it is noise) or
``torch.cuda.max_memory_allocated`` (GPU) over the measured calls. ``--threads`` sets torch's intra-op
threads and the Numba engine's threads alike
(default 1: on a shared 2-core machine one thread per runtime is both the fastest and the steadiest
setting; two OpenMP runtimes with 2 threads each oversubscribe the cores). Ratios are the contender's
time over structlearn's (> 1: structlearn is faster).

    python benchmarks/bench_torch.py [--threads 1] [--repeat 3] [--device cpu|cuda] [--only T=50]
                                     [--dtype float32|float64] [--lengths 100,500]
                                     [--contenders structlearn,sl-script,pytorch-crf,torch-struct]

Needs the ``bench`` extra (pytorch-crf, torch-struct).

Measured (CPU, 2 shared cores under load from other jobs — rows move by ±30% between runs —, threads 1,
repeat 3, torch 2.13.0, pytorch-crf 0.7.2, torch-struct 0.5; 2026-12-01; ratio = contender / structlearn):

    workload          contender      nll f+b ms  viterbi ms  peak MB  f+b ratio  vit ratio
    B=32 T=50 K=10    structlearn           3.0         0.8      0.8        1.0        1.0
    B=32 T=50 K=10    sl-torch-seq         45.9        12.0      0.9       15.3       15.5
    B=32 T=50 K=10    sl-torch-scan       195.2        32.4     14.5       64.9       41.9
    B=32 T=50 K=10    pytorch-crf          27.6        15.2      0.2        9.2       19.6
    B=32 T=50 K=10    torch-struct        120.1        38.6     32.3       39.9       49.9
    B=32 T=50 K=50    structlearn          18.2        15.7      4.2        1.0        1.0
    B=32 T=50 K=50    sl-torch-seq         72.4        25.7     45.9        4.0        1.6
    B=32 T=50 K=50    sl-torch-scan      9293.1        31.3    368.3      511.3        2.0
    B=32 T=50 K=50    pytorch-crf          81.6        32.2     32.8        4.5        2.0
    B=32 T=50 K=50    torch-struct      11657.0      3451.4   2079.1      641.3      219.3
    B=32 T=500 K=10   structlearn          24.5         8.1      8.2        1.0        1.0
    B=32 T=500 K=10   sl-torch-seq        394.2       100.2     21.6       16.1       12.4
    B=32 T=500 K=10   sl-torch-scan       567.3        60.7    151.8       23.1        7.5
    B=32 T=500 K=10   pytorch-crf        1429.3       562.0     20.1       58.3       69.3
    B=32 T=500 K=10   torch-struct       1325.5       526.1    250.1       54.1       64.9
    B=32 T=500 K=50   structlearn         171.5       167.7     31.3        1.0        1.0
    B=32 T=500 K=50   sl-torch-seq       1353.6       225.4    472.2        7.9        1.3
    B=32 T=500 K=50   sl-torch-scan     81391.5       330.4    827.7      474.7        2.0
    B=32 T=500 K=50   pytorch-crf        3070.6       726.4    314.9       17.9        4.3
    B=32 T=500 K=50   torch-struct     149163.4     65637.8  16355.6      870.0      391.4

The NLL step is 4.5-58x pytorch-crf's speed and 40-870x torch-struct's (whose log-semiring scan does
O(T·K³) work on CPU), with less peak memory on every row but the smallest (noise). Viterbi is 2.0x
pytorch-crf at (T=50, K=50): the engine's dense max-step (``kernels/chain_steps._max_step``) reads the
transition matrix by columns; a row-wise loop measured 3.5-4x faster with identical output. On CPU the
torch recursions lose to the engine (explicit forward–backward beats autograd of the sequential loop
4-16x in time and 2-15x in memory), and the parallel scan loses to the sequential loop (its O(T·K³)
work pays only on a GPU). GPU: not measured (no GPU was lent to this task).

The scripted layer (``--contenders structlearn,sl-script,pytorch-crf --lengths 100,500``,
``--dtype float32`` / ``float64``; same machine and load, torch 2.13.0+cpu, 2026-12-07; the T=500 K=50
float32 row rerun with --repeat 5 under lighter load; peak MB of sl-script before the warm-up fix, 0):

    workload          dtype    contender    nll f+b ms  viterbi ms  f+b ratio  vit ratio
    B=32 T=100 K=10   float32  structlearn         6.1         1.6        1.0        1.0
    B=32 T=100 K=10   float32  sl-script          15.1         5.9        2.5        3.6
    B=32 T=100 K=10   float32  pytorch-crf        68.5        17.7       11.2       10.9
    B=32 T=100 K=50   float32  structlearn        17.4        12.3        1.0        1.0
    B=32 T=100 K=50   float32  sl-script          91.0        39.8        5.2        3.2
    B=32 T=100 K=50   float32  pytorch-crf       299.5        92.3       17.2        7.5
    B=32 T=500 K=10   float32  structlearn        34.1         7.1        1.0        1.0
    B=32 T=500 K=10   float32  sl-script         120.8        32.6        3.5        4.6
    B=32 T=500 K=10   float32  pytorch-crf       311.2       141.0        9.1       20.0
    B=32 T=500 K=50   float32  structlearn        68.8        56.6        1.0        1.0
    B=32 T=500 K=50   float32  sl-script         496.8       175.6        7.2        3.1
    B=32 T=500 K=50   float32  pytorch-crf       814.7       265.4       11.8        4.7
    B=32 T=100 K=10   float64  structlearn         5.8         1.6        1.0        1.0
    B=32 T=100 K=10   float64  sl-script          16.4         9.6        2.9        5.8
    B=32 T=100 K=10   float64  pytorch-crf        52.8        26.7        9.2       16.3
    B=32 T=100 K=50   float64  structlearn        20.0        13.2        1.0        1.0
    B=32 T=100 K=50   float64  sl-script         136.9        28.4        6.9        2.2
    B=32 T=100 K=50   float64  pytorch-crf       146.7        34.0        7.3        2.6
    B=32 T=500 K=10   float64  structlearn        13.3         3.7        1.0        1.0
    B=32 T=500 K=10   float64  sl-script         130.7        41.6        9.8       11.2
    B=32 T=500 K=10   float64  pytorch-crf       345.8       121.5       26.0       32.7
    B=32 T=500 K=50   float64  structlearn        85.7        52.1        1.0        1.0
    B=32 T=500 K=50   float64  sl-script        1059.7       137.2       12.4        2.6
    B=32 T=500 K=50   float64  pytorch-crf      1978.5       288.2       23.1        5.5

After the Viterbi loop went to four kernels per step (commit a9a38c2), structlearn and sl-script again
(another run, same grid and load, peak MB now counting the warm-up calls). f+b ms of sl-script / ratio:
float32 22.3 / 6.1, 82.1 / 6.0, 95.8 / 7.0, 600.7 / 7.1; float64 22.3 / 4.5, 133.6 / 8.0, 198.0 / 16.9,
1161.9 / 11.0 (rows T=100 K=10, T=100 K=50, T=500 K=10, T=500 K=50). Viterbi ms / ratio: float32
4.7 / 4.7, 28.1 / 3.2, 21.3 / 7.9, 113.0 / 2.1; float64 8.1 / 5.8, 17.2 / 1.7, 26.1 / 8.4, 95.9 / 1.6.
Peak MB of sl-script's f+b: 27-323 (float32) and 31-551 (float64). Autograd keeps each step's (B, K, K)
temporaries, as pytorch-crf does (its 3-653 MB above). The engine needs 1-44 MB.
The eager times move by up to 2.5x between the two runs (34.1 vs 13.6 ms at T=500 K=10 float32): three
other jobs shared the 2 cores.

In the first run the scripted path is 1.1-4.5x faster than pytorch-crf (f+b) and 1.2-4.3x (Viterbi) on every
row. It is not within 2x of the eager path anywhere: 2.5-12x slower for f+b and 2.2-11x for Viterbi. The eager
path is the Numba engine: one fused float64 loop per recursion, with the explicit forward–backward as the
gradient. The scripted path is the same recursion as unfused torch kernels in a time loop. Each step runs a
broadcast add over (B, K, K), a log-sum-exp over K, an add and a masked select (max and argmax for Viterbi),
and autograd replays their backward. TorchScript fuses nothing on CPU, so at K = 10 the per-kernel dispatch
dominates, and at K = 50 the memory traffic of the (B, K, K) temporaries does. The eager ``backend="torch"``
layer runs the same kernels at the same speed (measured at T=500 K=50: 0.46-0.58 s f+b, scripted 0.51-0.79 s).
Tried and not kept (f+b, scripted, T = 100/500, K = 10/50). An explicit forward–backward with no autograd of
the loop was 1.7-3.3x slower at K = 50 (its (B, T, K, K) edge marginals) and 1.4x faster only at T=500 K=10. A
forward in linear space, one (B, K) @ (K, K) matmul per step, was 2.3-3.2x faster at T=100 K=50, 1.2-1.4x at
T=500 K=50 and 1.4-1.7x slower at K = 10. It is also not exact: a column whose terms all fall below exp(-87)
(float32) underflows to -inf.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time
import warnings

CONTENDERS = ["structlearn", "sl-script", "sl-torch-seq", "sl-torch-scan", "pytorch-crf", "torch-struct"]
WORKLOADS = [(32, 50, 10), (32, 50, 50), (32, 500, 10), (32, 500, 50)]      # --lengths picks other T
#: Calls on the measured batch before timing, per contender: TorchScript's profiling executor
#: optimises a graph after a few calls with the same input shapes (the first 2-3 run 5-10x slower).
WARMUP_CALLS = {"sl-script": 3}


def _data(B, T, K, device, seed=0, dtype="float32"):
    import torch
    g = torch.Generator().manual_seed(seed)
    em = torch.randn(B, T, K, generator=g).to(device=device, dtype=getattr(torch, dtype)).requires_grad_()
    tags = torch.randint(0, K, (B, T), generator=g).to(device)
    return em, tags


def make(name, K, device, dtype="float32"):
    """(nll(em, tags) -> scalar tensor, viterbi(em) -> labels, parameters) for one contender."""
    import torch
    dt = getattr(torch, dtype)
    if name == "sl-script":
        from structlearn.torch import CRF
        warnings.filterwarnings("ignore", message=".*torch.jit.script. is deprecated")
        crf = torch.jit.script(CRF(K, batch_first=True).to(device=device, dtype=dt))

        def nll(em, tags):
            return -crf(em, tags, None, "sum")

        def viterbi(em):
            return crf.viterbi(em)[1]
        return nll, viterbi, list(crf.parameters())
    if name in ("structlearn", "sl-torch-seq", "sl-torch-scan"):
        from structlearn.torch import CRF
        backend = "auto" if name == "structlearn" else "torch"
        crf = CRF(K, batch_first=True, backend=backend).to(device=device, dtype=dt)
        scan = {"sl-torch-seq": "sequential", "sl-torch-scan": "parallel"}.get(name)

        def structure(em):
            c = crf.structure(em)
            if scan is not None:
                c.scan = scan
            return c

        def nll(em, tags):
            return -structure(em).log_prob(tags).sum()

        def viterbi(em):
            with torch.no_grad():
                return structure(em).argmax()
        return nll, viterbi, list(crf.parameters())
    if name == "pytorch-crf":
        import torchcrf
        warnings.filterwarnings("ignore", message="where received a uint8")
        crf = torchcrf.CRF(K, batch_first=True).to(device=device, dtype=dt)

        def nll(em, tags):
            return -crf(em, tags, reduction="sum")

        def viterbi(em):
            with torch.no_grad():
                return crf.decode(em)
        return nll, viterbi, list(crf.parameters())
    if name == "torch-struct":
        from torch_struct import LinearChainCRF
        trans = torch.nn.Parameter(torch.empty(K, K, device=device, dtype=dt).uniform_(-0.1, 0.1))

        def potentials(em):
            phi = trans.t()[None, None] + em[:, 1:, :, None]            # (B, T-1, to, from)
            return torch.cat([phi[:, :1] + em[:, :1, None, :], phi[:, 1:]], dim=1)

        def nll(em, tags):
            B, T = tags.shape
            lengths = torch.full((B,), T, dtype=torch.long, device=device)
            dist = LinearChainCRF(potentials(em), lengths=lengths)
            score = em.gather(2, tags[:, :, None]).sum() + trans[tags[:, :-1], tags[:, 1:]].sum()
            return dist.partition.sum() - score

        def viterbi(em):
            B, T = em.shape[:2]
            lengths = torch.full((B,), T, dtype=torch.long, device=device)
            parts = LinearChainCRF(potentials(em.detach()), lengths=lengths).argmax
            y = torch.empty(B, T, dtype=torch.long, device=device)
            y[:, 1:] = parts.sum(-1).argmax(-1)
            y[:, 0] = parts[:, 0].sum(-2).argmax(-1)
            return y
        return nll, viterbi, [trans]
    raise ValueError(f"unknown contender {name!r}; choose from {CONTENDERS}")


def _sync(device):
    import torch
    if device == "cuda":
        torch.cuda.synchronize()


def worker(name, B, T, K, device, threads, repeat, budget=10.0, dtype="float32"):
    """Time one contender on one workload in this process; returns a dict."""
    import numba
    import torch

    import structlearn.torch as slt
    torch.set_num_threads(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    slt.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    nll, viterbi, params = make(name, K, device, dtype)
    small_em, small_tags = _data(2, 5, K, device, seed=1, dtype=dtype)     # warm-up: compile / load caches
    nll(small_em, small_tags).backward()
    viterbi(small_em)
    em, tags = _data(B, T, K, device, dtype=dtype)
    _sync(device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.max_memory_allocated()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(WARMUP_CALLS.get(name, 0)):      # inside the peak: same shapes as the measured calls
        nll(em, tags).backward()
        viterbi(em)
    fb, vit = [], []
    for _ in range(repeat):
        for p in params + [em]:
            p.grad = None
        t = time.perf_counter()
        nll(em, tags).backward()
        _sync(device)
        fb.append(time.perf_counter() - t)
        if fb[0] > budget:          # one run of a slow contender is enough
            break
    for _ in range(repeat):
        t = time.perf_counter()
        viterbi(em)
        _sync(device)
        vit.append(time.perf_counter() - t)
        if vit[0] > budget:
            break
    if device == "cuda":
        peak = (torch.cuda.max_memory_allocated() - base) / 2 ** 20
    else:
        peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    fb.sort()
    vit.sort()
    return {"fb": fb[len(fb) // 2], "vit": vit[len(vit) // 2], "peak_mb": peak}


def check_equivalence(K=4, B=3, T=6, contenders=("structlearn", "sl-script", "sl-torch-seq", "sl-torch-scan",
                                                 "pytorch-crf", "torch-struct")):
    """Every contender gives the same NLL, emission gradient and Viterbi path on a tiny float64 case
    (transition parameters copied from structlearn's layer). Returns the names checked."""
    import numpy as np
    import torch
    torch.manual_seed(0)
    em = torch.randn(B, T, K, dtype=torch.float64)
    tags = torch.randint(0, K, (B, T))
    trans = torch.randn(K, K, dtype=torch.float64)
    ref = None
    for name in contenders:
        nll, viterbi, params = make(name, K, "cpu", "float64")
        with torch.no_grad():
            for p in params:
                p.data = p.data.double()
                if tuple(p.shape) == (K, K):
                    p.copy_(trans)
                else:
                    p.zero_()
        e = em.clone().requires_grad_()
        value = nll(e, tags)
        value.backward()
        y = viterbi(em)
        y = torch.as_tensor(y) if not isinstance(y, torch.Tensor) else y
        got = (float(value.detach()), e.grad.numpy().copy(), y.numpy())
        if ref is None:
            ref = got
        else:
            np.testing.assert_allclose(got[0], ref[0], rtol=1e-9, err_msg=name)
            np.testing.assert_allclose(got[1], ref[1], rtol=1e-8, atol=1e-12, err_msg=name)
            assert np.array_equal(got[2], ref[2]), name
    return list(contenders)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--lengths", default=None, help="sequence lengths T of the workloads, e.g. '100,500' "
                    "(default 50,500), each with K = 10 and 50")
    ap.add_argument("--only", default=None, help="run workloads whose label contains this, e.g. 'T=500'")
    ap.add_argument("--contenders", default=",".join(CONTENDERS))
    ap.add_argument("--timeout", type=float, default=240.0,
                    help="seconds allowed to one contender on one workload (its row then says so)")
    ap.add_argument("--worker", nargs=4, metavar=("NAME", "B", "T", "K"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        name, B, T, K = args.worker[0], *map(int, args.worker[1:])
        print(json.dumps(worker(name, B, T, K, args.device, args.threads, args.repeat, dtype=args.dtype)))
        return
    contenders = args.contenders.split(",")
    print(f"device {args.device}, threads {args.threads}, repeat {args.repeat}, {args.dtype}, median times")
    print(f"{'workload':<18}{'contender':<15}{'nll f+b ms':>12}{'viterbi ms':>12}{'peak MB':>10}"
          f"{'f+b ratio':>11}{'vit ratio':>11}")
    env = dict(os.environ, NUMBA_NUM_THREADS=str(max(1, args.threads)))
    workloads = WORKLOADS if not args.lengths else [(32, int(T), K) for T in args.lengths.split(",")
                                                    for K in (10, 50)]
    for B, T, K in workloads:
        label = f"B={B} T={T} K={K}"
        if args.only and args.only not in label:
            continue
        ours = None
        for name in contenders:
            cmd = [sys.executable, __file__, "--worker", name, str(B), str(T), str(K), "--device",
                   args.device, "--threads", str(args.threads), "--repeat", str(args.repeat), "--dtype", args.dtype]
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
            except subprocess.TimeoutExpired:
                print(f"{label:<18}{name:<15}  > {args.timeout:.0f} s (timed out)", flush=True)
                continue
            if out.returncode:
                print(f"{label:<18}{name:<15}  failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            if name == "structlearn":
                ours = r
            ratio = (f"{r['fb'] / ours['fb']:>11.1f}{r['vit'] / ours['vit']:>11.1f}" if ours else "")
            print(f"{label:<18}{name:<15}{1e3 * r['fb']:>12.1f}{1e3 * r['vit']:>12.1f}{r['peak_mb']:>10.1f}"
                  f"{ratio}", flush=True)


if __name__ == "__main__":
    main()
