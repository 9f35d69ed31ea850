"""Attribute encoding and the CRF feature model: weights -> potentials, marginals -> gradient.

Items follow python-crfsuite / sklearn-crfsuite conventions:

- ``{"attr": 1.5}`` — attribute ``attr`` with value 1.5 (bool: True -> 1.0, False -> 0.0); NumPy scalars
  (``np.float32``, ``np.int64``, ``np.bool_``, ``np.str_``) behave as the Python ones;
- ``{"attr": "v"}`` — attribute ``"attr:v"`` with value 1.0 (python-crfsuite's spelling, so attribute
  names, ``state_features_`` keys and CRFsuite model files agree with python-crfsuite's); a ``bytes``
  value (or key) is UTF-8 text, as python-crfsuite takes it;
- ``{"prefix": {...}}`` / ``{"prefix": [..]}`` / ``{"prefix": {..set..}}`` — nested attributes named
  ``"prefix:name"``;
- ``["a", "b"]`` — attributes ``a`` and ``b`` with value 1.0 (a ``"name:value"`` string is taken as is);
- a ``scipy.sparse`` matrix (N, F) with ``lengths``: column f is attribute ``f``.

Packed items are CSR arrays: ``item_ptr`` (N + 1,), ``item_attr`` (nnz,) int64, ``item_val`` (nnz,)
float64. State features are (attribute, label) pairs grouped by attribute (``attr_ptr`` (A + 1,),
``feat_label`` (F,)), as in CRFsuite's crf1d feature set (Okazaki 2007).
"""
import numbers
import sys

import numpy as np


# ---------------------------------------------------------------------------------------------------
# attribute encoding
# ---------------------------------------------------------------------------------------------------
def _issparse(X):
    """Whether ``X`` is a scipy.sparse matrix or array, without importing SciPy: such an ``X`` exists only
    once scipy.sparse is imported (``structlearn tag`` encodes items without importing SciPy)."""
    sp = sys.modules.get("scipy.sparse")
    return sp is not None and sp.issparse(X)


def _text(value):
    """A str, np.str_ or UTF-8 bytes value as str, else None."""
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"a bytes attribute value must be UTF-8 text; {value!r} is not "
                             f"({exc.reason})") from None
    return None


def _flatten(prefix, value, out):
    """Append (name, value) pairs of a nested python-crfsuite attribute value."""
    t = type(value)
    text = _text(value)
    if text is not None:
        out.append((prefix + ":" + text, 1.0))
    elif t is bool or isinstance(value, np.bool_):
        out.append((prefix, 1.0 if value else 0.0))
    elif isinstance(value, (numbers.Real, np.number)) and not isinstance(value, np.complexfloating):
        out.append((prefix, float(value)))
    elif isinstance(value, dict):
        for k, v in value.items():
            _flatten(prefix + ":" + str(k), v, out)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            text = _text(v)
            if text is not None:
                out.append((prefix + ":" + text, 1.0))
            else:
                raise ValueError(f"attribute {prefix!r}: a list value must hold strings; got {v!r}")
    else:
        raise ValueError(f"attribute {prefix!r}: unsupported value {value!r} of type {t.__name__} "
                         f"(expected a str, bytes, real number, bool, dict or list of str)")


def item_attributes(item):
    """(name, value) pairs of one item (dict or list of attribute strings)."""
    out = []
    if type(item) is dict or isinstance(item, dict):
        for k, v in item.items():
            if type(k) is not str and isinstance(k, (str, bytes)):
                k = _text(k)
            t = type(v)
            if t is str and type(k) is str:
                out.append((k + ":" + v, 1.0))
            elif (t is float or t is int) and type(k) is str:
                out.append((k, float(v)))
            else:
                _flatten(str(k), v, out)
    elif isinstance(item, (list, tuple, set, frozenset)):
        for a in item:
            text = _text(a)
            if text is not None:
                out.append((text, 1.0))
            elif isinstance(a, tuple) and len(a) == 2:
                out.append((str(a[0]), float(a[1])))
            else:
                raise ValueError(f"an item given as a list must hold attribute strings; got {a!r}")
    elif isinstance(item, str):
        raise ValueError(f"an item must be a dict or a list of attribute strings, not a bare string "
                         f"({item!r}); wrap it: [{item!r}]")
    else:
        raise ValueError(f"an item must be a dict attribute -> value or a list of attribute strings; "
                         f"got {type(item).__name__}")
    return out


