"""Figures of fitted models and their outputs (matplotlib; the ``plot`` extra).

Every function takes an optional ``ax`` (or ``axes``) to draw into, creates a figure of a fixed size
(constrained layout) otherwise, and returns the Axes. matplotlib is imported inside the functions:
``import structlearn.plotting`` does not import it.

============================  ===================================================================
:func:`plot_segmentation`     signal(s) with the decoded segments as coloured spans and the state
                              posteriors as stacked bands (HMMs, HSMMs, the general HSMM family)
:func:`plot_durations`        fitted duration pmf per state over the histogram of the segment
                              lengths of a decoded or labelled segmentation
:func:`plot_transitions`      transition matrix (or CRF transition weights) as an annotated heatmap
:func:`plot_training`         objective / log-likelihood per iteration (``training_log_``,
                              ``monitor_``)
:func:`plot_marginals_grid`   node marginals of a graph CRF / factor graph on an H × W grid
:func:`plot_hierarchy`        the nested segments of a hierarchical HMM parse, one row per level
:func:`plot_crf_weights`      the largest state-feature weights per label of a LinearChainCRF
============================  ===================================================================

Helpers: :func:`duration_pmf` (per-state duration law of any HMM / HSMM family model),
:func:`segment_lengths` (run lengths per state of a segmentation) and :func:`save_figure` (PNG of a
returned Axes into a folder, as the examples' ``--figures DIR`` do).
"""
from ._common import save_figure
from .durations import duration_pmf, plot_durations, segment_lengths
from .matrices import plot_marginals_grid, plot_transitions
from .sequences import plot_hierarchy, plot_segmentation
from .training import plot_crf_weights, plot_training

__all__ = ["plot_segmentation", "plot_durations", "plot_transitions", "plot_training",
           "plot_marginals_grid", "plot_hierarchy", "plot_crf_weights", "duration_pmf",
           "segment_lengths", "save_figure"]
