"""The parameter layout of the linear-chain CRF: where each weight lives in ``w`` and the transition
potentials it gives, with NumPy only.

:class:`ChainLayout` is the part of :class:`~structlearn.crf._potentials.ChainFeatureModel` that needs no
kernel: the ahead-of-time compiled tag path (:mod:`structlearn.io.chain_tagger`) decodes with it without
importing Numba, and the feature model adds the potentials and gradients on top.

Parameter layout of ``w`` (float64, length ``n_params``)::

    w[:F]                 state features (attribute, label), grouped by attribute
    w[F:F+K²]             transitions "from, to" (row-major)
    w[F+K²:F+K²+K]        start (label of the first token)
    w[F+K²+K:F+K²+2K]     end (label of the last token)
    w[F+K²+2K:]           transition attributes (Ta, K, K): x_{t+1,a} · W[a, y_t, y_{t+1}] (optional)

Transitions without a feature (never observed in training, unless ``all_possible_transitions``) keep
weight 0; so do the start and end weights of a model without them (``start_end=False``: CRFsuite's crf1d
model, whose score is state plus transition weights only); forbidden transitions/starts/ends (user
constraints such as BIO ``O -> I-X``) are -inf potentials in training and decoding.
"""
import numpy as np

from ..utils.validation import check_feature_index, check_shapes

__all__ = ["ChainLayout"]


def first_dim(array, doc=None):
    """A read-only property: the length of the instance's attribute ``array`` along its first axis.

    Parameters
    ----------
    array : str
        Name of the attribute (a NumPy array) whose ``shape[0]`` the property returns.
    doc : str, optional
        The property's docstring.

    Returns
    -------
    property
    """
    return property(lambda self: getattr(self, array).shape[0], doc=doc)


def forwarded(inner, *names):
    """Read-only properties that return the attributes ``names`` of the instance's attribute ``inner``.

    Parameters
    ----------
    inner : str
        Name of the attribute (for instance a packed batch) that holds the values.
    *names : str
        The attributes to forward, in order.

    Returns
    -------
    tuple of property
        One property per name, to unpack in the class body: ``lengths, offsets = forwarded("packed",
        "lengths", "offsets")``.
    """
    return tuple(property(lambda self, name=name: getattr(getattr(self, inner), name)) for name in names)


