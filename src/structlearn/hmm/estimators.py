"""Hidden Markov models with hmmlearn's surface (``GaussianHMM``, ``GMMHMM``, ``CategoricalHMM``,
``MultinomialHMM``, ``PoissonHMM``) and a generic :class:`HiddenMarkovModel` over any emission family.

Every class is :class:`structlearn.hmm._base.HMMBase` — exact inference on
:class:`structlearn.engine.structures.LinearChain`, Baum–Welch through :func:`structlearn.learning.em.run_em` —
with one emission object in ``emission_``: the hmmlearn-shaped families of
:mod:`structlearn.distributions.emissions.hmm` (parameters, priors, initialisation and M-step as hmmlearn 0.3)
or, for :class:`HiddenMarkovModel`, any family of :mod:`structlearn.distributions.emissions` (or an object
with the emission protocol). The hmmlearn attributes (``means_``, ``covars_``, ``emissionprob_``,
``lambdas_``, ``weights_``) are views of that object's arrays.

Constructor arguments, attributes and methods are hmmlearn's (``fit(X, lengths)``, ``score``,
``score_samples``, ``decode``, ``predict``, ``predict_proba``, ``sample(n_samples, random_state,
currstate)``, ``get_stationary_distribution``, ``aic``, ``bic``, ``monitor_``). Beyond hmmlearn: all-NaN
rows are missing observations, ``n_jobs`` runs the E-step over blocks of sequences with joblib,
``startprob="stationary"`` ties π to the stationary distribution of A, zeros of π and A are kept by EM
(fixed topologies, e.g. left-right), ``n_init`` restarts, and ``save``/``load`` in the versioned
model-file format. Deliberate differences from hmmlearn: ``fit`` never changes constructor arguments
(the fitted alphabet of ``CategoricalHMM`` is ``n_features_``), ``implementation`` is accepted but every
computation runs on the same exact engine. EM runs hmmlearn's loop (the parameters after the last M-step;
``monitor_`` with hmmlearn's ``iter``, ``history`` and ``converged``); ``converged_`` says whether the gain
fell below ``tol`` (False, with a ``ConvergenceWarning``, when ``n_iter`` ran out first).
"""
import numpy as np

from ..learning import initialisation as _labels
from ..learning.shards import document_blocks
from ..distributions import emissions as _emi
from ..distributions.emissions import hmm as _hemi
from ._base import EmissionView, HMMBase, stationary_distribution

__all__ = ["GaussianHMM", "GMMHMM", "CategoricalHMM", "MultinomialHMM", "PoissonHMM", "HiddenMarkovModel"]

_COMMON_DOC = """
    startprob_prior : float or array-like, shape (n_components,), default 1.0
        Dirichlet prior of ``startprob_`` (1.0: none): π_j ∝ max(α_j − 1 + E[#starts in j], 0).
    transmat_prior : float or array-like, shape (n_components, n_components), default 1.0
        Dirichlet prior of every row of ``transmat_``: a_ij ∝ max(α_ij − 1 + E[#i → j], 0).
    algorithm : {"viterbi", "map"}, default "viterbi"
        Decoder of :meth:`decode` / :meth:`predict`.
    random_state : None, int or numpy.random.RandomState
        Seeds the initialisation (with an int, hmmlearn's draws: the same initial parameters as
        hmmlearn) and the default of :meth:`sample`.
    n_iter : int
        Maximum number of EM iterations per restart.
    tol : float
        Convergence threshold on the log-likelihood gain (summed over sequences).
    verbose : bool, default False
        Print iteration, log-likelihood and gain to stderr (hmmlearn's format).
    params, init_params : str
        Letters of the parameters EM updates / ``fit`` initialises: ``s`` startprob, ``t`` transmat and
        the emission letters above. A parameter not in ``init_params`` keeps the value set before
        ``fit`` (it is initialised when not set).
    implementation : {"log", "scaling"}, default "log"
        Accepted for hmmlearn compatibility; both run the same exact engine.
    n_init : int, default 1
        EM restarts (the first from ``random_state``, later ones from seeds drawn from it); the fit
        with the highest log-likelihood is kept.
    startprob : {"free", "stationary"}, default "free"
        ``"stationary"``: π is the stationary distribution of A (``startprob_`` follows ``transmat_``;
        ``s`` is ignored) and the M-step of A is a generalised EM step (never decreases the objective).
    n_jobs : int, optional
        Run the E-step (emission densities and forward–backward) over ``n_jobs`` blocks of sequences
        in parallel with joblib (-1: all cores). The default runs them in this process (the chain
        kernels are already parallel over sequences with Numba threads).
        {blocks}"""

