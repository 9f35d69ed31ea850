"""Differentiable structured layers for PyTorch (the optional ``structlearn[torch]`` extra).

Functional structures over padded batches ``(B, T, ...)`` + ``lengths`` (or a boolean prefix mask):
:class:`LinearChain`, :class:`SemiMarkov`, :class:`Tree`, :class:`HigherOrderChain`, each with
``log_partition``, ``marginals``, ``argmax``, ``kbest``, ``sample``, ``entropy``, ``score``,
``log_prob`` and ``constrain``; and the modules :class:`CRF` (pytorch-crf's API), :class:`SemiMarkovCRF`
and :class:`TreeCRF`. On CPU they run the NumPy engine's Numba kernels (:mod:`structlearn.engine.structures`)
with its explicit forward–backward as the gradient; on other devices torch recursions (the chain's
forward as an O(log T)-depth parallel scan). This is the only subpackage that imports torch.

Threads: the engine runs with one Numba thread by default (:func:`set_num_threads`). Two OpenMP
runtimes in one process (torch's and Numba's ``omp`` threading layer) busy-wait against each other:
measured on 2 cores, a BiLSTM's backward pass went from 50 ms to 2 s once Numba's pool had started.
Set ``OMP_WAIT_POLICY=PASSIVE`` before torch is imported, or ``NUMBA_THREADING_LAYER=workqueue``
(not for multi-threaded callers), or ``NUMBA_NUM_THREADS=1``; any of the three removes the stall.
"""
from ._base import KBest, Marginals
from ._batch import set_num_threads
from .chain import LinearChain
from .constraints import Constraints, bio_constraints
from .crf import CRF
from .export import ViterbiDecoder
from .higher_order import HigherOrderChain
from .layers import SemiMarkovCRF, TreeCRF
from .semimarkov import SemiMarkov
from .tree import Tree

__all__ = ["LinearChain", "SemiMarkov", "Tree", "HigherOrderChain", "CRF", "SemiMarkovCRF", "TreeCRF",
           "ViterbiDecoder", "KBest", "Marginals", "Constraints", "bio_constraints", "set_num_threads"]
