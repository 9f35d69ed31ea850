"""``partial_fit`` of :class:`~structlearn.LinearChainCRF`: the online trainers (``l2sgd``, ``ap``, ``pa``,
``arow``) run one epoch per call on a batch of a stream, their state kept between calls, while the
attribute vocabulary, the labels and the features grow with the stream.

The epochs are the ones ``fit`` runs (:mod:`structlearn.crf.online_trainers`, the same Numba kernels and the
same random draws); what is kept between calls is :class:`~structlearn.crf.online_trainers.StreamState`
plus the pending feature frequencies (:func:`~structlearn.crf.features.grow_state_features`).
"""
import time

import numpy as np
from sklearn.utils import check_random_state

from . import online_trainers as online
from ._potentials import ChainFeatureModel
from .features import AttributeVocabulary, grow_state_features
from ..utils.interrupts import as_interrupt
from ._base import label_key

__all__ = ["ChainCRFStreamMixin", "STREAMING_ALGORITHMS"]

#: the trainers that stream (one epoch per ``partial_fit`` call)
STREAMING_ALGORITHMS = ("l2sgd", "ap", "pa", "arow")

_MISSING = object()


class _Stream:
    """What ``partial_fit`` keeps between calls besides the fitted attributes."""

    def __init__(self, trainer, model, fixed_classes):
        self.trainer = trainer          # online.StreamState
        self.model = model              # ChainFeatureModel of the weights in `trainer` (None: nothing yet)
        self.fixed_classes = fixed_classes
        self.pending = None             # (attrs, labels, frequencies) of pairs below min_freq so far
        self.coef = None                # the coef_ array the last call wrote (a fit/load/assignment since: restart)
        self.rng = None                 # the stream's shuffling (check_random_state(random_state) at its start)


def _check_classes(classes):
    if isinstance(classes, (str, bytes, dict)) or not hasattr(classes, "__iter__"):
        raise ValueError(f"`classes` must be a list of labels; got {type(classes).__name__}")
    out = [label_key(c) for c in classes]
    if not out:
        raise ValueError("`classes` is empty; give every label the stream may bring, or None to let "
                         "the labels grow with the stream")
    seen = set()
    for c in out:
        if c in seen:
            raise ValueError(f"`classes` lists the label {c!r} twice")
        if isinstance(c, str) and ("\t" in c or "\n" in c):
            raise ValueError(f"`classes`: label {c!r} contains a tab or newline, which CRFsuite-format "
                             f"files cannot hold")
        seen.add(c)
    return out


def open_stream(est, classes, n_sequences, unit="int"):
    """The checks and state every ``partial_fit`` starts with: ``(fixed classes or None, stream or
    None, coef or None, new_stream, warm, saved label attributes)``.

    ``new_stream``: no stream yet, or a ``fit`` / ``load`` / assignment of ``coef_`` / change of
    ``algorithm`` since the last call; ``warm``: a new stream that continues a fitted model.
    Raises ValueError for a non-online ``algorithm``, a bad ``n_sequences`` (``unit`` names what it
    counts) and ``classes`` given after the first call with a different set."""
    est._check_params()
    alg = est.algorithm
    if alg not in STREAMING_ALGORITHMS:
        raise ValueError(f"partial_fit needs an online trainer, algorithm in {list(STREAMING_ALGORITHMS)} "
                         f"(one epoch per call); got algorithm={alg!r}, which trains on the whole "
                         f"data set: use fit, or set algorithm='l2sgd' for SGD on the same objective")
    if n_sequences is not None and (isinstance(n_sequences, bool)
                                    or not isinstance(n_sequences, (int, np.integer)) or n_sequences < 1):
        raise ValueError(f"`n_sequences` must be a positive {unit} or None; got {n_sequences!r}")
    fixed = None if classes is None else _check_classes(classes)
    stream = est.__dict__.get("_stream")
    coef = est.__dict__.get("coef_")
    new_stream = (stream is None or coef is None or stream.coef is not coef
                  or stream.trainer.algorithm != alg)
    if not new_stream and fixed is not None and (not stream.fixed_classes
                                                 or set(fixed) != set(est.classes_)):
        raise ValueError(f"`classes` can only fix the labels on the first partial_fit call (later calls: "
                         f"None or the same set); the labels are {est.classes_[:10]}"
                         + ("" if stream.fixed_classes else " (growing with the stream)")
                         + f", got {fixed[:10]}")
    saved = {k: est.__dict__.get(k, _MISSING) for k in ("classes_", "_label_index")}
    warm = new_stream and coef is not None and est.__dict__.get("model_") is not None
    return fixed, stream, coef, new_stream, warm, saved