_ATTR_DOC = """
    startprob_ : ndarray of float64, shape (n_components,)
    transmat_ : ndarray of float64, shape (n_components, n_components)
        a_ij, "from i to j"; rows sum to one.
    emission_ : emission object
        The emission family holding the parameters below.
    monitor_ : ConvergenceMonitor
        hmmlearn's: ``history`` (the log-likelihood before each M-step), ``iter`` (the number of
        M-steps), ``converged`` (``n_iter`` ran out or the last gain is below ``tol``).
    converged_ : bool
        Whether the last gain fell below ``tol``.
    log_likelihood_ : float
        Log-likelihood of the training data at the fitted parameters (after the last M-step).
    n_features_in_ : int"""

_NOTES_DOC = """
    Notes
    -----
    Inference runs on :class:`~structlearn.engine.structures.LinearChain` with unary log b_j(x_t),
    transitions log a_ij and start log π_j: forward–backward and Viterbi in time O(N·K²), memory
    O(N·K) (Rabiner 1989, "A tutorial on hidden Markov models", §III). EM is Baum–Welch (Rabiner 1989
    eqs. 40, 52–54) with hmmlearn's MAP updates; missing (all-NaN) rows have emission density 1."""


def _doc(cls):
    cls.__doc__ = (cls.__doc__.replace("    {common}", _COMMON_DOC.strip("\n"))
                   .replace("    {attributes}", _ATTR_DOC.strip("\n")).replace("    {notes}", _NOTES_DOC.strip("\n")))
    return document_blocks(cls)


def _n_features_of(model):
    em = model.__dict__.get("emission_")
    n = None if em is None else em.n_features
    if n is None:
        raise AttributeError(f"{type(model).__name__!r} object has no attribute 'n_features' (not fitted)")
    return n