class Packed:
    """Packed items of a batch: CSR (item_ptr, item_attr, item_val) + lengths/offsets."""

    __slots__ = ("item_ptr", "item_attr", "item_val", "lengths", "offsets")

    def __init__(self, item_ptr, item_attr, item_val, lengths):
        self.item_ptr = item_ptr
        self.item_attr = item_attr
        self.item_val = item_val
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)

    @property
    def n_items(self):
        return self.item_ptr.shape[0] - 1

    def slice(self, b0, b1):
        """Packed items of the contiguous sequences b0..b1-1 (views of the arrays; O(1) copies)."""
        r0, r1 = int(self.offsets[b0]), int(self.offsets[b1])
        p0, p1 = int(self.item_ptr[r0]), int(self.item_ptr[r1])
        return Packed(self.item_ptr[r0:r1 + 1] - p0, self.item_attr[p0:p1], self.item_val[p0:p1],
                      self.lengths[b0:b1])

    def select(self, seqs):
        """Sub-batch of the given sequence indices (in that order)."""
        rows = [np.arange(self.offsets[b], self.offsets[b + 1]) for b in seqs]
        rows = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        starts, ends = self.item_ptr[rows], self.item_ptr[rows + 1]
        cnt = ends - starts
        ptr = np.concatenate([[0], np.cumsum(cnt)]).astype(np.int64)
        idx = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends)]) if rows.size else \
            np.zeros(0, np.int64)
        idx = idx.astype(np.int64)
        return Packed(ptr, self.item_attr[idx], self.item_val[idx], self.lengths[list(seqs)])


