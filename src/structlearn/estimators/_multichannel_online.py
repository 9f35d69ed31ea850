"""``partial_fit`` (stepwise EM) of :class:`structlearn.estimators.multichannel_hsmm.MultiChannelHSMM`.

The chunk's E-step is the per-shard function of ``fit`` (:func:`structlearn.learning.multichannel_em.
statistics`, with the emission families' additive statistics instead of posteriors); the running average
and the step size are those of :mod:`structlearn.learning.hsmm_online`, so the behaviour is
:meth:`HiddenSemiMarkovModel.partial_fit <structlearn.estimators.hsmm.HiddenSemiMarkovModel.partial_fit>`'s.
"""
import copy

import numpy as np
from sklearn.utils import check_random_state

from ..learning import hsmm_online as _online
from ..learning.shards import ShardStatistics

__all__ = ["OnlineMixin"]

#: The fitted parameters whose identity marks "the parameters the running statistics were made under".
_PARAMETERS = ("startprob_", "coupling_", "transmat_", "duration_", "emission_")


class OnlineMixin:
    """Stepwise EM over chunks of a stream (Cappé & Moulines 2009; Liang & Klein 2009; Yu 2010 §2.3.3).
    The host provides ``_validate_hyper``, ``_shard_from_data``, ``_shard_known``, ``_shard_function``,
    ``_apply_statistics``, ``_set_dimensions``, ``_init_params``, ``_potentials``, ``_check_exact`` and
    ``_check_params``."""

    def partial_fit(self, X, lengths=None, labels=None, kappa=0.7):
        """One step of online (stepwise) EM on a chunk of a stream.

        The chunk's expected sufficient statistics (the E-step of :meth:`fit` on the chunk, its sequences
        independent and treated with ``censoring``; exact or factored as ``inference``) are blended into
        running averages with step ρ_k = (k + 2)^(-κ) (k = ``n_chunks_seen_`` before the call), then every
        parameter in ``params`` is set to the M-step of the averages
        (:mod:`structlearn.learning.hsmm_online`).

        The first call on an unfitted model initialises the parameters from the chunk as :meth:`fit`
        does (``init_params``, ``init``, ``random_state``; ``max_duration_`` = ``max_duration`` or the
        longest sequence of the chunk — set ``max_duration`` for streams) and then takes the first online
        step; it does not run batch EM on the chunk. On a model fitted by :meth:`fit` (or given its
        parameters) it continues from the current parameters; a :meth:`fit` (or an assignment of a fitted
        parameter) between two calls restarts the running statistics.

        Parameters
        ----------
        X : array-like of float64, shape (N, F)
            The chunk (NaN = missing).
        lengths : array-like of int, shape (B,), optional
            Its sequences (default one).
        labels : array-like of int, shape (N, C), optional
            Known states per channel, -1 where unknown (as :meth:`fit`): the chunk's statistics are those
            of the paths that agree with them.
        kappa : float, default 0.7
            Step-size exponent κ ∈ (0.5, 1] (κ = 1: the running mean of the chunks' statistics).

        Returns
        -------
        self
            With ``n_chunks_seen_`` (int) and ``chunk_log_likelihood_`` (float, log P(chunk) — with labels
            log P(chunk, labels); ``"factored"``: its approximation — under the parameters before this
            update).

        Raises
        ------
        ValueError
            Bad ``kappa``, X, lengths, labels or hyper-parameters; an emission family without additive
            sufficient statistics (Gaussian, MultivariateGaussian, Poisson and Categorical have them)
            while ``"e"`` is in ``params``; an exact product larger than ``max_exact_states``; a sequence
            of the chunk with zero likelihood. The estimator is unchanged after an error.

        Notes
        -----
        Cost per call: the E-step of the chunk (one EM iteration of :meth:`fit` on it); the running
        statistics take the size of one shard's statistics, O(Σ_c (D_c M_c + M_c Σ_k M_k) + emission
        size), independent of the length of the stream.
        """
        if (isinstance(kappa, bool) or not isinstance(kappa, (int, float, np.floating))
                or not 0.5 < kappa <= 1.0):
            raise ValueError(f"`kappa` must be a number in (0.5, 1]; got {kappa!r}")
        self._validate_hyper()
        fitted = all(hasattr(self, n) for n in _PARAMETERS)
        # the parameters as they stand (``_check_params`` rebuilds the lists): the running statistics go on
        # only if they are the ones the last step left
        current = tuple(getattr(self, n, None) for n in _PARAMETERS)
        saved = copy.deepcopy({n: v for n, v in vars(self).items() if n.endswith("_") and not n.startswith("__")})
        try:
            shard = self._shard_from_data(X, lengths, labels)
            if not fitted:
                self._online_init(shard)
            else:
                if shard.X.shape[1] != self.n_features_in_:
                    raise ValueError(f"X has {shard.X.shape[1]} columns but the model was fitted with "
                                     f"{self.n_features_in_}")
                self._check_params()
            if self.inference == "exact":
                self._check_exact(self._potentials())
            if "e" in self.params:
                for em in self.emission_:
                    if em is not None:
                        _online.check_emission_supported(em)
            state = getattr(self, "_online_state", None)
            marker = getattr(self, "_online_marker", ())
            if (not fitted or state is None or len(marker) != len(current)
                    or any(a is not b for a, b in zip(marker, current))):
                state = _online.OnlineStatistics()
            function, params = self._shard_function(posteriors=False)
            part = function(params, shard)
            state = copy.deepcopy(state)  # the running statistics change only when the step succeeds
            state.update(part.stats, _online.step_size(state.n_updates, float(kappa)))
            self._apply_statistics(ShardStatistics(state.average(), part.value, part.n_sequences))
            self._check_params()
        except BaseException:
            for n in [n for n in vars(self) if n.endswith("_") and not n.startswith("__")]:
                if n not in saved:
                    delattr(self, n)
            for n, v in saved.items():
                setattr(self, n, v)
            raise
        self._online_state = state
        self._online_marker = tuple(getattr(self, n) for n in _PARAMETERS)
        self.n_chunks_seen_ = state.n_updates
        self.chunk_log_likelihood_ = float(part.value)
        return self

    def _online_init(self, shard):
        """Set the fitted attributes from the first chunk as ``fit`` does."""
        self._set_dimensions(shard.X.shape[1], shard.lengths.max())
        self._init_params(shard.X, shard.lengths, check_random_state(self.random_state), self._shard_known(shard))