# ======================================================================================================
@_doc
class GaussianHMM(HMMBase):
    """Hidden Markov model with Gaussian emissions (hmmlearn's ``GaussianHMM``).

    Emission letters: ``m`` means, ``c`` covariances. Defaults ``n_iter=10``, ``tol=1e-2``,
    ``params=init_params="stmc"`` (hmmlearn's).

    Parameters
    ----------
    n_components : int, default 1
        Number of states K.
    covariance_type : {"spherical", "diag", "full", "tied"}, default "diag"
    min_covar : float, default 1e-3
        Added to the diagonal of the data covariance that initialises ``covars_``.
    means_prior, means_weight : float or array, default 0, 0
        Normal prior of the means (mean, precision scale); arrays broadcast to (K, F).
    covars_prior, covars_weight : float or array, default 1e-2, 1
        Inverse-gamma (spherical, diag) or inverse-Wishart (full, tied) prior of the covariances
        (hmmlearn's default adds 1e-2 to every scatter, see
        :class:`~structlearn.distributions.emissions.hmm.GaussianHMMEmission`).
    {common}

    Attributes
    ----------
    means_ : ndarray of float64, shape (n_components, n_features)
    covars_ : ndarray of float64, shape (n_components, n_features, n_features)
        Covariance matrices (as hmmlearn returns them). Set it in the compact form of
        ``covariance_type``: (K,) spherical, (K, F) diag, (K, F, F) full, (F, F) tied.
    n_features : int
    {attributes}

    {notes}

    Examples
    --------
    >>> import numpy as np
    >>> from structlearn.hmm import GaussianHMM
    >>> X = np.r_[np.zeros(50), np.full(50, 5.0)][:, None] + np.tile([0.1, -0.1], 50)[:, None]
    >>> model = GaussianHMM(2, random_state=0).fit(X)
    >>> np.sort(model.means_.ravel()).round(2).tolist()
    [0.0, 5.0]
    """

    _format = "gaussian-hmm"
    means_ = EmissionView("means", doc="Means, (n_components, n_features).")
    covars_ = EmissionView("covars", get=lambda em: em.full_covars(),
                           doc="Covariance matrices (n_components, n_features, n_features).")
    _covars_ = EmissionView("covars", doc="Covariances in the compact form of ``covariance_type``.")

    def __init__(self, n_components=1, covariance_type="diag", min_covar=1e-3, startprob_prior=1.0,
                 transmat_prior=1.0, means_prior=0, means_weight=0, covars_prior=1e-2, covars_weight=1,
                 algorithm="viterbi", random_state=None, n_iter=10, tol=1e-2, verbose=False, params="stmc",
                 init_params="stmc", implementation="log", n_init=1, startprob="free", n_jobs=None):
        self._store_params(locals())

    n_features = property(_n_features_of, doc="Number of features F (from the means).")

    def _new_emission(self):
        em = _hemi.GaussianHMMEmission(self.covariance_type, min_covar=self.min_covar,
                                        means_prior=self.means_prior, means_weight=self.means_weight,
                                        covars_prior=self.covars_prior, covars_weight=self.covars_weight)
        em.suffix = "_"
        return em


@_doc
class GMMHMM(HMMBase):
    """Hidden Markov model with Gaussian-mixture emissions (hmmlearn's ``GMMHMM``).

    Emission letters: ``m`` means, ``c`` covariances, ``w`` weights; defaults
    ``params=init_params="stmcw"``, ``n_iter=10``, ``tol=1e-2``.

    Parameters
    ----------
    n_components : int, default 1
        Number of states K.
    n_mix : int, default 1
        Mixture components per state M.
    min_covar : float, default 1e-3
        Added to the diagonal of the data covariance that initialises ``covars_``.
    weights_prior : float or array (K, M), default 1.0
        Dirichlet prior of the mixture weights.
    means_prior, means_weight : default 0.0, 0.0
        Normal prior of the component means.
    covars_prior, covars_weight : default None
        Inverse-gamma / inverse-Wishart prior; ``None``: hmmlearn's defaults (maximum likelihood).
    covariance_type : {"spherical", "diag", "full", "tied"}, default "diag"
        "tied": the components of a state share one full covariance.
    {common}

    Attributes
    ----------
    weights_ : ndarray, shape (n_components, n_mix)
    means_ : ndarray, shape (n_components, n_mix, n_features)
    covars_ : ndarray
        (K, M) spherical, (K, M, F) diag, (K, M, F, F) full, (K, F, F) tied.
    n_features : int
    {attributes}

    {notes} The mixture update is :class:`~structlearn.distributions.emissions.hmm.GMMHMMEmission`'s.
    """

    _format = "gmm-hmm"
    weights_ = EmissionView("weights", doc="Mixture weights (n_components, n_mix).")
    means_ = EmissionView("means", doc="Component means (n_components, n_mix, n_features).")
    covars_ = EmissionView("covars", doc="Component covariances in the form of ``covariance_type``.")

    def __init__(self, n_components=1, n_mix=1, min_covar=1e-3, startprob_prior=1.0, transmat_prior=1.0,
                 weights_prior=1.0, means_prior=0.0, means_weight=0.0, covars_prior=None, covars_weight=None,
                 algorithm="viterbi", covariance_type="diag", random_state=None, n_iter=10, tol=1e-2,
                 verbose=False, params="stmcw", init_params="stmcw", implementation="log", n_init=1,
                 startprob="free", n_jobs=None):
        self._store_params(locals())

    n_features = property(_n_features_of, doc="Number of features F (from the means).")

    def _new_emission(self):
        em = _hemi.GMMHMMEmission(self.n_mix, self.covariance_type, min_covar=self.min_covar,
                                   weights_prior=self.weights_prior, means_prior=self.means_prior,
                                   means_weight=self.means_weight, covars_prior=self.covars_prior,
                                   covars_weight=self.covars_weight)
        em.suffix = "_"
        return em


