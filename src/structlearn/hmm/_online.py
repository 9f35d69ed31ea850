"""``partial_fit`` (online, stepwise EM) of the hidden Markov estimators of :mod:`structlearn.hmm`.

:class:`HMMOnlineMixin` is mixed into :class:`structlearn.hmm._base.HMMBase`; the design is
the HSMM's (:meth:`structlearn.HiddenSemiMarkovModel.partial_fit`): the chunk's exact E-step, its
expected statistics blended into running averages (:mod:`structlearn.hmm._online_statistics`), then the
M-step of batch EM on the averages.
"""
import numpy as np
from sklearn.utils import check_random_state

from . import _online_statistics as _online
from ..learning.training import rolls_back

__all__ = ["HMMOnlineMixin"]


class HMMOnlineMixin:
    """``partial_fit`` for :class:`~structlearn.hmm._base.HMMBase` (which provides
    ``_validate_hyper``, ``_check_X``, ``_lengths``, ``_initialize``, ``_check``, ``_e_step``,
    ``_m_step_chain``, ``_fresh_emission`` and ``_emission_letters``)."""

    def _online_params(self):
        return (self.__dict__.get("startprob_"), self.__dict__.get("transmat_"),
                self.__dict__.get("emission_"))

    def _online_emission_params(self):
        """Letters of ``params`` passed to the emission family's M-step (the generic model: all)."""
        return self.params

    @rolls_back
    def partial_fit(self, X, lengths=None, kappa=0.7):
        """One step of online (stepwise) EM on a chunk of a stream (Cappé & Moulines 2009; Liang &
        Klein 2009).

        The chunk's expected sufficient statistics (exact forward–backward of the chunk, its sequences
        independent) are blended into running averages with step ρ_k = (k + 2)^(-κ) (k =
        ``n_chunks_seen_`` before the call), then every parameter named in ``params`` is set to the
        M-step of batch EM (priors included) on the averages (:mod:`structlearn.hmm._online_statistics`).

        The first call on a model without parameters initialises them from the chunk as :meth:`fit`
        does (``init_params``, ``random_state``) and then takes the first online step (no batch EM on
        the chunk). On a fitted model (or one whose parameters were set) it continues from the current
        parameters; a :meth:`fit` (or a new assignment of ``startprob_``, ``transmat_`` or the emission
        object) between two calls restarts the running statistics.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
            The chunk (all-NaN rows are missing observations).
        lengths : array-like of int, shape (n_sequences,), optional
            Its sequences (default one).
        kappa : float, default 0.7
            Step-size exponent κ ∈ (0.5, 1] (κ = 1: the running mean of the chunks' statistics;
            smaller: statistics computed under older parameters are forgotten faster).

        Returns
        -------
        self
            With ``n_chunks_seen_`` (int) and ``chunk_log_likelihood_`` (float: log P(chunk) under the
            parameters before this update).

        Raises
        ------
        ValueError
            Bad ``kappa``, X, lengths or hyper-parameters; fewer observed rows than components in the
            first chunk of an unfitted model; an emission family without sufficient statistics
            (``GMMHMM``) while its letters are in ``params``; a sequence of the chunk with zero
            likelihood.

        Notes
        -----
        Cost per call: the E-step of the chunk, time O(N·K²) plus the emission densities and
        statistics, memory O(N·K); the running statistics take O(K² + emission size), independent of
        the length of the stream.
        """
        if (isinstance(kappa, bool) or not isinstance(kappa, (int, float, np.floating))
                or not 0.5 < kappa <= 1.0):
            raise ValueError(f"`kappa` must be a number in (0.5, 1]; got {kappa!r}")
        self._validate_hyper()
        em = self.__dict__.get("emission_")
        fitted = (all(v is not None for v in self._online_params())
                  and getattr(em, "n_states", None) is not None)
        update_emission = bool(set(self.params) & set(self._emission_letters()))
        if update_emission:
            _online.check_emission_supported(em if fitted else self._fresh_emission())
        X = self._check_X(X, em if fitted else self._fresh_emission())
        lengths, offsets = self._lengths(lengths, X)
        if not fitted:
            K = self.n_components
            n_obs = int((~np.isnan(X).all(axis=1)).sum())
            if n_obs < K and set(self._emission_letters()) & set(self.init_params):
                raise ValueError(f"the first chunk has fewer observed rows ({n_obs}) than components "
                                 f"(n_components={K}): the emissions cannot be initialised from it")
            for name, letter in (("startprob_", "s"), ("transmat_", "t")):
                if letter in self.init_params and hasattr(self, name):
                    delattr(self, name)
            rng = check_random_state(self.random_state)
            self._initialize(X, lengths, np.random.RandomState(rng.randint(2 ** 31 - 1)), 0)
            self.n_features_in_ = int(X.shape[1])
        else:
            if hasattr(self, "n_features_in_") and X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has {X.shape[1]} features but the model has {self.n_features_in_}")
            self.n_features_in_ = int(X.shape[1])
            self._check()
        # running statistics belong to the parameters they produced: a `fit` (or an assignment) since the
        # last call starts the averages afresh
        state = getattr(self, "_online_state", None)
        marker = getattr(self, "_online_marker", ())
        if state is None or len(marker) != 3 or any(a is not b for a, b in zip(marker, self._online_params())):
            state = _online.OnlineStatistics()
        (gamma, xi), ll = self._e_step(X, lengths, offsets)
        stats = _online.chain_statistics(gamma, xi, lengths, offsets)
        if update_emission:
            stats["emission"] = _online.emission_statistics(self.emission_, X, gamma)
        state.update(stats, _online.step_size(state.n_updates, float(kappa)))
        avg = state.average()
        self._m_step_chain(avg["start"], avg["trans"])
        if update_emission:
            _online.emission_m_step(self.emission_, avg["emission"], self._online_emission_params())
        self._check()  # also ties π to A under a stationary start
        self._online_state = state
        self._online_marker = self._online_params()
        self.n_chunks_seen_ = state.n_updates
        self.chunk_log_likelihood_ = float(ll)
        return self
