"""The adaptive-factor hidden semi-Markov model estimator (scikit-learn API; Yu 2010 §4 "adaptive factor
HSMM").

The model and its online filter are :mod:`structlearn.hsmm._adaptive_factor`; the walk variances are
estimated by :mod:`structlearn.hsmm._adaptive_em`; the base parameters are those of a
:class:`~structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel` fitted by EM.
"""
import numpy as np
from ..learning.training import EstimatorBase
from sklearn.utils.validation import check_is_fitted

from . import _adaptive_em as _learn
from ..learning.shards import map_shards, data_blocks, document_blocks
from . import _adaptive_factor as _af
from ..distributions import emissions as _emi
from ..utils.validation import check_lengths

from ..learning.em_files import families_from_header, families_to_file, save_doc
from ..learning.restarts import check_n_jobs
from ..learning.posterior_check import check_posteriors
from ..learning.sampling import sample_sequences
from .explicit_duration import HiddenSemiMarkovModel

__all__ = ["AdaptiveFactorHSMM", "AdaptiveFiltered"]

AdaptiveFiltered = _af.AdaptiveFiltered

_FORMAT = "adaptive-factor-hsmm"
_FORMAT_VERSION = 1
_FACTORS = ("both", "duration", "emission", "none")


def _check_walk_var(value, name):
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not np.isfinite(value) or value < 0:
        raise ValueError(f"`{name}` must be a finite number >= 0 or None (estimate it in fit); got {value!r}")