class ChainLayout:
    """The weight layout and transition potentials of a linear-chain CRF (NumPy only).

    Parameters
    ----------
    attr_ptr : ndarray of int64, shape (A + 1,)
    feat_label : ndarray of int64, shape (F,)
    n_labels : int
        K.
    trans_features : ndarray of bool, shape (K, K)
        Which transitions are parameters (others keep weight 0).
    forbidden : ndarray of bool, shape (K, K), optional
        Transitions with potential -inf.
    forbidden_start, forbidden_end : ndarray of bool, shape (K,), optional
        Labels that may not start / end a sequence.
    start_end : bool, default True
        Whether the start and end weights are parameters. ``False`` is CRFsuite's model (crf1d has no
        boundary features): the slots stay in ``w`` with weight 0, so the layout does not change.
    trans_attr : ndarray of int64, shape (Ta,), optional
        Attribute ids whose value at token t+1 scales a label-pair weight ``W[a, y_t, y_{t+1}]``: the
        observation-conditioned transition features t(y', y, x, i) of Sutton & McCallum (2012, §2.6,
        the seed's transition scores). The chain then gets time-varying transitions (N, K, K).
    """

    def __init__(self, attr_ptr, feat_label, n_labels, trans_features, forbidden=None,
                 forbidden_start=None, forbidden_end=None, start_end=True, trans_attr=None):
        K = int(n_labels)
        self.start_end = bool(start_end)
        self.trans_attr = np.ascontiguousarray(np.zeros(0, np.int64) if trans_attr is None else trans_attr,
                                               dtype=np.int64)
        self.attr_ptr = np.ascontiguousarray(attr_ptr, dtype=np.int64)
        self.feat_label = np.ascontiguousarray(feat_label, dtype=np.int64)
        self.n_labels = K
        self.trans_features = np.asarray(trans_features, bool)
        self.forbidden = np.zeros((K, K), bool) if forbidden is None else np.asarray(forbidden, bool)
        self.forbidden_start = (np.zeros(K, bool) if forbidden_start is None
                                else np.asarray(forbidden_start, bool))
        self.forbidden_end = (np.zeros(K, bool) if forbidden_end is None
                              else np.asarray(forbidden_end, bool))
        self.trans_features &= ~self.forbidden

    def check(self):
        """Check the index arrays against each other (a model read from a file): returns ``self``.

        Raises
        ------
        ValueError
            ``attr_ptr`` does not rise from 0 to F, a ``feat_label`` outside [0, K), a transition attribute
            outside [0, A), or a mask of the wrong shape: the kernels would read or write outside their
            arrays.
        """
        K, A = self.n_labels, self.attr_ptr.size - 1
        check_feature_index(self.attr_ptr, self.feat_label, K)
        check_shapes(vars(self), {"trans_features": (K, K), "forbidden": (K, K), "forbidden_start": (K,),
                                  "forbidden_end": (K,)})
        ta = self.trans_attr
        if ta.ndim != 1 or (ta.size and (ta.min() < 0 or ta.max() >= A)):
            raise ValueError(f"'trans_attr' must hold attribute ids in [0, {A}); got values from "
                             f"{ta.min(initial=0)} to {ta.max(initial=0)}")
        return self

    n_state = first_dim("feat_label", "Number of state features F.")

    @property
    def n_params(self):
        return self.n_state + self.n_labels ** 2 + 2 * self.n_labels + self.n_trans_attr * self.n_labels ** 2

    n_trans_attr = first_dim("trans_attr", "Number of transition attributes Ta.")

    def split_trans_attr(self, w):
        """View (Ta, K, K) of the transition-attribute weights in ``w``."""
        K, base = self.n_labels, self.n_state + self.n_labels ** 2 + 2 * self.n_labels
        return w[base:].reshape(self.n_trans_attr, K, K)

    def split(self, w):
        """Views (state (F,), trans (K, K), start (K,), end (K,)) into ``w``."""
        F, K = self.n_state, self.n_labels
        return (w[:F], w[F:F + K * K].reshape(K, K), w[F + K * K:F + K * K + K],
                w[F + K * K + K:F + K * K + 2 * K])

    def free_mask(self):
        """Boolean (n_params,): which weights are parameters (others stay 0)."""
        m = np.ones(self.n_params, bool)
        _, tr, st, en = self.split(m)
        tr[...] = self.trans_features
        st[...] = ~self.forbidden_start & self.start_end
        en[...] = ~self.forbidden_end & self.start_end
        self.split_trans_attr(m)[...] = ~self.forbidden
        return m

    def index_in(self, grown):
        """Positions in ``grown``'s parameter vector of this model's parameters, int64 (n_params,).

        ``grown`` is this model after its vocabulary, labels and features grew (a stream,
        ``LinearChainCRF.partial_fit``): attribute ids and labels 0..K-1 keep their meaning, every
        state feature (attribute, label) is still there. ValueError otherwise (and with transition
        attributes, which do not grow).
        """
        K, K2 = self.n_labels, grown.n_labels
        A, A2 = len(self.attr_ptr) - 1, len(grown.attr_ptr) - 1
        if K2 < K or A2 < A or self.n_trans_attr or grown.n_trans_attr:
            raise ValueError(f"the model ({A} attributes, {K} labels) is not contained in the grown one "
                             f"({A2} attributes, {K2} labels, or transition attributes)")
        keys = np.repeat(np.arange(A, dtype=np.int64), np.diff(self.attr_ptr)) * K2 + self.feat_label
        keys2 = np.repeat(np.arange(A2, dtype=np.int64), np.diff(grown.attr_ptr)) * K2 + grown.feat_label
        order = np.argsort(keys2, kind="stable")
        at = np.minimum(np.searchsorted(keys2[order], keys), max(keys2.size - 1, 0))
        if keys.size and (keys2.size == 0 or not np.array_equal(keys2[order[at]], keys)):
            raise ValueError("a state feature of the model is missing from the grown model")
        state = order[at] if keys.size else np.zeros(0, np.int64)
        F2 = grown.n_state
        i, j = np.divmod(np.arange(K * K, dtype=np.int64), K)
        labels = np.arange(K, dtype=np.int64)
        return np.concatenate([state, F2 + i * K2 + j, F2 + K2 * K2 + labels,
                               F2 + K2 * K2 + K2 + labels]).astype(np.int64)

    def transition_potentials(self, w):
        """(trans (K, K), start (K,), end (K,)) log-potentials with forbidden entries -inf."""
        _, tr, st, en = self.split(w)
        tr = np.where(self.trans_features, tr, 0.0)
        tr[self.forbidden] = -np.inf
        if not self.start_end:
            st, en = np.zeros_like(st), np.zeros_like(en)
        st = np.where(self.forbidden_start, -np.inf, st)
        en = np.where(self.forbidden_end, -np.inf, en)
        return tr, st, en
