"""``partial_fit`` (stepwise EM) of every EM estimator whose E-step is the per-shard function of
:mod:`structlearn.learning.shards`.

:class:`ShardOnlineMixin` needs the hooks the estimator already has for ``fit`` and
:func:`structlearn.distributed.fit`: ``_validate_hyper``, ``_shard_from_data(X, lengths[, labels])``,
``_shard_function(posteriors=False)`` -> ``(statistics, params)``, ``_apply_statistics(total)`` (the
M-step of summed statistics, from the emission family's sufficient statistics when no rows travel),
``_check_params`` and ``_online_attributes`` (the fitted attribute names whose identity marks "the
parameters the running statistics were made under"); ``_online_init(shard)`` (the first chunk's
initialisation, by default ``_init_params(X, lengths, rng, 0, known)``) and ``_check_online`` (which
emissions the M-step can re-estimate from additive statistics) may be overridden.
The running average and the step size are :mod:`structlearn.hsmm._online_statistics`'s, so the behaviour
is :meth:`HiddenSemiMarkovModel.partial_fit <structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel.partial_fit>`'s.
"""
import copy

import numpy as np
from sklearn.utils import check_random_state

from . import _online_statistics as _online
from ..learning.shards import ShardStatistics
from ..utils.interrupts import as_interrupt

__all__ = ["ShardOnlineMixin"]


class ShardOnlineMixin:
    """Stepwise EM over chunks of a stream (Cappé & Moulines 2009; Liang & Klein 2009; Yu 2010 §2.3.3)."""

    def partial_fit(self, X, lengths=None, labels=None, kappa=0.7):
        """One step of online (stepwise) EM on a chunk of a stream.

        The chunk's expected sufficient statistics (the E-step of ``fit``, its sequences independent and
        treated with the model's ``censoring``) are blended into running averages with step
        ρ_k = (k + 2)^(-κ) (k = ``n_chunks_seen_`` before the call), and every parameter in ``params``
        is set to the M-step of the averages.

        The first call on an unfitted model initialises the parameters from the chunk as :meth:`fit`
        does (``init_params``, ``init``, ``random_state``) and then takes the first online step; it does
        not run batch EM on the chunk. On a model fitted by :meth:`fit` (or given its parameters) it
        continues from the current parameters; a :meth:`fit` (or an assignment of a fitted attribute)
        between two calls restarts the running statistics.

        Parameters
        ----------
        X : array-like of float64, shape (N, F)
            The chunk (NaN = missing).
        lengths : array-like of int, shape (B,), optional
            Its sequences (default one).
        labels : array-like of int, optional
            Known states, -1 where unknown, as :meth:`fit` takes them ((N,); MultiChannelHSMM: (N, C) per
            channel): the chunk's statistics are those of the paths that agree with them.
        kappa : float, default 0.7
            Step-size exponent κ ∈ (0.5, 1] (κ = 1: the running mean of the chunks' statistics).

        Returns
        -------
        self
            With ``n_chunks_seen_`` (int) and ``chunk_log_likelihood_`` (float, log P(chunk) — with labels
            log P(chunk, labels) — under the parameters before this update).

        Raises
        ------
        ValueError
            Bad ``kappa``, X, lengths, labels or hyper-parameters; an emission family without additive
            sufficient statistics (Gaussian, MultivariateGaussian, Poisson and Categorical have them) or
            segment emissions while ``"e"`` is in ``params``; a sequence of the chunk with zero likelihood.
            The estimator is unchanged after an error.

        Notes
        -----
        Cost per call: the E-step of the chunk (that of one EM iteration of :meth:`fit` on it); the running
        statistics take the size of one shard's statistics, independent of the length of the stream.
        """
        if (isinstance(kappa, bool) or not isinstance(kappa, (int, float, np.floating))
                or not 0.5 < kappa <= 1.0):
            raise ValueError(f"`kappa` must be a number in (0.5, 1]; got {kappa!r}")
        self._validate_hyper()
        names = self._online_attributes()
        fitted = all(hasattr(self, n) for n in names)
        # the parameters as they stand, before ``_check_params`` (which may rebuild containers): the running
        # statistics go on only if these are the objects the last step left
        current = tuple(getattr(self, n, None) for n in names)
        saved = copy.deepcopy({n: v for n, v in vars(self).items() if n.endswith("_") and not n.startswith("__")})
        try:
            shard = self._shard_from_data(X, lengths, labels)
            if not fitted:
                self._online_init(shard)
            else:
                if shard.X.shape[1] != getattr(self, "n_features_in_", shard.X.shape[1]):
                    raise ValueError(f"X has {shard.X.shape[1]} features but the model was fitted with "
                                     f"{self.n_features_in_}")
                self._check_params()
            self._check_online()
            state = getattr(self, "_online_state", None)
            marker = getattr(self, "_online_marker", ())
            if (not fitted or state is None or len(marker) != len(current)
                    or any(a is not b for a, b in zip(marker, current))):
                state = _online.OnlineStatistics()
            function, params = self._shard_function(posteriors=False)
            part = function(params, shard)
            state = copy.deepcopy(state)      # the running statistics change only when the step succeeds
            state.update(part.stats, _online.step_size(state.n_updates, float(kappa)))
            self._apply_statistics(ShardStatistics(state.average(), part.value, part.n_sequences))
            self._check_params()
        except BaseException as exc:
            for n in [n for n in vars(self) if n.endswith("_") and not n.startswith("__")]:
                if n not in saved:
                    delattr(self, n)
            for n, v in saved.items():
                setattr(self, n, v)
            raise as_interrupt(exc)  # the exception itself, or the Ctrl-C a Numba kernel wrapped
        self._online_state = state
        self._online_marker = tuple(getattr(self, n) for n in names)
        self.n_chunks_seen_ = state.n_updates
        self.chunk_log_likelihood_ = float(part.value)
        return self

    def _online_init(self, shard):
        """Set the fitted attributes from the first chunk as ``fit`` does (restart 0)."""
        self.max_duration_ = int(self.max_duration)
        self.n_features_in_ = int(shard.X.shape[1])
        known = None
        if shard.allowed is not None:
            single = shard.allowed.sum(axis=1) == 1
            known = np.where(single, np.argmax(shard.allowed, axis=1), -1).astype(np.int64)
        self._init_params(shard.X, shard.lengths, check_random_state(self.random_state), 0, known)

    def _check_online(self):
        """ValueError unless the emissions the M-step re-estimates have additive statistics."""
        if "e" not in self.params:
            return
        if hasattr(self.emission_, "log_segment"):
            raise ValueError("segment emissions are re-estimated from the rows and their posteriors (no "
                             "additive statistics): use `fit`, or leave 'e' out of `params`")
        _online.check_emission_supported(self.emission_)