class AttributeVocabulary:
    """Maps attribute names to ids; grows while fitting, frozen afterwards (unknown names dropped)."""

    def __init__(self, names=()):
        names = list(names)
        index = dict(zip(names, range(len(names))))  # one C-level pass (a model file's 10⁵ attributes)
        if len(index) == len(names):
            self.index, self.names = index, names
            return
        self.index, self.names = {}, []  # repeated names: the first occurrence keeps its id, as add()
        for n in names:
            self.add(n)

    def add(self, name):
        i = self.index.get(name)
        if i is None:
            i = len(self.names)
            self.index[name] = i
            self.names.append(name)
        return i

    def __len__(self):
        return len(self.names)

    def encode(self, X, lengths=None, grow=False, name="X"):
        """Pack a batch of item sequences (or a sparse matrix + lengths) into :class:`Packed`."""
        if _issparse(X):
            return self._encode_sparse(X, lengths, grow, name)
        if lengths is not None:
            raise ValueError(f"`lengths` is only used with a scipy.sparse `{name}`; got a "
                             f"{type(X).__name__}")
        if isinstance(X, (str, bytes)) or not hasattr(X, "__len__"):
            raise ValueError(f"`{name}` must be a list of sequences (each a list of items); got "
                             f"{type(X).__name__}")
        ptr = [0]
        names = []
        vals = []
        lens = []
        append_name = names.append
        append_val = vals.append
        append_ptr = ptr.append

        def append_general(item, s, t):  # any item: the attributes of item_attributes
            try:
                pairs = item_attributes(item)
            except ValueError as exc:
                raise ValueError(f"`{name}[{s}][{t}]`: {exc}") from None
            for a, w in pairs:
                append_name(a)
                append_val(w)

        for s, seq in enumerate(X):
            if isinstance(seq, (str, bytes, dict)) or not hasattr(seq, "__len__"):
                raise ValueError(f"`{name}[{s}]` must be a sequence (list) of items; got "
                                 f"{type(seq).__name__}")
            lens.append(len(seq))
            for t, item in enumerate(seq):
                n0 = len(names)
                if type(item) is dict:  # fast path: python-crfsuite's dict of str -> str / number
                    try:
                        for k, v in item.items():
                            tv = type(v)
                            if tv is str:
                                append_name(k + ":" + v)
                                append_val(1.0)
                            elif (tv is float or tv is int) and type(k) is str:
                                append_name(k)
                                append_val(v)
                            else:
                                pairs = item_attributes({k: v})
                                for a, w in pairs:
                                    append_name(a)
                                    append_val(w)
                    except ValueError as exc:
                        raise ValueError(f"`{name}[{s}][{t}]`: {exc}") from None
                    except TypeError:  # a key that is not a str (bytes): the general path
                        del names[n0:], vals[n0:]
                        append_general(item, s, t)
                else:
                    append_general(item, s, t)
                append_ptr(len(names))
        item_val = np.asarray(vals, dtype=np.float64)
        item_ptr = np.asarray(ptr, np.int64)
        bad = ~np.isfinite(item_val)
        if bad.any():
            p = int(np.flatnonzero(bad)[0])
            row = int(np.searchsorted(item_ptr, p, side="right") - 1)
            off = np.concatenate([[0], np.cumsum(lens)])
            s = int(np.searchsorted(off, row, side="right") - 1)
            raise ValueError(f"`{name}[{s}][{row - off[s]}]`: attribute {names[p]!r} has value "
                             f"{item_val[p]}; attribute values must be finite numbers")
        index = self.index
        if grow:
            n0 = len(index)
            setdefault = index.setdefault
            ids = [setdefault(a, len(index)) for a in names]
            if len(index) > n0:
                self.names.extend(list(index)[n0:])
            item_attr = np.asarray(ids, np.int64)
        else:
            get = index.get
            item_attr = np.asarray([get(a, -1) for a in names], np.int64)
            keep = item_attr >= 0
            if not keep.all():  # drop attributes unseen in training
                n_items = item_ptr.shape[0] - 1
                rows = np.repeat(np.arange(n_items), np.diff(item_ptr))
                cnt = np.bincount(rows[keep], minlength=n_items)
                item_ptr = np.concatenate([[0], np.cumsum(cnt)]).astype(np.int64)
                item_attr = item_attr[keep]
                item_val = item_val[keep]
        return Packed(item_ptr, item_attr, item_val, lens)

    def _encode_sparse(self, X, lengths, grow, name):
        import scipy.sparse as sp

        X = sp.csr_matrix(X, dtype=np.float64)
        if lengths is None:
            raise ValueError(f"`{name}` is a scipy.sparse matrix ({X.shape[0]} rows) but `lengths` is "
                             f"missing: pass lengths=[...] giving the number of rows of each sequence "
                             f"(lengths=[{X.shape[0]}] for a single sequence)")
        lengths = np.asarray(lengths, dtype=np.int64)
        if lengths.sum() != X.shape[0] or (lengths < 0).any():
            raise ValueError(f"`lengths` sums to {int(lengths.sum())} but `{name}` has {X.shape[0]} rows")
        if not np.isfinite(X.data).all():
            r = int(np.searchsorted(X.indptr, np.flatnonzero(~np.isfinite(X.data))[0], "right") - 1)
            raise ValueError(f"`{name}` has a non-finite value in row {r}; attribute values must be finite")
        if grow:
            for f in range(X.shape[1]):
                self.add(f"{f}")
        cols = np.array([self.index.get(f"{f}", -1) for f in range(X.shape[1])], dtype=np.int64)
        X.sort_indices()
        a = cols[X.indices]
        keep = a >= 0
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))[keep]
        ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=X.shape[0]))]).astype(np.int64)
        return Packed(ptr, a[keep], X.data[keep].astype(np.float64), lengths)