def stream_classes(est, new_stream, warm, fixed):
    """The label list the call starts from (the fitted or streamed labels, plus ``classes`` on a new
    stream), set as ``classes_`` / ``_label_index``."""
    classes_ = [] if new_stream and not warm else list(est.classes_)
    if new_stream and fixed is not None:
        missing = [c for c in classes_ if c not in set(fixed)]
        if missing:
            raise ValueError(f"`classes` must contain every label of the fitted model; it lacks "
                             f"{missing[:10]}")
        classes_ += [c for c in fixed if c not in set(classes_)]
    est.classes_ = classes_
    est._label_index = {c: i for i, c in enumerate(classes_)}


def new_stream_state(est, fixed, warm, coef):
    """A :class:`_Stream` for a new stream (warm: its trainer starts from the fitted weights)."""
    stream = _Stream(None, None, fixed is not None)
    rng = check_random_state(est.random_state)
    if warm:
        stream.model = est.model_
        stream.trainer = online.StreamState(est.algorithm, est.model_.n_params, rng, est.variance)
        stream.trainer.w = np.array(coef, dtype=np.float64)
    stream.rng = rng
    return stream


def stream_epoch(est, epochs, trainer, model, batch, y, B, n_items, n_sequences):
    """One epoch of ``est.algorithm`` by ``epochs`` (:mod:`structlearn.crf.online_trainers` or
    :mod:`~structlearn.crf._tree_online_trainers`) on ``batch`` (B sequences or trees, ``n_items`` items);
    returns (weights, training-log entry, converged)."""
    tt = time.perf_counter()
    est.__dict__.pop("_stream", None)  # the stream's state changes from here (dropped after an error)
    if est.algorithm == "l2sgd":
        n = int(n_sequences) if n_sequences is not None else trainer.n_sequences + B
        lam = 2.0 * float(est.c2) / n
        loss = epochs.l2sgd_stream_epoch(
            trainer, model, batch, y, lam, eta=est.calibration_eta, rate=est.calibration_rate,
            samples=est.calibration_samples, candidates=est.calibration_candidates,
            max_trials=est.calibration_max_trials, random_state=est.random_state,
            **({"shuffle": est.shuffle} if hasattr(est, "shuffle") else {}))
        w = trainer.weights()
        obj = loss + float(est.c2) * float(w @ w) * B / n
        if not np.isfinite(obj):
            raise FloatingPointError(f"l2sgd diverged on batch {trainer.n_epochs} (objective "
                                     f"{obj}); lower `calibration_eta`")
        entry = {"iteration": trainer.n_epochs, "loss": float(obj), "eta0": trainer.eta0, "lambda": lam}
        converged = False
    else:
        loss, errors = epochs.large_margin_stream_epoch(
            trainer, model, batch, y, pa_type=est.pa_type, c=est.c,
            error_sensitive=est.error_sensitive, gamma=est.gamma)
        w = trainer.weights(est.averaging)
        rate = errors / max(n_items, 1)
        entry = {"iteration": trainer.n_epochs, "loss": loss, "error_rate": rate}
        epsilon = 0.0 if est.epsilon is None else float(est.epsilon)
        converged = rate < epsilon
    entry.update({"active_features": int(np.count_nonzero(trainer.w)), "n_sequences": B,
                  "seconds": time.perf_counter() - tt})
    return w, entry, converged