@document_blocks
class AdaptiveFactorHSMM(EstimatorBase):
    r"""Explicit-duration HSMM whose duration scale and emission location drift between segments,
    tracked online (Yu 2010 §4 "adaptive factor HSMM"; model and filter:
    :mod:`structlearn.hsmm._adaptive_factor`).

    Segment n has factors κ_n (its duration law is the base law p_j stretched by κ_n, discretised) and
    η_n (the emission means / rates are multiplied by η_n); log κ and log η follow Gaussian random walks
    with variances q_κ, q_η per segment. :meth:`filter` runs the HSMM's streaming filter and, after
    every (filtered, soft) segment end, a Kalman update of each log factor from the posterior-weighted
    evidence of the segment; the next segment's potentials use the updated factors.

    Parameters
    ----------
    n_states : int, default 2
        Number of hidden states K.
    duration : str or duration object, default "gamma"
        Base duration family (any of :class:`~structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel`).
    emission : str or emission object, default "gaussian"
        Base emission family. The emission factor needs a Gaussian, multivariate Gaussian, Poisson or
        :class:`~structlearn.distributions.emissions.event.EventSequence` family.
    max_duration : int, optional
        D (default: the longest training sequence). Leave room for stretched durations.
    censoring : {"none", "right", "both"}, default "right"
        Of the base model (Yu 2010 §2.2.1).
    factors : {"both", "duration", "emission", "none"}, default "both"
        The factors that adapt (the others stay 1; "none" is the plain HSMM).
    duration_walk_var, emission_walk_var : float >= 0 or None, default None
        q_κ and q_η; None estimates them in :meth:`fit` (:func:`structlearn.hsmm._adaptive_em.
        estimate_walk_variance`, maximum likelihood of the local-level model on the Viterbi segments
        of the training data). 0 freezes the factor at 1.
    n_iter, tol, n_init, init, init_params, random_state
        EM of the base HSMM (as :class:`~structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel`): e.g.
        ``duration=Poisson(lam=[20, 30]), init_params="ste"`` starts EM from given mean durations
        (sparse observations such as event sequences give per-tick initial labels, hence short initial
        durations, from which EM may not escape).
    factored : bool, optional
        Pattern of the streaming filter (default ``n_states > 10``).
    n_jobs : int, optional
        joblib processes (-1: all cores) for :meth:`fit`: the base HSMM's E-step and the walk-variance
        measurements (the Viterbi pass) run in parallel; None: in this process.
        {blocks}

    Attributes
    ----------
    hsmm_ : HiddenSemiMarkovModel
        The fitted base model (``startprob_``, ``transmat_``, ``duration_``, ``emission_``).
    duration_walk_var_, emission_walk_var_ : float
        q_κ, q_η in use (0 for a factor that does not adapt).
    max_duration_, n_features_in_ : int

    Notes
    -----
    Cost per observation of :meth:`filter`: one streaming-filter step (time O(K²·D) flat, O(K·D + K²)
    factored; memory O(K·D)) plus, when a factor moved, the stretched duration law O(K·D), the filter's
    transition pattern (same order as the step) and the scaled emission; :meth:`fit` is the base EM plus
    one Viterbi pass and O(40·segments) for each walk variance.

    Examples
    --------
    >>> import numpy as np
    >>> from structlearn.hsmm.adaptive import AdaptiveFactorHSMM
    >>> rng = np.random.default_rng(0)
    >>> X = np.concatenate([rng.normal(m, 0.3, 20) for m in [1, 3] * 5])[:, None]
    >>> model = AdaptiveFactorHSMM(2, duration="poisson", max_duration=40, random_state=0).fit(X)
    >>> out = model.filter(X)
    >>> out.state.shape, out.emission_factor.shape
    ((200, 2), (200,))
    """

    def __init__(self, n_states=2, duration="gamma", emission="gaussian", max_duration=None,
                 censoring="right", factors="both", duration_walk_var=None, emission_walk_var=None,
                 n_iter=100, tol=1e-4, n_init=1, init="kmeans", init_params="stde", random_state=None,
                 factored=None, n_jobs=None):
        self._store_params(locals())

    # ================================================================================================
    def _validate_hyper(self):
        if self.factors not in _FACTORS:
            raise ValueError(f"`factors` must be one of {_FACTORS}; got {self.factors!r}")
        _check_walk_var(self.duration_walk_var, "duration_walk_var")
        _check_walk_var(self.emission_walk_var, "emission_walk_var")
        if self.factored is not None and not isinstance(self.factored, (bool, np.bool_)):
            raise ValueError(f"`factored` must be True, False or None; got {self.factored!r}")
        check_n_jobs(self.n_jobs)
        if self._adapts("emission"):
            _af.check_scalable_emission(_emi.make_emission(self.emission))
        self._base()._validate_hyper()

    def _base(self):
        return HiddenSemiMarkovModel(self.n_states, duration=self.duration, emission=self.emission,
                                     max_duration=self.max_duration, censoring=self.censoring,
                                     n_iter=self.n_iter, tol=self.tol, n_init=self.n_init, init=self.init,
                                     init_params=self.init_params, random_state=self.random_state,
                                     n_jobs=self.n_jobs)

    def _adapts(self, what):
        return self.factors in ("both", what)

    def fit(self, X, lengths=None, labels=None):
        """Fit the base HSMM by EM, then the walk variances left as None (module
        :mod:`structlearn.hsmm._adaptive_em`).

        Parameters
        ----------
        X : array-like of float64, shape (N, F)
            Packed observations (NaN = missing).
        lengths : array-like of int, shape (B,), optional
            Sequence lengths summing to N (default one sequence).
        labels : array-like of int, shape (N,), optional
            Known states (-1 = unknown) for the base EM.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            Bad hyper-parameters, X or lengths (the base model's checks); an emission family the
            emission factor cannot scale while it adapts.
        """
        self._validate_hyper()
        base = self._base().fit(X, lengths, labels)
        shards = data_blocks(base._shard_from_data(X, lengths))
        return self._fit_walks(base, lambda f, p: map_shards(f, p, shards, self.n_jobs))

    def partial_fit(self, X, lengths=None, kappa=0.7):
        """One step of online estimation on a chunk of a stream: the base HSMM's stepwise EM
        (:meth:`HiddenSemiMarkovModel.partial_fit <structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel.partial_fit>`),
        then the walk variances left as None moved towards the chunk's estimate with the same step:
        q ← (1 - ρ_k) q + ρ_k q̂(chunk), ρ_k = (k + 2)^(-κ), q̂ the maximum-likelihood variance of the
        local-level model on the chunk's Viterbi segments under the updated base model (as :meth:`fit`
        estimates it on all data); the first chunk sets q = q̂.

        Parameters
        ----------
        X : array-like of float64, shape (N, F)
            The chunk (NaN = missing).
        lengths : array-like of int, shape (B,), optional
        kappa : float, default 0.7
            Step-size exponent κ ∈ (0.5, 1].

        Returns
        -------
        self
            With ``n_chunks_seen_`` and ``chunk_log_likelihood_`` (of the base model, before the update).

        Raises
        ------
        ValueError
            Those of the base model's ``partial_fit``; an emission family the emission factor cannot scale
            while it adapts. The estimator is unchanged after an error.

        Notes
        -----
        Cost per call: the base model's E-step of the chunk and one Viterbi pass over it; memory
        independent of the length of the stream.
        """
        import copy

        from ..learning.stepwise import step_size
        self._validate_hyper()
        base = copy.deepcopy(self.hsmm_) if hasattr(self, "hsmm_") else self._base()
        base.partial_fit(X, lengths, kappa=kappa)
        k = base.n_chunks_seen_ - 1
        todo = tuple(w for w in ("duration", "emission")
                     if self._adapts(w) and getattr(self, f"{w}_walk_var") is None)
        estimate = {}
        if todo:
            shard = base._shard_from_data(X, lengths)
            total = map_shards(_learn.shard_measurements,
                               (base, base._potentials().log_pmf(), self.censoring, todo), [shard])
            for what in todo:
                estimate[what] = _learn.estimate_walk_variance(_learn.gather_measurements(total, what))
        rho = step_size(k, float(kappa))
        previous = {w: getattr(self, f"{w}_walk_var_", None) for w in todo}
        self._fit_walks(base, None, walks={
            w: q if previous[w] is None or k == 0 else (1.0 - rho) * previous[w] + rho * q
            for w, q in estimate.items()})
        self.n_chunks_seen_ = base.n_chunks_seen_
        self.chunk_log_likelihood_ = base.chunk_log_likelihood_
        return self

    def _fit_sharded(self, map_statistics, init_data, max_length, n_features, X=None):
        """The base HSMM by its sharded EM (:meth:`HiddenSemiMarkovModel._fit_sharded
        <structlearn.hsmm.explicit_duration.HiddenSemiMarkovModel>`), then the walk variances from measurements
        computed shard by shard: the hook of :func:`structlearn.distributed.fit` (``map_statistics(function,
        params)`` maps over the persisted shards; ``X`` None there). Returns self."""
        base = self._base()
        base._fit_sharded(map_statistics, init_data, max_length, n_features, X)
        return self._fit_walks(base, map_statistics)

    def _shard_from_data(self, X, lengths=None, labels=None):
        """The validated :class:`~structlearn.learning.shards.Shard` of ``X``, ``lengths`` and partial
        ``labels`` (the base HSMM's, as ``fit``)."""
        return self._base()._shard_from_data(X, lengths, labels)

    def _shard_function(self, posteriors=True):
        """The base HSMM's per-shard E-step at its fitted parameters (what one EM iteration of
        :func:`structlearn.distributed.fit` sends and receives; :func:`structlearn.distributed.shard_bytes`)."""
        check_is_fitted(self, "hsmm_")
        return self.hsmm_._shard_function(posteriors)

    def _fit_walks(self, base, map_statistics, walks=None):
        """Set ``hsmm_`` and the walk variances left as None: maximum likelihood of the local-level model
        (:func:`~structlearn.hsmm._adaptive_em.estimate_walk_variance`) on the measurements of the
        Viterbi segments of the base model, computed per shard
        (:func:`~structlearn.hsmm._adaptive_em.shard_measurements` through ``map_statistics``) and
        gathered here (``walks``: those variances already estimated, by ``partial_fit``). Returns self."""
        self.hsmm_ = base
        self.max_duration_ = base.max_duration_
        self.n_features_in_ = base.n_features_in_
        todo = tuple(w for w in ("duration", "emission")
                     if self._adapts(w) and getattr(self, f"{w}_walk_var") is None)
        total = None
        if walks is not None:
            for what, q in walks.items():
                setattr(self, f"{what}_walk_var_", float(q))
            todo = ()
        if todo:
            total = map_statistics(_learn.shard_measurements,
                                   (base, base._potentials().log_pmf(), self.censoring, todo))
        for what in ("duration", "emission"):
            if not self._adapts(what):
                q = 0.0
            elif walks is not None and what in walks:
                continue
            elif what in todo:
                q = _learn.estimate_walk_variance(_learn.gather_measurements(total, what))
            else:
                q = float(getattr(self, f"{what}_walk_var"))
            setattr(self, f"{what}_walk_var_", q)
        return self

    # ================================================================================================
    def online_filter(self):
        """A fresh :class:`~structlearn.hsmm._adaptive_factor.AdaptiveFactorFilter` (``update(x)`` one
        row at a time; ``run(X)`` a whole sequence) with the fitted parameters."""
        check_is_fitted(self, "hsmm_")
        base = self.hsmm_
        return _af.AdaptiveFactorFilter(base.startprob_, base.transmat_, base._potentials().log_pmf(),
                                        base.emission_, self.censoring, self.duration_walk_var_,
                                        self.emission_walk_var_, self.factored)

    def _check_data(self, X, lengths):
        check_is_fitted(self, "hsmm_")
        X = _emi.check_observations(self.hsmm_.emission_, X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features but the model was fitted with "
                             f"{self.n_features_in_}")
        lengths, offsets = check_lengths(lengths, X.shape[0], rows_name="the observations `X`")
        return X, lengths, offsets

    def filter(self, X, lengths=None):
        """Filtered state probabilities and the factor tracks, each sequence from factors 1.

        Parameters
        ----------
        X : array-like of float64, shape (N, F)
        lengths : array-like of int, shape (B,), optional

        Returns
        -------
        AdaptiveFiltered
            ``state`` (N, K) P(S_t = j | o_1:t), ``end`` (N, K) P(a j-segment ends at t | o_1:t),
            ``log_likelihood`` (N,) log P(o_1:t) of its sequence under the adaptive model (the sum of
            the one-step predictive log-likelihoods), ``duration_factor`` and ``emission_factor`` (N,)
            κ and η after the update at t; float64.

        Raises
        ------
        ValueError
            X or lengths invalid for the fitted model; a sequence with zero likelihood (as
            :meth:`predict`), or whose ``state`` rows do not sum to one within 1e-9 (the factors
            diverged on extreme data), named; ``NotFittedError`` before :meth:`fit`.

        Time per row: see the class Notes.
        """
        X, lengths, offsets = self._check_data(X, lengths)
        filt = self.online_filter()
        parts = [filt.run(X[offsets[b]:offsets[b + 1]]) for b in range(len(lengths))]
        out = AdaptiveFiltered(*(np.concatenate(a) for a in zip(*parts)))
        diverged = np.flatnonzero(~np.isfinite(out.duration_factor) | ~np.isfinite(out.emission_factor))
        if diverged.size:
            n = int(diverged[0])
            b = int(np.searchsorted(offsets, n, side="right") - 1)
            raise ValueError(f"cannot compute the filtered probabilities: sequence {b} (rows {offsets[b]}:"
                             f"{offsets[b + 1]}): the adaptive factors diverged at row {n} (κ = "
                             f"{out.duration_factor[n]}, η = {out.emission_factor[n]}; expected finite), "
                             f"on observations too extreme for the factor updates")
        last = np.array([p.log_likelihood[-1] if p.log_likelihood.size else 0.0 for p in parts])
        check_posteriors(out.state, offsets, last, "the filtered probabilities")
        return out

    def sample(self, n_samples=1, random_state=None, n_sequences=None):
        """Draw one sequence of ``n_samples`` rows from the adaptive generative process, or several.

        Segment n draws its state from π (first) or a_ij, then its factors: log κ_n = log κ_(n-1) + ε,
        log η_n = log η_(n-1) + ε' (ε ~ N(0, ``duration_walk_var_``), ε' ~ N(0, ``emission_walk_var_``), the
        factors the model adapts; κ_0 = η_0 = 1 for the first segment), its duration from the base law
        stretched by κ_n (:func:`~structlearn.hsmm._adaptive_factor.stretched_log_pmf`) and its rows from
        the emission with its location scaled by η_n. The last segment is cut at ``n_samples``.

        With ``n_sequences`` (an int) that many sequences from the same random stream (the first is the
        sequence of ``n_sequences=None``; each starts afresh with κ_0 = η_0 = 1), one after the other
        (``fit(X, lengths)``'s layout), and their ``lengths`` (n_sequences,) int64 last.

        Returns
        -------
        X : ndarray of float64, shape (n_samples, F)
        states : ndarray of int64, shape (n_samples,)
        duration_factor, emission_factor : ndarray of float64, shape (n_samples,)
            κ and η of every row's segment.
        lengths : ndarray of int64, shape (n_sequences,)
            Only when ``n_sequences`` is given.

        Raises
        ------
        ValueError
            ``n_samples`` or ``n_sequences`` not a positive integer; ``NotFittedError`` before
            :meth:`fit`.

        Time O(n_samples · F + segments · D·K).
        """
        from sklearn.utils import check_random_state
        check_is_fitted(self, "hsmm_")
        if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
            raise ValueError(f"`n_samples` must be a positive integer; got {n_samples!r}")
        rng = check_random_state(random_state)
        base = self.hsmm_
        lp = base._potentials().log_pmf()
        D, K = lp.shape
        sd_k = np.sqrt(self.duration_walk_var_) if self._adapts("duration") else 0.0
        sd_e = np.sqrt(self.emission_walk_var_) if self._adapts("emission") else 0.0

        def draw():
            parts, states, kap, eta = [], [], [], []
            log_k = log_e = 0.0
            t, k = 0, None
            while t < n_samples:
                if k is None:
                    k = int(rng.choice(K, p=base.startprob_))
                else:
                    row = base.transmat_[k]
                    k = int(rng.choice(K, p=row / row.sum()))
                    log_k += sd_k * rng.standard_normal()
                    log_e += sd_e * rng.standard_normal()
                p = np.exp(_af.stretched_log_pmf(lp, float(np.exp(log_k)))[:, k])
                d = min(int(rng.choice(D, p=p / p.sum())) + 1, n_samples - t)
                em = _af.scaled_emission(base.emission_, float(np.exp(log_e))) if sd_e > 0 else base.emission_
                parts.append(np.asarray(em.sample(np.full(d, k), rng), dtype=np.float64).reshape(d, -1))
                states.append(np.full(d, k, dtype=np.int64))
                kap.append(np.full(d, np.exp(log_k)))
                eta.append(np.full(d, np.exp(log_e)))
                t += d
            return np.concatenate(parts), np.concatenate(states), np.concatenate(kap), np.concatenate(eta)

        return sample_sequences(draw, n_sequences, 4)

    def predict(self, X, lengths=None):
        """Online state estimates: argmax_j P(S_t = j | o_1:t), int64 (N,)."""
        return np.argmax(self.filter(X, lengths).state, axis=1).astype(np.int64)

    def score_per_sequence(self, X, lengths=None):
        """log P(o_1:T) of each sequence under the adaptive model (the one-step predictive
        log-likelihoods summed), (B,) float64."""
        X, lengths, offsets = self._check_data(X, lengths)
        ll = self.filter(X, lengths).log_likelihood
        return ll[offsets[1:] - 1]

    def score(self, X, lengths=None):
        """Σ over sequences of :meth:`score_per_sequence`, float."""
        return float(self.score_per_sequence(X, lengths).sum())

    # ================================================================================================
    @save_doc
    def save(self, path):
        """{save}"""
        from ..utils.modelfile import save_model

        check_is_fitted(self, "hsmm_")
        base = self.hsmm_
        params, meta, family_arrays = families_to_file(self, base.duration_, base.emission_)
        meta.update({"max_duration_": int(self.max_duration_), "n_features_in_": int(self.n_features_in_),
                     "duration_walk_var_": self.duration_walk_var_, "emission_walk_var_": self.emission_walk_var_})
        save_model(path, format_name=_FORMAT, version=_FORMAT_VERSION,
                   estimator="structlearn.AdaptiveFactorHSMM", params=params, metadata=meta,
                   arrays={"startprob_": base.startprob_, "transmat_": base.transmat_, **family_arrays})

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save` (families looked up by name; runs no code from the file).

        Raises
        ------
        ModelFileError
            Not a file of this format, or a header naming no structlearn family.
        """
        from ..utils.modelfile import load_model

        header, arrays = load_model(path, expected_format=_FORMAT, supported_version=_FORMAT_VERSION)
        meta = header["metadata"]
        params, fam = families_from_header(path, header, arrays)
        model = cls(**params)
        base = model._base()
        base.duration_, base.emission_ = fam["duration"], fam["emission"]
        base.startprob_ = np.asarray(arrays["startprob_"], dtype=np.float64)
        base.transmat_ = np.asarray(arrays["transmat_"], dtype=np.float64)
        base.max_duration_ = model.max_duration_ = int(meta["max_duration_"])
        base.n_features_in_ = model.n_features_in_ = int(meta["n_features_in_"])
        base._check_params()
        model.hsmm_ = base
        model.duration_walk_var_ = float(meta["duration_walk_var_"])
        model.emission_walk_var_ = float(meta["emission_walk_var_"])
        return model
