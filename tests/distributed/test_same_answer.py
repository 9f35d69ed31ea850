"""The same answer however the work is split: ``n_jobs``, Numba's thread count and ``distributed.fit`` give
bitwise the same model (``==``, not a tolerance) for the HSMM, the HMM and the CRF.

The training data are cut into blocks fixed by the sequences (``learning.shards.block_cuts``) whose
statistics are added in one fixed tree, and the kernels' parallel reductions use blocks fixed by the
data; here the blocks are made small, so that small data have many of them."""
import hashlib
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from structlearn import HiddenSemiMarkovModel, LinearChainCRF, MultiChannelHSMM
from structlearn.hmm import GaussianHMM
from structlearn.learning import shards
from structlearn.crf import objectives
from tests.conftest import require_module

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _arrays(obj, prefix="", depth=0):
    """Every float array and float of a fitted model's attributes (and of its parameter objects)."""
    out = {}
    items = vars(obj).items() if hasattr(obj, "__dict__") else ()
    for k, v in sorted(items):
        if k.startswith("__") or (depth == 0 and not k.endswith("_")) or "seconds" in k:
            continue  # wall times are not part of the model
        if isinstance(v, np.ndarray) and v.dtype.kind in "fc":
            out[prefix + k] = v
        elif isinstance(v, float):
            out[prefix + k] = np.float64(v)
        elif depth < 2 and hasattr(v, "__dict__") and type(v).__module__.startswith("structlearn"):
            out.update(_arrays(v, prefix + k + ".", depth + 1))
    return out


def digest(model):
    """SHA-1 of the bytes of every fitted float array of ``model`` (and its monitor's history)."""
    h = hashlib.sha1()
    arrays = _arrays(model)
    if hasattr(model, "monitor_"):
        arrays["monitor_.history"] = np.asarray(model.monitor_.history, dtype=np.float64)
    if hasattr(model, "training_log_"):
        arrays["training_log_.loss"] = np.array([e["loss"] for e in model.training_log_])
    for k in sorted(arrays):
        h.update(k.encode() + np.ascontiguousarray(arrays[k]).tobytes())
    return h.hexdigest()