def roll_back(est, saved, vocabs):
    """Undo a failed call: the label attributes ``saved`` and the names each vocabulary grew by
    (``vocabs``: (vocabulary, its size before the call) pairs)."""
    for k, v in saved.items():
        if v is _MISSING:
            est.__dict__.pop(k, None)
        else:
            setattr(est, k, v)
    for vocab, n0 in vocabs:
        for name in vocab.names[n0:]:
            del vocab.index[name]
        del vocab.names[n0:]


def commit_stream(est, stream, model, pending, w, trainer, converged, entry, new_stream, featurize_seconds,
                  t0):
    """Store the call's result: the stream, ``model_``, ``coef_``, the iteration count and the log."""
    w = np.asarray(w, dtype=np.float64)
    stream.model, stream.pending, stream.coef = model, pending, w
    est._stream = stream
    est.model_ = model
    est.coef_ = w
    est.n_iter_ = trainer.n_epochs
    est.converged_ = bool(converged)
    if new_stream:
        est.training_log_ = []
    est.training_log_.append(entry)
    est.featurize_seconds_ = featurize_seconds
    est.training_seconds_ = time.perf_counter() - t0


class ChainCRFStreamMixin:
    """``partial_fit`` for :class:`~structlearn.LinearChainCRF` (which provides ``_forbidden``,
    ``_transition_attribute_ids``, ``_check_gold_allowed`` and the label helpers of ``CRFBase``)."""

    def partial_fit(self, X, y, classes=None, *, lengths=None, n_sequences=None):
        """One epoch of the online trainer on a batch of a stream, continuing from the previous calls.

        The batch's sequences are visited in an order shuffled by ``random_state`` (one generator for
        the whole stream: l2sgd follows ``shuffle`` as :meth:`fit` does; ap/pa/arow streams draw numpy's
        orders, those of ``shuffle="numpy"``) and the trainer's update applied per sequence, exactly as one
        epoch of :meth:`fit` with the same ``algorithm`` and orders: on a first call, ``partial_fit(X, y)``
        gives the weights of ``fit(X, y)`` with ``max_iterations=1`` (bitwise), and for ap/pa/arow k calls on
        the same data those of ``max_iterations=k`` (l2sgd: with ``n_sequences=len(X)``).

        Kept between calls: the weights and the trainer's state — ap/pa: the raw weights, the
        averaging sums and the counter (``coef_`` is the averaged weights, as ``fit`` returns); arow:
        the weights and the diagonal variances; l2sgd: the weights (with their lazy L2 scale), the step
        counter t and η0, calibrated as ``fit`` does (``calibration_*``) on the first batch only — the
        rate is Bottou's η_t = η0 / (1 + λ η0 t), t continuing across calls. ``coef_`` after each call
        is what :meth:`predict` uses, so prediction between calls works.

        L2 weight of l2sgd: λ = 2·c2 / n with n = ``n_sequences`` if given, else the number of
        sequences seen so far by the stream (this batch included; a sequence passed again counts
        again), so that on data of n sequences the objective is ``fit``'s,
        ``-Σ log p(y|x) + c2‖w‖²``. For several passes over a fixed training set give its size as
        ``n_sequences`` (else λ keeps shrinking with the passes).

        Growth: attributes, labels and (attribute, label) / (label, label) features new in a batch
        are added (their weights and sums 0, AROW variances ``variance``); nothing is removed.
        ``min_freq`` is applied to the frequencies counted over all batches seen so far (a pair becomes
        a feature in the batch where its running count reaches ``min_freq``; pairs below it are
        counted on, features stay even if a value-weighted sum later falls below);
        ``all_possible_states`` gives every attribute seen so far every label seen so far,
        ``all_possible_transitions`` every label pair; ``forbidden_transitions`` pairs naming a
        label not seen yet apply once it appears. With ``classes`` on the first call the label set is
        fixed then (scikit-learn's convention): labels in that order, a later label outside it is an
        error.

        The first call on an estimator that is not fitted starts a stream. After :meth:`fit` or
        :meth:`load` (or an assignment of ``coef_``, or a change of ``algorithm``) the next call
        continues from the fitted weights, vocabulary, labels and features; the trainer's own state
        is not stored by ``fit`` or model files and restarts (averaging from the fitted weights,
        counter 1; AROW variances ``variance``; l2sgd: t = 0, η0 calibrated on that batch, n counted
        from that call). :meth:`fit` after ``partial_fit`` starts afresh; to restart a stream use
        :func:`sklearn.base.clone`. ``model_filename`` is not written by ``partial_fit`` (call
        :meth:`save`).

        Parameters
        ----------
        X : list of B sequences of items, or scipy.sparse matrix (N, n_attributes) with ``lengths``
            The batch (items as in :meth:`fit`).
        y : list of B lists of labels
            One label per item.
        classes : list of labels, optional
            The whole label set, fixed on the first call; on later calls None or the same set.
        lengths : array-like of int (B,), optional
            Sequence lengths when ``X`` is a sparse matrix.
        n_sequences : int, optional
            l2sgd only (ignored by ap/pa/arow): the n of λ = 2·c2 / n (see above).

        Returns
        -------
        self
            With ``coef_``, ``model_``, ``classes_``, ``attributes_`` for the model so far, ``n_iter_``
            the number of epochs (calls) of the stream, ``converged_`` (ap/pa/arow: the batch's share
            of mislabelled tokens < ``epsilon``; l2sgd: False, a stream has no stopping rule) and one
            ``training_log_`` entry per call: ``loss`` (l2sgd: the batch's part of the objective,
            Σ_batch -log p(y|x) during the pass + c2‖w‖²·B/n; ap: mislabelled tokens; pa/arow: the
            hinge losses), ``n_sequences`` (B) and the trainer's fields as in :meth:`fit`.

        Raises
        ------
        ValueError
            ``algorithm="lbfgs"`` (it needs the whole data set: use :meth:`fit`); ``classes`` not a
            list of distinct labels, given after the first call without fixing the labels then, or a
            different set; a label outside the fixed ``classes``; an empty batch; the errors of
            :meth:`fit` (items and labels of different lengths, a forbidden gold transition, ...).
            The estimator is unchanged after an error.

        Notes
        -----
        Cost per call: one epoch, per sequence one Viterbi (ap/pa/arow) or forward–backward (l2sgd)
        pass, O(T·K²) plus O(nnz · labels per attribute), sequentially (the online updates are);
        the first l2sgd call adds up to 2·``calibration_candidates`` trial passes over
        ``calibration_samples`` sequences. Growth costs O(P) to move the state into the grown layout
        plus O(nnz log nnz) counting. Memory: the batch plus O(P) state (ap/pa/arow: three vectors
        of P parameters) and the frequencies of the pairs still below ``min_freq``.

        References
        ----------
        CRFsuite's trainers (Okazaki 2007, ``train_l2sgd.c``, ``train_averaged_perceptron.c``,
        ``train_passive_aggressive.c``, ``train_arow.c``); L. Bottou, "Stochastic gradient descent
        tricks", Neural Networks: Tricks of the Trade (2012) — the step size and the lazy L2 scale;
        Collins (2002); Crammer et al. (2006); Mejer & Crammer (2010).
        """
        t0 = time.perf_counter()
        fixed, stream, coef, new_stream, warm, saved = open_stream(self, classes, n_sequences)
        vocab = AttributeVocabulary() if new_stream and not warm else self._vocab
        stream_classes(self, new_stream, warm, fixed)
        n_attr0 = len(vocab)
        try:
            if new_stream:
                if warm and self.model_.n_trans_attr:
                    raise ValueError("partial_fit cannot continue a model with transition attributes "
                                     "(they are trained by lbfgs only); clone the estimator to start "
                                     "a new stream")
                stream = new_stream_state(self, fixed, warm, coef)
            fixed_now = stream.fixed_classes
            packed = vocab.encode(X, lengths, grow=True)
            self._check_nonempty(packed)
            if fixed_now:
                self._check_labels_known(y)
            yy = self._encode_labels(y, packed, grow=not fixed_now)
            model, pending = self._grown_model(stream, vocab, packed, yy, known_only=not fixed_now)
            self._check_gold_allowed(yy, packed, model.forbidden, model.forbidden_start, model.forbidden_end)
            featurize_seconds = time.perf_counter() - t0

            # the trainer's state in the grown layout, then one epoch (the stream's state changes from
            # here: after an error it is dropped and the next call restarts it from coef_)
            old = stream.model
            if stream.trainer is None:
                stream.trainer = online.StreamState(self.algorithm, model.n_params, stream.rng, self.variance)
            elif old.n_labels != model.n_labels or old.n_state != model.n_state:
                self.__dict__.pop("_stream", None)
                stream.trainer.remap(old.index_in(model), model.n_params, self.variance)
            trainer = stream.trainer
            w, entry, converged = stream_epoch(self, online, trainer, model, packed, yy, len(packed.lengths),
                                               packed.n_items, n_sequences)
        except BaseException as exc:
            roll_back(self, saved, [(vocab, n_attr0)])
            raise as_interrupt(exc)  # the exception itself, or the Ctrl-C a Numba kernel wrapped

        self._vocab = vocab
        self.attributes_ = vocab.names
        commit_stream(self, stream, model, pending, w, trainer, converged, entry, new_stream, featurize_seconds,
                      t0)
        return self

    def _check_labels_known(self, y):
        """ValueError naming the first label of ``y`` outside the fixed ``classes``."""
        if y is None or isinstance(y, (str, bytes)) or not hasattr(y, "__iter__"):
            return  # _encode_labels explains
        idx = self._label_index
        for s, seq in enumerate(y):
            if isinstance(seq, (str, bytes)) or not hasattr(seq, "__iter__"):
                return
            for t, lab in enumerate(seq):
                if label_key(lab) not in idx:
                    raise ValueError(f"`y[{s}][{t}]`: label {label_key(lab)!r} is not in the `classes` "
                                     f"fixed by the first partial_fit call ({self.classes_[:10]}); "
                                     f"clone the estimator and pass every label as `classes`, or leave "
                                     f"`classes` None to let the labels grow")

    def _grown_model(self, stream, vocab, packed, yy, known_only):
        """The feature model after the batch ``(packed, yy)``: the stream's model (if any) grown by
        the batch's attributes, labels and features, and the pending frequencies after it."""
        K, A = len(self.classes_), len(vocab)
        old = stream.model
        attr_ptr, feat_label, pending = grow_state_features(
            packed, yy, A, K, self.min_freq, self.all_possible_states,
            frequency="count" if self.start_end_features else "value",
            features=None if old is None else (old.attr_ptr, old.feat_label), pending=stream.pending)
        if self.all_possible_transitions:
            trans = np.ones((K, K), bool)
        else:
            trans = np.zeros((K, K), bool)
            if old is not None:
                trans[:old.n_labels, :old.n_labels] = old.trans_features
            same = np.ones(packed.n_items, bool)
            same[packed.offsets[1:] - 1] = False
            idx = np.flatnonzero(same[:-1])
            trans[yy[idx], yy[idx + 1]] = True
        self._transition_attribute_ids(vocab)  # transition attributes: lbfgs only (the error)
        forb, fstart, fend = self._forbidden(K, known_only=known_only)
        return ChainFeatureModel(attr_ptr, feat_label, K, trans, forb, fstart, fend,
                                 start_end=bool(self.start_end_features)), pending
