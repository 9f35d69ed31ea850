"""``structlearn tag``: label the sequences (or trees) of a file with a trained model, as ``crfsuite tag``."""
import warnings

from .common import CLIError, Out, open_model, warn
from .featurize import Featurizer, TreeReader

__all__ = ["cmd_tag"]


class Tagger:
    """A fitted estimator seen by ``tag``, with the keyword arguments that come with the input (a tree's
    parents) bound to every call."""

    def __init__(self, est, extra):
        self.est, self.extra = est, extra

    def predict(self, X):
        return self.est.predict(X, **self.extra)

    def predict_proba_sequence(self, X):
        return self.est.predict_proba_sequence(X, **self.extra)

    def kbest(self, X, k):
        return self.est.kbest(X, k, **self.extra)

    def predict_marginals(self, X):
        return self.est.predict_marginals(X, **self.extra)


class SemiMarkovTagger(Tagger):
    """A fitted SemiMarkovCRF as a token tagger: k-best token labels, and the marginals of the token tags
    (IOB2 B-X / I-X / O from the segment marginals, or the segment label for runs)."""

    def kbest(self, X, k):
        return self.est.kbest(X, k, output="labels")

    def predict_marginals(self, X):
        import numpy as np

        est = self.est
        bio = est.label_format_ != "runs"
        occ = est.predict_marginals(X)
        begins = [np.zeros_like(o) for o in occ]
        if bio:
            for b, segs in enumerate(est.predict_segment_marginals(X, threshold=0.0)):
                for s, _, lab, p in segs:
                    begins[b][s, est._label_index[lab]] += p
        out = []
        for o, st in zip(occ, begins):
            rows = []
            for t in range(o.shape[0]):
                d = {}
                for k, c in enumerate(est.classes_):
                    if not bio or c == est.outside:
                        d[c] = float(o[t, k])
                    else:
                        d["B-" + c] = float(st[t, k])
                        d["I-" + c] = float(max(o[t, k] - st[t, k], 0.0))
                rows.append(d)
            out.append(rows)
        return out


_TAGGERS = {"semi-markov-crf": SemiMarkovTagger}   # model format -> Tagger (default: Tagger)


def _reader(fmt, est, args):
    if fmt == "tree-crf":
        return TreeReader()
    stored = getattr(est, "metadata_", {}).get("featurizer")
    if stored is not None and not isinstance(stored, dict):
        raise CLIError(f"{args.model}: the model file's featurizer record is malformed (expected a JSON object; "
                       f"got {type(stored).__name__}); give --format/--template")
    return Featurizer.from_args(args.format, args.template, args.columns, stored or {})


def _open(args):
    """(model, header) of ``-m``: plain Viterbi tagging of a ``linear-chain-crf`` file (the default of
    ``learn``), with or without ``-q``/``-t``/``-r``, opens it as a
    :class:`~structlearn.io.chain_tagger.ChainTagger`, which neither imports scikit-learn nor the estimators
    (the same labels: one shared function, :func:`structlearn.crf._decode.predict_labels`); ``-k``,
    ``-i``, ``-p`` and the other formats load the estimator."""
    if args.kbest is None and not args.marginal and not args.probability:
        from ..io.chain_tagger import open_chain_tagger

        tagger = open_chain_tagger(args.model)
        if tagger is not None:
            return tagger, tagger.header
    return open_model(args.model)


def _check_known_attributes(est, X, name, model, fmt):
    """Refuse input none of whose attributes the model knows: every item would get the labels that the
    transitions alone favour (a CoNLL file read as CRFsuite attributes, or the wrong template). Stops at the
    first known attribute, so valid input costs next to nothing."""
    vocab = getattr(est, "_vocab", None)
    known = vocab.index if vocab is not None else set(getattr(est, "attributes_", None) or ())
    if not known:
        return
    first = None
    for xs in X:
        for item in xs:
            for a in item:
                if a in known:
                    return
                if first is None:
                    first = a
    if first is None:
        return  # no attribute at all (the reader's checks name that case)
    how = {"crfsuite": "; is it a CoNLL column file? then give --format conll (and --template)",
           "conll": "; check --template and --columns"}.get(fmt, "")
    raise CLIError(f"{name}: none of the input's attributes (e.g. {first!r}) is known to the model {model}, "
                   f"so the input is not in the form the model was trained on{how}")


def _kbest_k(k, X, classes):
    """``-k K`` capped at the number of labelings a sequence of ``X`` can have, at most (2·|classes| + 1)^length
    (the BIO tags of a segment model included): the k-best kernels allocate K rows, and more labelings than
    exist add nothing to the output."""
    import math

    n_tags = 2 * len(classes) + 1
    longest = max((len(x) for x in X), default=0)
    return min(k, n_tags ** longest) if longest * math.log(n_tags) < math.log(k) + 1 else k


def cmd_tag(args):
    from .report import evaluation_report

    if args.kbest is not None and args.kbest < 1:
        raise CLIError(f"-k expects a positive number of labelings; got {args.kbest}")
    if args.kbest is not None and args.marginal:
        raise CLIError("-i (marginals of the best labeling) cannot be combined with -k")
    est, header = _open(args)
    fmt = header.get("format")
    need_gold = args.test or args.reference
    with warnings.catch_warnings(record=True) as caught:  # e.g. unknown declarations: one line each
        warnings.simplefilter("always")
        reader = _reader(fmt, est, args)
        X, y, name, extra = reader.read(args.input, need_labels=need_gold)
    for w in caught:
        warn(str(w.message).splitlines()[0])
    _check_known_attributes(est, X, name, args.model, reader.format)
    est = _TAGGERS.get(fmt, Tagger)(est, extra)
    if need_gold:
        if y is None or any(lab == "" for s in y for lab in s):
            raise CLIError(f"{name}: -t/-r need the gold labels, but the input has "
                           + ("no label column" if y is None else "empty label fields"))
    out = Out()
    pred = est.predict(X) if (not args.quiet or args.test) and args.kbest is None else None
    # labels are written (and compared with the input's gold labels) as text: a model fitted in Python
    # may have other labels, e.g. ints
    if not args.quiet:
        if args.kbest is not None:
            k, n_items = _kbest_k(args.kbest, X, est.est.classes_), sum(map(len, X))
            try:
                if k * n_items >= 2 ** 60:  # (K, N) labels: beyond any memory (and the kernels' int64)
                    raise MemoryError
                kbest = est.kbest(X, k)
            except MemoryError:
                raise CLIError(f"-k {args.kbest}: not enough memory for {k} labelings of {n_items} items; use a "
                               "smaller K") from None
            for b, results in enumerate(kbest):
                for r, (labels, prob) in enumerate(results, 1):
                    out(f"@kbest\t{r}\t{prob:.6f}")
                    for t, lab in enumerate(labels):
                        out(f"{y[b][t]}\t{lab}" if args.reference else str(lab))
                    out()
        else:
            probs = est.predict_proba_sequence(X) if args.probability else None
            marg = est.predict_marginals(X) if args.marginal else None
            for b, labels in enumerate(pred):
                if probs is not None:
                    out(f"@probability\t{probs[b]:.6f}")
                for t, lab in enumerate(labels):
                    text = f"{lab}:{marg[b][t][lab]:.6f}" if marg is not None else str(lab)
                    out(f"{y[b][t]}\t{text}" if args.reference else text)
                out()
    if args.test:
        if pred is None:
            pred = est.predict(X)
        for line in evaluation_report(y, [[str(lab) for lab in labels] for labels in pred]):
            out(line)
    out.flush()
    return 0