def _segments(seed, n_seq, lo, hi, n_features=1):
    rng = np.random.RandomState(seed)
    seqs = []
    for _ in range(n_seq):
        n = rng.randint(lo, hi)
        levels = np.repeat(rng.randint(0, 3, n // 8 + 1), 8)[:n]
        seqs.append(levels[:, None] * 2.0 + rng.normal(0, 0.5, (n, n_features)))
    return seqs, np.concatenate(seqs), np.array([len(s) for s in seqs])


def _tagging(seed, n_seq, lo, hi):
    rng = np.random.RandomState(seed)
    X, y = [], []
    for _ in range(n_seq):
        x = rng.normal(size=rng.randint(lo, hi))
        X.append([{"v": float(a), "w" + str(int(a * 2)): 1.0} for a in x])
        y.append(["P" if a > 0.2 else ("N" if a < -0.2 else "Z") for a in x])
    return X, y


def _fit(est, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the short fits' ConvergenceWarning, the same for all
        return clone(est).fit(*args)


EM = {"HiddenSemiMarkovModel": HiddenSemiMarkovModel(3, duration="poisson", max_duration=12, n_iter=2,
                                                      random_state=0),
      "GaussianHMM": GaussianHMM(3, n_iter=4, random_state=0),
      "MultiChannelHSMM": MultiChannelHSMM(n_states=(2, 2), max_duration=10, n_iter=2, random_state=0)}


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(shards, "BLOCK_ROWS", 64)
    monkeypatch.setattr(objectives, "CRF_BLOCK_ROWS", 128)


@pytest.mark.parametrize("name", list(EM))
def test_em_is_bitwise_the_same_for_every_n_jobs(name, small_blocks):
    _, X, L = _segments(0, 9, 40, 120, n_features=2 if name == "MultiChannelHSMM" else 1)
    assert len(shards.block_cuts(np.concatenate([[0], np.cumsum(L)]))) - 1 >= 5
    ref = digest(_fit(EM[name], X, L))
    for n_jobs in (2, 3):  # n_jobs=1 runs the one-process path itself
        assert digest(_fit(EM[name].set_params(n_jobs=n_jobs), X, L)) == ref, n_jobs


def test_crf_is_bitwise_the_same_for_every_n_jobs(small_blocks):
    X, y = _tagging(1, 40, 5, 25)
    est = LinearChainCRF(max_iterations=12)
    ref = _fit(est, X, y)
    assert len(ref.training_log_) >= 5
    for n_jobs in (2, 3):
        got = _fit(est.set_params(n_jobs=n_jobs), X, y)
        assert np.array_equal(got.coef_, ref.coef_), n_jobs
        assert digest(got) == digest(ref)


_SCRIPT = """
import json, sys, warnings
sys.path.insert(0, {root!r})
from tests.distributed.test_same_answer import digest, _fit, _segments, _tagging
from structlearn import HiddenSemiMarkovModel, LinearChainCRF, MultiChannelHSMM
from structlearn.hmm import GaussianHMM
_, X, L = _segments(2, 40, 200, 500)
_, X2, L2 = _segments(3, 30, 200, 500, n_features=2)
Xc, yc = _tagging(4, 2500, 10, 20)
out = {{"hsmm": digest(_fit(HiddenSemiMarkovModel(3, max_duration=20, n_iter=2, random_state=0), X, L)),
       "hmm": digest(_fit(GaussianHMM(3, n_iter=3, random_state=0), X, L)),
       "multichannel": digest(_fit(MultiChannelHSMM(n_states=(2, 2), max_duration=10, n_iter=2, random_state=0),
                                   X2, L2)),
       "crf": digest(_fit(LinearChainCRF(max_iterations=4), Xc, yc))}}
print(json.dumps(out))
"""


def test_every_thread_count_gives_bitwise_the_same_model():
    """The kernels' parallel reductions (the CRF's gradient scatter and expected transition counts, the
    multi-channel HSMM's sparse chain) cut their work into blocks fixed by the data, not by the threads;
    data large enough that they run in parallel with 2 threads (about 40 000 tokens)."""
    got = {}
    for threads in ("1", "2"):
        env = dict(os.environ, NUMBA_NUM_THREADS=threads)
        run = subprocess.run([sys.executable, "-c", _SCRIPT.format(root=ROOT)], capture_output=True, text=True,
                             env=env, cwd=ROOT, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        got[threads] = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["1"] == got["2"]


@pytest.mark.slow
def test_distributed_fit_is_bitwise_the_estimators_fit(small_blocks, client):
    """Whatever the partitions of the bag (uneven here) and the workers, ``distributed.fit`` sums the
    statistics of the data's own blocks in their fixed tree: the model of ``fit`` on the whole data (the
    module's real cluster of 2 worker processes, ``client``)."""
    dask_bag = require_module("dask.bag")
    sd = require_module("structlearn.distributed")
    seqs, X, L = _segments(5, 9, 40, 120)
    for est in (EM["HiddenSemiMarkovModel"], EM["GaussianHMM"]):
        ref = _fit(est, X, L)
        for n_parts in (2, 4):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = sd.fit(clone(est), dask_bag.from_sequence(seqs, npartitions=n_parts), client, init=(X, L))
            assert digest(got) == digest(ref), (type(est).__name__, n_parts)
    Xc, yc = _tagging(6, 40, 5, 25)
    est = LinearChainCRF(max_iterations=12)
    ref = _fit(est, Xc, yc)
    got = sd.fit(clone(est), dask_bag.from_sequence(list(zip(Xc, yc)), npartitions=3), client)
    assert np.array_equal(got.coef_, ref.coef_)