@_doc
class CategoricalHMM(HMMBase):
    """Hidden Markov model with categorical (discrete symbol) emissions (hmmlearn's ``CategoricalHMM``).

    X has shape (n_samples, 1): symbols 0..V−1 as whole numbers (NaN rows missing), or one-hot rows of
    shape (n_samples, V), V >= 2 (hmmlearn's ``MultinomialHMM(n_trials=1)`` encoding: a single 1 per
    row, at the symbol's column), with the same numbers as their symbols. One column is always read as
    symbols, several as one-hot rows (``ValueError`` for a row that is not one-hot, or for a number of
    columns other than ``n_features`` when it is known); without ``n_features`` the alphabet size is
    the number of columns. Samples are always symbols.

    Emission letter ``e``; defaults ``params=init_params="ste"``, ``n_iter=10``, ``tol=1e-2``.

    Parameters
    ----------
    n_components : int, default 1
        Number of states K.
    emissionprob_prior : float or array (K, V), default 1.0
        Dirichlet prior of every row of ``emissionprob_``.
    n_features : int, optional
        Alphabet size V; default the largest symbol in the training data + 1 (kept in
        ``n_features_``; the argument itself is never changed).
    {common}

    Attributes
    ----------
    emissionprob_ : ndarray, shape (n_components, n_features)
        P(symbol v | state j).
    n_features_ : int
        Alphabet size in use.
    {attributes}

    {notes}
    """

    _format = "categorical-hmm"
    emissionprob_ = EmissionView("emissionprob", doc="Symbol probabilities (n_components, n_features).")

    def __init__(self, n_components=1, startprob_prior=1.0, transmat_prior=1.0, *, emissionprob_prior=1.0,
                 n_features=None, algorithm="viterbi", random_state=None, n_iter=10, tol=1e-2, verbose=False,
                 params="ste", init_params="ste", implementation="log", n_init=1, startprob="free",
                 n_jobs=None):
        self._store_params(locals())

    n_features_ = property(_n_features_of, doc="Alphabet size V in use.")

    def _check_and_set_n_features(self, X):
        """Check that ``X`` holds symbols (non-negative integers) and return the alphabet size they need
        (hmmlearn's check; ``n_features`` itself is never changed). ``ValueError`` otherwise."""
        X = np.asarray(X)
        if not np.issubdtype(X.dtype, np.integer):
            raise ValueError(f"symbols must be integers; got dtype {X.dtype}")
        if X.size and X.min() < 0:
            raise ValueError(f"symbols must be non-negative; got {int(X.min())}")
        return max(int(X.max()) + 1 if X.size else 0, self.n_features or 0)

    def _new_emission(self):
        V = self.n_features
        if V is not None and (isinstance(V, bool) or not isinstance(V, (int, np.integer)) or V < 1):
            raise ValueError(f"`n_features` must be a positive integer or None; got {V!r}")
        em = _hemi.CategoricalHMMEmission(V, emissionprob_prior=self.emissionprob_prior)
        em.suffix = "_"
        return em


