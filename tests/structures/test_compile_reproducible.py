"""Freshly compiled kernels and kernels loaded from Numba's on-disk cache give bit-identical results.

Numba links a callee's own machine code into a process that compiles it, but a caller loaded from the
cache carries the callee inlined and optimised in the caller's context. Fast-math flags (reassoc, arcp,
nsz, and contract too) let LLVM round the two differently in the last bits (a new user's first
CoNLL-2000 fit stopped after 160 iterations, every later one after 161), so the chain forward-backward
has none. The script below runs twice against one empty cache folder: the first run compiles, the
second loads."""
import json
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import hashlib, json, numpy as np
from structlearn import GaussianHMM, LinearChainCRF
from structlearn.kernels.chain import chain_marginals

def digest(*arrays):
    h = hashlib.sha1()
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.hexdigest()

rng = np.random.default_rng(0)
K = 7
lengths = rng.integers(5, 40, size=200)
offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
unary = rng.normal(scale=3.0, size=(int(lengths.sum()), K))
trans, start, end = rng.normal(size=(1, K, K)), rng.normal(size=K), rng.normal(size=K)
out = {}
for mode in (1, 2, 3):
    for threads in (1, 2):
        out[f"chain edge_mode={mode} threads={threads}"] = digest(
            *chain_marginals(unary, trans, start, end, offsets, mode, threads))

words = ["the", "a", "dog", "cat", "runs", "sees", "big", "red"]
X, y = [], []
for n in range(120):
    ws = rng.choice(words, size=int(rng.integers(3, 12)))
    X.append([{"w": str(w), "suf": str(w)[-1:], "bias": 1.0} for w in ws])
    y.append([("D" if w in ("the", "a") else "V" if w in ("runs", "sees") else
               "A" if w in ("big", "red") else "N") for w in ws])
crf = LinearChainCRF(max_iterations=30, c2=0.1).fit(X, y)
out["LinearChainCRF"] = digest([row["loss"] for row in crf.training_log_])
Xg = np.concatenate([rng.normal(m, 1.0, size=(int(rng.integers(5, 30)), 2))
                     for m in rng.integers(0, 4, size=100)])
hmm = GaussianHMM(n_components=3, n_iter=5, random_state=0).fit(Xg)
out["GaussianHMM"] = digest([hmm.score(Xg)], hmm.predict_proba(Xg))
out["cache_hits"] = int(sum(chain_marginals.stats.cache_hits.values()))
print(json.dumps(out))
"""


@pytest.mark.slow
def test_fresh_and_cached_kernels_agree_bitwise(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"))
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                              timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    fresh, cached = runs
    assert fresh.pop("cache_hits") == 0 and cached.pop("cache_hits") > 0  # compiled, then loaded
    differ = sorted(k for k in fresh if fresh[k] != cached[k])
    assert not differ, f"freshly compiled and cached kernels differ: {differ}"