def build_state_features(packed, y, n_attributes, n_labels, min_freq=0.0, all_possible_states=False,
                         frequency="count"):
    """State features (attribute, label) as CRFsuite generates them.

    Returns ``attr_ptr`` (A + 1,) and ``feat_label`` (F,): the features of attribute a are
    ``feat_label[attr_ptr[a]:attr_ptr[a + 1]]``. With ``all_possible_states`` every attribute seen in
    training gets every label; otherwise only the pairs observed with a frequency of at least
    ``min_freq``. ``frequency="count"``: the number of items with a non-zero value of the attribute and
    the label; ``"value"``: CRFsuite's rule (``crf1d_feature.c``, ``crf1df_generate``), the sum of the
    attribute's values over the items of that label, zeros included — the same for indicator
    attributes, but a pair whose values sum below ``min_freq`` (e.g. negative, with the default 0) is
    dropped, and one seen only with value 0 is kept.
    """
    A, K = n_attributes, n_labels
    if all_possible_states:
        seen = np.zeros(A, bool)
        seen[packed.item_attr[packed.item_val != 0]] = True
        cnt = np.where(seen, K, 0)
        attr_ptr = np.concatenate([[0], np.cumsum(cnt)]).astype(np.int64)
        feat_label = np.tile(np.arange(K, dtype=np.int64), int(seen.sum()))
        return attr_ptr, feat_label
    rows = np.repeat(np.arange(packed.n_items, dtype=np.int64), np.diff(packed.item_ptr))
    if frequency == "value":
        flat = packed.item_attr * K + y[rows]
        keys, inverse = np.unique(flat, return_inverse=True)
        counts = np.bincount(inverse.ravel(), weights=packed.item_val, minlength=keys.size)
    else:
        nz = packed.item_val != 0
        flat = packed.item_attr[nz] * K + y[rows[nz]]
        if A * K <= 2 ** 26:  # counting beats sorting (np.unique) when the (A, K) table is small
            counts = np.bincount(flat, minlength=A * K)
            keys = np.flatnonzero(counts)
            counts = counts[keys]
        else:
            keys, counts = np.unique(flat, return_counts=True)
    keep = counts >= min_freq
    keys = keys[keep]
    attrs = keys // K
    attr_ptr = np.concatenate([[0], np.cumsum(np.bincount(attrs, minlength=A))]).astype(np.int64)
    return attr_ptr, (keys % K).astype(np.int64)