@_doc
class MultinomialHMM(HMMBase):
    """Hidden Markov model with multinomial count emissions (hmmlearn's ``MultinomialHMM``).

    Row t of X holds the counts of F categories in n_t draws: x_t ~ Multinomial(n_t, emissionprob_[z_t]).

    Emission letter ``e``; defaults ``params=init_params="ste"``, ``n_iter=10``, ``tol=1e-2``.

    Parameters
    ----------
    n_components : int, default 1
        Number of states K.
    n_trials : int or array-like of int, shape (n_samples,), optional
        Draws per row: one int for every row, or one count per row of X (hmmlearn's array; X must
        then have that many rows); when given every row must sum to it. Sampling needs one int (or
        training rows that all had the same total).
    {common}

    Attributes
    ----------
    emissionprob_ : ndarray, shape (n_components, n_features)
    n_features : int
    {attributes}

    {notes}
    """

    _format = "multinomial-hmm"
    emissionprob_ = EmissionView("emissionprob", doc="Category probabilities (n_components, n_features).")

    def __init__(self, n_components=1, n_trials=None, startprob_prior=1.0, transmat_prior=1.0,
                 algorithm="viterbi", random_state=None, n_iter=10, tol=1e-2, verbose=False, params="ste",
                 init_params="ste", implementation="log", n_init=1, startprob="free", n_jobs=None):
        self._store_params(locals())

    n_features = property(_n_features_of, doc="Number of categories F.")

    def _new_emission(self):
        if isinstance(self.n_trials, bool):
            raise ValueError(f"`n_trials` must be None, a non-negative integer or a 1-d array of them; got "
                             f"{self.n_trials!r}")
        em = _hemi.MultinomialHMMEmission(self.n_trials)
        em.suffix = "_"
        return em


@_doc
class PoissonHMM(HMMBase):
    """Hidden Markov model with independent Poisson count emissions (hmmlearn's ``PoissonHMM``).

    Emission letter ``l``; defaults ``params=init_params="stl"``, ``n_iter=10``, ``tol=1e-2``.

    Parameters
    ----------
    n_components : int, default 1
        Number of states K.
    lambdas_prior, lambdas_weight : float or array, default 0.0, 0.0
        Gamma prior (α, β) of the rates (hmmlearn's update, see
        :class:`~structlearn.distributions.emissions.hmm.PoissonHMMEmission`).
    {common}

    Attributes
    ----------
    lambdas_ : ndarray, shape (n_components, n_features)
        Poisson rates.
    n_features : int
    {attributes}

    {notes}
    """

    _format = "poisson-hmm"
    lambdas_ = EmissionView("lambdas", doc="Poisson rates (n_components, n_features).")

    def __init__(self, n_components=1, startprob_prior=1.0, transmat_prior=1.0, lambdas_prior=0.0,
                 lambdas_weight=0.0, algorithm="viterbi", random_state=None, n_iter=10, tol=1e-2,
                 verbose=False, params="stl", init_params="stl", implementation="log", n_init=1,
                 startprob="free", n_jobs=None):
        self._store_params(locals())

    n_features = property(_n_features_of, doc="Number of count features F.")

    def _new_emission(self):
        em = _hemi.PoissonHMMEmission(lambdas_prior=self.lambdas_prior, lambdas_weight=self.lambdas_weight)
        em.suffix = "_"
        return em


