"""Fitting on a dask cluster: data that outgrow one process or one machine (the ``dask`` extra).

:func:`fit` trains an EM estimator of structlearn (:class:`~structlearn.HiddenSemiMarkovModel`, the
general HSMM family, the hidden Markov models of :mod:`structlearn.hmm`) or a
:class:`~structlearn.LinearChainCRF` (L-BFGS over shards of (items, labels) pairs) on a dask collection
with a ``distributed.Client``. The data stay on the workers: every partition becomes one validated shard, is
persisted where it was loaded, and each EM iteration sends only the parameters to the workers and the
shards' additive statistics back (:mod:`structlearn.learning.shards`); the M-step runs on the client.
The EM loop, its restarts and convergence test are the estimator's own (``fit`` and this function
share them), so the result equals ``estimator.fit`` on the concatenated data up to the rounding of the
sums (1e-8 and below in the tests) with the same iterations.

Import cost: importing this package imports dask only when :func:`fit` is called.
"""
from ._fit import fit, shard_bytes

__all__ = ["fit", "shard_bytes"]
