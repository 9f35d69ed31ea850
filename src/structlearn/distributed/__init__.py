"""Fitting on a dask cluster: data that outgrow one process or one machine (the ``dask`` extra).

:func:`fit` trains an EM estimator of structlearn (:class:`~structlearn.HiddenSemiMarkovModel`, the
general HSMM family, the hidden Markov models of :mod:`structlearn.hmm`,
:class:`~structlearn.HierarchicalHMM`), a :class:`~structlearn.LinearChainCRF` (L-BFGS over shards of
(items, labels) pairs) or a :class:`~structlearn.GraphCRF` (L-BFGS / CG over shards of (graph, labels)
pairs) on a dask collection with a ``distributed.Client``. The data stay on the workers: every partition
becomes one validated shard, is persisted where it was loaded, and each iteration (each evaluation of
a CRF's objective) sends only the parameters to the workers and the shards' additive statistics back
(:mod:`structlearn.learning.shards`); the M-step or the optimiser runs on the client. The training
loop, its restarts and convergence test are the estimator's own (``fit`` and this function share them),
and what ``fit`` derives from the data (a CRF's vocabulary and labels, a GraphCRF's label count, an
HHMM's categorical alphabet) is counted on the workers and merged in partition order, so the result
equals ``estimator.fit`` on the concatenated data up to the rounding of the sums (1e-8 and below in the
tests) with the same iterations.

Import cost: importing this package imports dask only when :func:`fit` is called.
"""
from ._fit import fit, shard_bytes

__all__ = ["fit", "shard_bytes"]