# ======================================================================================================
@_doc
class HiddenMarkovModel(HMMBase):
    """Hidden Markov model over any emission family (custom and multi-stream emissions included).

    Emission letter ``e``; defaults ``params=init_params="ste"``, ``n_iter=100``, ``tol=1e-4``. The
    initial π is uniform and A is estimated from the transitions of the initial labels (add-one
    smoothed); restarts after the first draw A's rows from a Dirichlet.

    Parameters
    ----------
    n_components : int, default 1
        Number of states K.
    emission : str or emission object, default "gaussian"
        A family name of :data:`structlearn.distributions.emissions.EMISSION_FAMILIES` (``"gaussian"``,
        ``"diag_gaussian"``, ``"multivariate_gaussian"``, ``"poisson"``, ``"categorical"``, ``"gmm"``),
        a family object (e.g. ``MultivariateGaussian("diag")``, ``Categorical(n_features=V)``, one of
        :mod:`structlearn.distributions.emissions.hmm`), or any object with the emission protocol
        (``log_density``, ``fit(X, weights)``, ``sample``, ``n_parameters``; ``initialize`` to be
        initialised from data). It is copied, never modified; its parameters are used when ``e`` is
        not in ``init_params``.
    {common}
    init : {"kmeans", "quantile", "random"}, default "kmeans"
        Initial state labels from which the emission object is initialised
        (:func:`structlearn.learning.initialisation.initial_labels`).

    Attributes
    ----------
    n_features : int
    {attributes}

    {notes} The emission M-step is the family's ``fit`` (weighted maximum likelihood; for
    :mod:`structlearn.distributions.emissions` families partly missing rows are marginalised where the family
    factorises over features).
    """

    _format = "hidden-markov-model"

    def __init__(self, n_components=1, emission="gaussian", startprob_prior=1.0, transmat_prior=1.0,
                 algorithm="viterbi", random_state=None, n_iter=100, tol=1e-4, verbose=False, params="ste",
                 init_params="ste", implementation="log", n_init=1, init="kmeans", startprob="free",
                 n_jobs=None):
        self._store_params(locals())

    @property
    def n_features(self):
        """Number of features F of the training data."""
        if not hasattr(self, "n_features_in_"):
            raise AttributeError("'HiddenMarkovModel' object has no attribute 'n_features' (not fitted)")
        return self.n_features_in_

    def _new_emission(self):
        return _emi.make_emission(self.emission)

    def _preset_emission(self):
        em = self._new_emission()
        if getattr(em, "n_states", None) is None:
            return super()._preset_emission()
        return em

    def _emission_letters(self):
        return "e"

    def _fit_emission(self, em, X, gamma):
        em.fit(X, gamma)  # every parameter of the family ("e")

    def _online_emission_params(self):
        return None  # "e": every parameter of the family

    def _validate_hyper(self):
        super()._validate_hyper()
        if self.init not in ("kmeans", "quantile", "random"):
            raise ValueError(f"`init` must be 'kmeans', 'quantile' or 'random'; got {self.init!r}")

    def _fresh_emission(self):
        import copy
        old = self.__dict__.get("emission_")
        if old is not None and "e" not in self.init_params:
            return copy.deepcopy(old)
        return self._new_emission()

    def _initialize(self, X, lengths, rng, restart):
        K = self.n_components
        em = self._fresh_emission()
        labels = None
        if "e" in self.init_params or getattr(em, "n_states", None) is None:
            if not hasattr(em, "initialize"):
                raise ValueError(f"the emission object {em!r} has no `initialize`; set its parameters and "
                                 f"leave 'e' out of `init_params`")
            labels = _labels.initial_labels(X, K, self.init, rng, restart)
            em.initialize(X, K, labels, rng)
        elif em.n_states != K:
            raise ValueError(f"'e' is not in `init_params` but the emission object has parameters for "
                             f"{em.n_states} states, not n_components={K}: {em!r}")
        self.emission_ = em
        if not hasattr(self, "startprob_"):
            self.startprob_ = np.full(K, 1.0 / K)
        if not hasattr(self, "transmat_"):
            self.transmat_ = (rng.dirichlet(np.full(K, 2.0), size=K) if restart
                              else _label_transitions(labels, lengths, K, em, X))
        if self.startprob == "stationary":
            self.startprob_ = stationary_distribution(self.transmat_)
        self._check()


def _label_transitions(labels, lengths, K, emission, X):
    """Add-one smoothed transition frequencies of initial labels (N,) (-1 = none; default the states
    of highest emission density), shape (K, K)."""
    if labels is None:
        labels = np.argmax(emission.log_density(X), axis=1)
    counts = np.ones((K, K))
    o = 0
    for T in lengths:
        lab = labels[o:o + T]
        o += T
        ok = (lab[:-1] >= 0) & (lab[1:] >= 0)
        np.add.at(counts, (lab[:-1][ok], lab[1:][ok]), 1.0)
    return counts / counts.sum(axis=1, keepdims=True)