def grow_state_features(packed, y, n_attributes, n_labels, min_freq=0.0, all_possible_states=False,
                        frequency="count", features=None, pending=None):
    """The state features of a stream after one more batch: :func:`build_state_features` with the
    frequencies counted over every batch seen so far, and no feature ever removed.

    Parameters
    ----------
    packed, y : the batch (attribute ids < ``n_attributes``, labels < ``n_labels``)
    features : (attr_ptr, feat_label) or None
        The features so far (over the first attributes and labels; they are all kept).
    pending : (attrs, labels, counts) or None
        Frequencies of the (attribute, label) pairs seen so far that are not features (below
        ``min_freq``).

    Returns
    -------
    attr_ptr (A + 1,), feat_label (F,), pending
        Features grouped by attribute, labels ascending within an attribute (as
        :func:`build_state_features`, which this equals on a first batch); ``pending`` as above (None
        with ``all_possible_states``). Cost O(nnz log nnz + |pending| + F).
    """
    A, K = n_attributes, n_labels
    if features is not None:
        old_ptr, old_label = features
        old_keys = np.repeat(np.arange(len(old_ptr) - 1, dtype=np.int64), np.diff(old_ptr)) * K + old_label
    else:
        old_keys = np.zeros(0, np.int64)
    if all_possible_states:
        seen = np.zeros(A, bool)
        seen[packed.item_attr[packed.item_val != 0]] = True
        seen[old_keys // K] = True
        cnt = np.where(seen, K, 0)
        attr_ptr = np.concatenate([[0], np.cumsum(cnt)]).astype(np.int64)
        return attr_ptr, np.tile(np.arange(K, dtype=np.int64), int(seen.sum())), None
    rows = np.repeat(np.arange(packed.n_items, dtype=np.int64), np.diff(packed.item_ptr))
    if frequency == "value":
        flat, weights = packed.item_attr * K + y[rows], packed.item_val
    else:
        nz = packed.item_val != 0
        flat = packed.item_attr[nz] * K + y[rows[nz]]
        weights = np.ones(flat.size)
    if pending is not None and len(pending[0]):
        flat = np.concatenate([flat, pending[0] * K + pending[1]])
        weights = np.concatenate([weights, pending[2]])
    keys, inverse = np.unique(flat, return_inverse=True)
    counts = np.bincount(inverse.ravel(), weights=weights, minlength=keys.size)
    keep = counts >= min_freq
    new_keys = np.union1d(old_keys, keys[keep]).astype(np.int64)
    below = ~keep & ~np.isin(keys, new_keys)
    pending = (keys[below] // K, keys[below] % K, counts[below])
    attrs = new_keys // K
    attr_ptr = np.concatenate([[0], np.cumsum(np.bincount(attrs, minlength=A))]).astype(np.int64)
    return attr_ptr, (new_keys % K).astype(np.int64), pending


def next_token_values(packed, attr_ids):
    """Values of the attributes ``attr_ids`` at the next token: a sparse (N, A_t) CSR matrix whose row n
    holds, in column c, the value of attribute ``attr_ids[c]`` at token n + 1 of the same sequence (0 on
    the last token of a sequence). Row n is the step n -> n + 1 of time-varying transitions (the
    boundary after token n: the linear chain's and the semi-Markov engine's row convention), so
    ``next_token_values(packed, ids) @ W.reshape(A_t, K * K)`` are the observation-conditioned
    transition scores. Time O(nnz)."""
    import scipy.sparse as sp

    attr_ids = np.asarray(attr_ids, dtype=np.int64)
    N, Ta = packed.n_items, attr_ids.shape[0]
    col = np.full(max(int(packed.item_attr.max(initial=-1)) + 1, 1), -1, np.int64)
    inside = attr_ids < col.size
    col[attr_ids[inside]] = np.flatnonzero(inside)
    a = packed.item_attr
    c = col[a] if a.size else a
    keep = c >= 0
    rows = np.repeat(np.arange(N), np.diff(packed.item_ptr))[keep] - 1  # token n + 1 -> step n
    ok = rows >= 0
    last = np.zeros(N, bool)
    last[packed.offsets[1:][packed.lengths > 0] - 1] = True
    ok[ok] = ~last[rows[ok]]
    return sp.csr_matrix((packed.item_val[keep][ok], (rows[ok], c[keep][ok])), shape=(N, Ta))


def dense_feature_rows(attr_ptr, feat_col, n_cols, threshold=None, budget=2 ** 22):
    """The attributes whose weights a fused CRF kernel reads as rows of a small dense (A_d, n_cols) block.

    An attribute with at least ``threshold`` features (default max(4, n_cols / 5)) gets a row: adding
    and scattering a contiguous row is vectorised and skips the column indirection (the frequent
    attributes of a CoNLL template: a few % of the attributes, ~90 % of the feature occurrences). At
    most ``budget`` dense entries (the attributes with the most features first).

    Returns (dense_of (A,) int64 row or -1, feature indices (F_d,), their rows, their columns
    ``feat_col[f]``, A_d).
    """
    n_feat = np.diff(attr_ptr)
    dense = n_feat >= (max(4, n_cols // 5) if threshold is None else threshold)
    if dense.sum() * n_cols > budget:
        keep = np.argsort(-n_feat, kind="stable")[:budget // n_cols]
        dense = np.zeros_like(dense)
        dense[keep] = True
    dense_of = np.full(n_feat.shape[0], -1, dtype=np.int64)
    dense_of[dense] = np.arange(int(dense.sum()))
    f_attr = np.repeat(np.arange(n_feat.shape[0]), n_feat)
    f_idx = np.flatnonzero(dense[f_attr])
    return dense_of, f_idx, dense_of[f_attr[f_idx]], feat_col[f_idx], int(dense.sum())
