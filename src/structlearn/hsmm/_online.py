"""Online estimation and the HSMM ↔ HMM maps of the explicit-duration HSMM (Yu 2010 §2.3.3, §4.4).

:class:`OnlineMixin` is mixed into :class:`structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel`. The
maths lives below the estimator layer: the (state, remaining duration) HMM and the streaming filter in
:mod:`structlearn.hsmm.expanded_hmm`, stepwise EM in :mod:`structlearn.hsmm._online_statistics`.
"""
import copy

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from . import _online_statistics as _online
from ..distributions import durations as _dur
from ..distributions import emissions as _emi
from . import expanded_hmm as _xh
from ..learning.training import rolls_back

__all__ = ["OnlineMixin"]


class OnlineMixin:
    """``partial_fit``, the streaming filter and ``to_expanded_hmm`` / ``from_expanded_hmm``.

    The host estimator provides ``_validate_hyper``, ``_validate_data``, ``_init_params``,
    ``_check_params``, ``_potentials`` and the fitted attributes of
    :class:`~structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel`.
    """

    # ================================================================================================
    # HSMM <-> HMM over (state, remaining duration)
    # ================================================================================================
    def to_expanded_hmm(self):
        """The HMM over (state, remaining duration) equal to this HSMM (Yu 2010 §4.4).

        Expanded state ``s = j·D + (r - 1)`` is HSMM state j with r ∈ 1..D steps left, the current one
        included (see :mod:`structlearn.hsmm.expanded_hmm` for the transitions and the start / end
        laws of each ``censoring``; all three modes are exact).

        Returns
        -------
        ExpandedHMM
            ``startprob`` (K·D,), ``transmat`` (K·D, K·D), ``end`` (K·D,) (linear space, float64;
            ``end`` carries ``endprob_`` on the remaining-duration-1 states when it is set),
            ``states`` (K·D,) int64 (the HSMM state of each expanded state), ``remaining`` (K·D,)
            int64, ``emission`` (a copy of ``emission_``), ``censoring``;
            ``log_likelihood(X, lengths)`` (B,) scores sequences through
            :class:`~structlearn.engine.structures.LinearChain` and equals :meth:`score_per_sequence`;
            ``structure(X, lengths)`` is that chain. Time and memory O(K²·D²) (the dense matrix);
            inference on the chain O(N·K²·D²).
        """
        check_is_fitted(self, "startprob_")
        self._check_params()
        pot = self._potentials()
        return _xh.ExpandedHMM.from_hsmm(self.startprob_, self.transmat_, pot.log_pmf(),
                                         copy.deepcopy(self.emission_), self.censoring,
                                         getattr(self, "endprob_", None))

    @classmethod
    def from_expanded_hmm(cls, hmm, emission=None, censoring=None, atol=1e-8, **params):
        """The HSMM with nonparametric durations equal to an HMM over (state, remaining duration).

        The inverse of :meth:`to_expanded_hmm` (Yu 2010 §4.4): recovers π, A (zero diagonal) and
        p_j(d) (:class:`~structlearn.distributions.durations.NonParametric`) from the expanded start and
        transition probabilities (:func:`structlearn.hsmm.expanded_hmm.collapse`).

        Parameters
        ----------
        hmm : ExpandedHMM or object
            With ``startprob`` (S,), ``transmat`` (S, S) (linear space) and ``states`` (S,) (the HSMM
            state of each expanded state, each used D = S / K times, in any order); optionally ``end``
            (S,), ``censoring`` and ``emission``.
        emission : emission object, optional
            Default ``hmm.emission``; copied. Required (a model without emissions cannot score).
        censoring : {"none", "right", "both"}, optional
                Default ``hmm.censoring``, else ``"none"`` when ``hmm.end`` lets only remaining
            duration 1 end and ``"right"`` otherwise.
        atol : float, default 1e-8
            Tolerance of the form checks.
        **params
            Other constructor arguments of the estimator (``n_iter``, ``init_params``, ...).

        Returns
        -------
        HiddenSemiMarkovModel
            Fitted: ``startprob_``, ``transmat_``, ``duration_`` (NonParametric), ``emission_``,
            ``max_duration_`` = D, ``n_features_in_``, and ``endprob_`` when the end weights of a
            ``"none"`` HMM are end probabilities.

        Raises
        ------
        ValueError
            The HMM is not of the expanded form (the message names the array and what is wrong), or no
            emission is given.
        """
        emission = emission if emission is not None else getattr(hmm, "emission", None)
        if emission is None:
            raise ValueError("`emission` is required: the expanded HMM carries no emission object; "
                             "pass `emission=` (e.g. Gaussian(means=..., variances=...))")
        for name in ("startprob", "transmat", "states"):
            if not hasattr(hmm, name):
                raise ValueError(f"`hmm` must have the attributes startprob, transmat and states (an "
                                 f"ExpandedHMM); it has no `{name}`")
        if censoring is None:
            censoring = getattr(hmm, "censoring", None)
        out = _xh.collapse(hmm.startprob, hmm.transmat, hmm.states, getattr(hmm, "end", None),
                           censoring, atol)
        K, D = out["probs"].shape
        emission = copy.deepcopy(emission)
        kw = {"duration": "nonparametric", "emission": copy.deepcopy(emission), "max_duration": D,
              "censoring": out["censoring"]}
        kw.update(params)
        model = cls(n_states=K, **kw)
        model.startprob_ = out["startprob"]
        model.transmat_ = out["transmat"]
        model.duration_ = _dur.NonParametric(out["probs"])
        model.emission_ = emission
        if out["endprob"] is not None:
            model.endprob_ = out["endprob"]
        model.max_duration_ = D
        model.n_features_in_ = int(np.asarray(emission.sample(np.zeros(1, dtype=np.int64),
                                                              np.random.RandomState(0))).shape[1])
        model._check_params()
        return model

    # ================================================================================================
    # streaming filter
    # ================================================================================================
    def streaming_filter(self, factored=None):
        """An online filter: ``update(x)`` with one observation row at a time (Yu 2010 §2.3.3).

        Parameters
        ----------
        factored : bool, optional
            Factor the segment ends through hub labels (time O(K·D + K²) per update) rather than the
            flat expanded transitions (O(K²·D)); default ``n_states > 10``
            (:class:`~structlearn.hsmm.expanded_hmm.StreamingFilter`).

        Returns
        -------
        StreamingFilter
            ``update(x)`` returns a ``FilterStep`` with ``state`` (K,) = P(S_t = j | o_1:t), ``end``
            (K,) = P(a j-segment ends at t | o_1:t) and ``log_likelihood`` = log P(o_1:t): row t of
            :meth:`filter` (``.state``, ``.end``, ``.log_likelihood``) on the stream so far, with the
            same semantics (the running segment may go on; ``"both"``: residual-life first segment).
            Memory O(K·D) fixed; the filter runs the engine's sparse chain forward on the
            (state, remaining duration) representation, each update one short chain. It holds copies
            of the current parameters (later fits do not change it). ``reset()`` restarts it.
        """
        check_is_fitted(self, "startprob_")
        self._check_params()
        pot = self._potentials()
        return _xh.StreamingFilter(self.startprob_.copy(), self.transmat_.copy(), pot.log_pmf(),
                                   copy.deepcopy(self.emission_), self.censoring, factored=factored)

    # ================================================================================================
    # online EM
    # ================================================================================================
    def _online_params(self):
        return (self.startprob_, self.transmat_, self.duration_, self.emission_)

    @rolls_back
    def partial_fit(self, X, lengths=None, kappa=0.7):
        """One step of online (stepwise) EM on a chunk of a stream (Yu 2010 §2.3.3; Cappé & Moulines
        2009; Liang & Klein 2009).

        The chunk's expected sufficient statistics (exact forward–backward of the chunk, its
        sequences independent and censored at their ends) are blended into running averages with
        step ρ_k = (k + 2)^(-κ) (k = ``n_chunks_seen_`` before the call), then every parameter named
        in ``params`` is set to the M-step of the averages
        (:mod:`structlearn.hsmm._online_statistics`).

        The first call on an unfitted model initialises the parameters from the chunk as :meth:`fit`
        does (``init_params``, ``init``, ``random_state``; ``max_duration_`` = ``max_duration`` or
        the longest sequence of the chunk — set ``max_duration`` for streams) and then takes the
        first online step; it does not run batch EM on the chunk (on a few hundred rows that drives
        transitions to 0, which EM never leaves). On a model fitted by :meth:`fit` (or given its
        parameters) it continues from the current parameters; a :meth:`fit` between two calls
        restarts the running statistics.

        Parameters
        ----------
        X : array-like of float64, shape (N, F)
            The chunk (NaN = missing).
        lengths : array-like of int, shape (B,), optional
            Its sequences (default one).
        kappa : float, default 0.7
            Step-size exponent κ ∈ (0.5, 1] (κ = 1: the running mean of the chunks' statistics;
            smaller: older chunks, computed under older parameters, are forgotten faster). On
            simulated streams (K = 2, 3; chunks of 250–300 rows) 0.7 reached the batch-EM
            parameters fastest among 0.51, 0.6, 0.7, 0.8.

        Returns
        -------
        self
            With ``n_chunks_seen_`` (int) and ``chunk_log_likelihood_`` (float, log P(chunk) under
            the parameters before this update).

        Raises
        ------
        ValueError
            Bad ``kappa``, X, lengths or hyper-parameters; an emission family without sufficient
            statistics (Gaussian, MultivariateGaussian, Poisson and Categorical have them) while
            ``"e"`` is in ``params``; a sequence of the chunk with zero likelihood.

        Notes
        -----
        Cost per call: the E-step of the chunk, time O(N·(D·K + K²)), memory O(N·K + D·K); the running
        statistics take O(K² + D·K + emission size), independent of the length of the stream.
        """
        if (isinstance(kappa, bool) or not isinstance(kappa, (int, float, np.floating))
                or not 0.5 < kappa <= 1.0):
            raise ValueError(f"`kappa` must be a number in (0.5, 1]; got {kappa!r}")
        self._validate_hyper()
        fitted = hasattr(self, "startprob_") and hasattr(self, "emission_") and hasattr(self, "duration_")
        emission = self.emission_ if fitted else _emi.make_emission(self.emission)
        if "e" in self.params:
            _online.check_emission_supported(emission)
        X, lengths, offsets = self._validate_data(X, lengths, emission)
        if not fitted:
            K = self.n_states
            n_obs = int((~np.isnan(X).all(axis=1)).sum())
            if n_obs < K and "e" in self.init_params:
                raise ValueError(f"the first chunk has fewer observed rows ({n_obs}) than states "
                                 f"(n_states={K}): the emissions cannot be initialised from it")
            self.max_duration_ = int(self.max_duration if self.max_duration is not None
                                     else max(1, int(lengths.max())))
            self.n_features_in_ = X.shape[1]
            self._init_params(X, lengths, check_random_state(self.random_state), 0)
        else:
            if not hasattr(self, "max_duration_"):
                self.max_duration_ = int(self.max_duration if self.max_duration is not None
                                         else max(1, int(lengths.max())))
            if not hasattr(self, "n_features_in_"):
                self.n_features_in_ = X.shape[1]
            elif X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has {X.shape[1]} features but the model was fitted with "
                                 f"{self.n_features_in_}")
            self._check_params()
        # running statistics belong to the parameters they produced: a `fit` (or a user assignment of a
        # parameter) since the last call starts the averages afresh
        state = getattr(self, "_online_state", None)
        marker = getattr(self, "_online_marker", ())
        if (state is None or len(marker) != 4
                or any(a is not b for a, b in zip(marker, self._online_params()))):
            state = _online.OnlineStatistics()
        potentials = self._potentials()
        stats, ll, _ = _online.chunk_statistics(potentials, X, lengths, offsets, self.params)
        k = state.n_updates
        state.update(stats, _online.step_size(k, float(kappa)))
        self.startprob_, self.transmat_ = _online.m_step_from_statistics(potentials, state.average())
        if getattr(potentials, "endprob", None) is not None:
            self.endprob_ = potentials.endprob
        self._check_params()
        self._online_state = state
        self._online_marker = self._online_params()
        self.n_chunks_seen_ = state.n_updates
        self.chunk_log_likelihood_ = float(ll)
        return self
