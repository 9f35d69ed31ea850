"""Sequence-labelling metrics: CoNLL chunk-level scores (conlleval), token accuracy, per-label scores.

Chunks are read from tags ``PREFIX-TYPE`` with prefixes B (begin), I (inside), E (end), S (single) and the
outside tag ``O``, under the start/end rules of the CoNLL evaluation script ``conlleval.pl`` (E. Tjong Kim
Sang, CoNLL-2000), extended for S- tags as in its Python port used by ``seqeval`` (default mode). On IOB1,
IOB2, IOE1 and IOE2 data the rules are exactly conlleval.pl's; on IOBES data they read every chunk the way
the IOBES scheme means it. A chunk is counted correct when the gold and the predicted chunk have the same
type, start and end. Sentence boundaries end every chunk. Tags with no ``-`` (other than ``O``) are chunks
of type ``""`` with that prefix, as in conlleval.pl.
"""
from dataclasses import dataclass, field

__all__ = ["segments_from_labels", "labels_from_segments", "conlleval", "chunk_f1", "token_accuracy",
           "token_report", "classification_report", "ConllevalResult", "ChunkScores"]


def _split(tag):
    # conlleval.pl: "B-NP" -> ("B", "NP"); the type may itself contain '-'; "O" -> ("O", "")
    prefix, sep, typ = tag.partition("-")
    return prefix, typ


def _end_of_chunk(prev_tag, tag, prev_type, typ):
    """Did a chunk end between the previous token and this one?"""
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev_tag != "O" and prev_tag != "." and prev_type != typ


def _start_of_chunk(prev_tag, tag, prev_type, typ):
    """Did a chunk start at this token?"""
    if tag in ("B", "S"):
        return True
    if tag in ("E", "I") and prev_tag in ("E", "S", "O"):
        return True
    return tag != "O" and tag != "." and prev_type != typ


def _check_sequences(seqs, name):
    if isinstance(seqs, str) or not hasattr(seqs, "__len__"):
        raise ValueError(f"`{name}` must be a list of label sequences (a list of lists of str); "
                         f"got {type(seqs).__name__}")
    if len(seqs) and isinstance(seqs[0], str):
        return [list(seqs)]  # a single sequence
    return seqs


def segments_from_labels(labels):
    """Chunks of one label sequence.

    Parameters
    ----------
    labels : sequence of str, length T
        Tags such as ``"B-NP"``, ``"I-NP"``, ``"E-NP"``, ``"S-NP"``, ``"O"`` (IOB1, IOB2, IOE, IOBES).

    Returns
    -------
    segments : list of (int, int, str)
        ``(start, end, type)`` with ``end`` exclusive (``labels[start:end]`` is the chunk), in order.

    Notes
    -----
    Cost: time O(T).
    """
    segments = []
    prev_tag, prev_type = "O", ""
    start = 0
    for i, label in enumerate(labels):
        tag, typ = _split(label)
        if _end_of_chunk(prev_tag, tag, prev_type, typ):
            segments.append((start, i, prev_type))
        if _start_of_chunk(prev_tag, tag, prev_type, typ):
            start = i
        prev_tag, prev_type = tag, typ
    if prev_tag != "O" and prev_tag != ".":  # the end of the sequence ends the last chunk
        segments.append((start, len(labels), prev_type))
    return segments


def labels_from_segments(segments, length, scheme="IOB2", outside="O"):
    """Tags of a sequence of ``length`` tokens from its chunks.

    Parameters
    ----------
    segments : iterable of (int, int, str)
        ``(start, end, type)``, end exclusive, non-overlapping.
    length : int
    scheme : {"IOB2", "IOB1", "IOBES"}, default "IOB2"
        IOB2: every chunk starts with B-. IOB1: B- only where a chunk follows a chunk of the same type.
        IOBES: single-token chunks are S-, longer ones B- I-… E-.
    outside : str, default "O"

    Returns
    -------
    labels : list of str, length ``length``

    Raises
    ------
    ValueError
        Overlapping or out-of-range segments, or an unknown scheme.
    """
    if scheme not in ("IOB2", "IOB1", "IOBES"):
        raise ValueError(f"`scheme` must be 'IOB2', 'IOB1' or 'IOBES'; got {scheme!r}")
    labels = [outside] * length
    prev_end, prev_type = -1, None
    for start, end, typ in sorted(segments):
        if not (0 <= start < end <= length):
            raise ValueError(f"segment ({start}, {end}, {typ!r}) is empty or outside [0, {length})")
        if start < prev_end:
            raise ValueError(f"segment ({start}, {end}, {typ!r}) overlaps the previous one ending at {prev_end}")
        if scheme == "IOBES" and end - start == 1:
            labels[start] = f"S-{typ}"
        else:
            begin = "B"
            if scheme == "IOB1" and not (start == prev_end and typ == prev_type):
                begin = "I"
            labels[start] = f"{begin}-{typ}"
            for t in range(start + 1, end):
                labels[t] = f"I-{typ}"
            if scheme == "IOBES":
                labels[end - 1] = f"E-{typ}"
        prev_end, prev_type = end, typ
    return labels


@dataclass
class ChunkScores:
    """Chunk counts and scores (fractions in [0, 1], not percentages) for one chunk type or overall."""

    n_true: int = 0
    n_pred: int = 0
    n_correct: int = 0

    @property
    def precision(self):
        return self.n_correct / self.n_pred if self.n_pred else 0.0

    @property
    def recall(self):
        return self.n_correct / self.n_true if self.n_true else 0.0

    @property
    def f1(self):
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def as_dict(self):
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1,
                "n_true": self.n_true, "n_pred": self.n_pred, "n_correct": self.n_correct}


@dataclass
class ConllevalResult:
    """What conlleval reports.

    Attributes
    ----------
    overall : ChunkScores
    per_type : dict str -> ChunkScores
        One entry per chunk type found in the gold or the predicted tags, sorted by type.
    n_tokens, n_correct_tokens : int
    accuracy : float
        Token accuracy (all tokens, ``O`` included), as conlleval's "accuracy".
    """

    overall: ChunkScores
    per_type: dict = field(default_factory=dict)
    n_tokens: int = 0
    n_correct_tokens: int = 0

    @property
    def accuracy(self):
        return self.n_correct_tokens / self.n_tokens if self.n_tokens else 0.0

    @property
    def precision(self):
        return self.overall.precision

    @property
    def recall(self):
        return self.overall.recall

    @property
    def f1(self):
        return self.overall.f1

    def as_dict(self):
        return {"accuracy": self.accuracy, "n_tokens": self.n_tokens, **self.overall.as_dict(),
                "per_type": {t: s.as_dict() for t, s in self.per_type.items()}}

    def report(self):
        """conlleval.pl's text report (percentages with two decimals)."""
        o = self.overall
        lines = [f"processed {self.n_tokens} tokens with {o.n_true} phrases; "
                 f"found: {o.n_pred} phrases; correct: {o.n_correct}.",
                 f"accuracy: {100 * self.accuracy:6.2f}%; precision: {100 * o.precision:6.2f}%; "
                 f"recall: {100 * o.recall:6.2f}%; FB1: {100 * o.f1:6.2f}"]
        for typ, s in self.per_type.items():
            lines.append(f"{typ:>17}: precision: {100 * s.precision:6.2f}%; recall: {100 * s.recall:6.2f}%; "
                         f"FB1: {100 * s.f1:6.2f}  {s.n_pred}")
        return "\n".join(lines)

    def __str__(self):
        return self.report()


def _pairs(y_true, y_pred):
    y_true = _check_sequences(y_true, "y_true")
    y_pred = _check_sequences(y_pred, "y_pred")
    if len(y_true) != len(y_pred):
        raise ValueError(f"`y_true` has {len(y_true)} sequences but `y_pred` has {len(y_pred)}")
    for b, (t, p) in enumerate(zip(y_true, y_pred)):
        if len(t) != len(p):
            raise ValueError(f"sequence {b}: `y_true` has {len(t)} labels but `y_pred` has {len(p)}")
    return y_true, y_pred


def conlleval(y_true, y_pred):
    """CoNLL chunk-level precision, recall and F1, overall and per chunk type, as conlleval.pl.

    Parameters
    ----------
    y_true, y_pred : list of list of str
        Gold and predicted tags, one list per sentence (a single flat list is one sentence).

    Returns
    -------
    ConllevalResult
        ``.f1``, ``.precision``, ``.recall``, ``.accuracy``, ``.per_type[type].f1`` …; ``.report()`` prints
        conlleval's text. Scores are fractions (conlleval prints percentages); a score whose denominator is
        zero is 0.

    Raises
    ------
    ValueError
        Different numbers of sequences, or a sequence whose gold and predicted lengths differ.

    Notes
    -----
    Cost: time O(N) for N tokens.
    """
    y_true, y_pred = _pairs(y_true, y_pred)
    per_type = {}
    overall = ChunkScores()
    n_tok = n_ok = 0
    for t, p in zip(y_true, y_pred):
        n_tok += len(t)
        n_ok += sum(a == b for a, b in zip(t, p))
        gold = segments_from_labels(t)
        pred = segments_from_labels(p)
        gold_set = set(gold)
        for s in gold:
            per_type.setdefault(s[2], ChunkScores()).n_true += 1
        for s in pred:
            sc = per_type.setdefault(s[2], ChunkScores())
            sc.n_pred += 1
            if s in gold_set:
                sc.n_correct += 1
                overall.n_correct += 1
        overall.n_true += len(gold)
        overall.n_pred += len(pred)
    per_type = dict(sorted(per_type.items()))
    return ConllevalResult(overall=overall, per_type=per_type, n_tokens=n_tok, n_correct_tokens=n_ok)


def chunk_f1(y_true, y_pred):
    """Overall CoNLL chunk F1 (a fraction in [0, 1]); see :func:`conlleval`."""
    return conlleval(y_true, y_pred).f1


def token_accuracy(y_true, y_pred):
    """Fraction of tokens whose predicted label equals the gold label (all labels, ``O`` included).

    Raises
    ------
    ValueError
        As :func:`conlleval`, or when there are no tokens at all.
    """
    y_true, y_pred = _pairs(y_true, y_pred)
    n = sum(len(t) for t in y_true)
    if n == 0:
        raise ValueError("token accuracy is undefined without tokens: `y_true` holds no labels")
    ok = sum(a == b for t, p in zip(y_true, y_pred) for a, b in zip(t, p))
    return ok / n


def token_report(y_true, y_pred, labels=None):
    """Per-label precision, recall, F1 and support over tokens (like scikit-learn's classification_report).

    Parameters
    ----------
    y_true, y_pred : list of list of str
    labels : list of str, optional
        Labels to report, in this order; by default every label seen in gold or prediction, sorted.

    Returns
    -------
    dict
        ``{label: {"precision", "recall", "f1", "support"}}`` plus ``"micro avg"``, ``"macro avg"`` and
        ``"weighted avg"`` entries (over the reported labels); a zero denominator gives 0.
    """
    y_true, y_pred = _pairs(y_true, y_pred)
    tp, n_true, n_pred = {}, {}, {}
    for t, p in zip(y_true, y_pred):
        for a, b in zip(t, p):
            n_true[a] = n_true.get(a, 0) + 1
            n_pred[b] = n_pred.get(b, 0) + 1
            if a == b:
                tp[a] = tp.get(a, 0) + 1
    if labels is None:
        labels = sorted(set(n_true) | set(n_pred))

    def prf(c, npred, ntrue):
        p = c / npred if npred else 0.0
        r = c / ntrue if ntrue else 0.0
        return p, r, (2 * p * r / (p + r) if p + r else 0.0)

    out = {}
    for lab in labels:
        p, r, f = prf(tp.get(lab, 0), n_pred.get(lab, 0), n_true.get(lab, 0))
        out[lab] = {"precision": p, "recall": r, "f1": f, "support": n_true.get(lab, 0)}
    sup = sum(out[lab]["support"] for lab in labels)
    p, r, f = prf(sum(tp.get(lab, 0) for lab in labels), sum(n_pred.get(lab, 0) for lab in labels), sup)
    out["micro avg"] = {"precision": p, "recall": r, "f1": f, "support": sup}
    k = max(len(labels), 1)
    out["macro avg"] = {m: sum(out[lab][m] for lab in labels) / k for m in ("precision", "recall", "f1")}
    out["macro avg"]["support"] = sup
    out["weighted avg"] = {m: (sum(out[lab][m] * out[lab]["support"] for lab in labels) / sup if sup else 0.0)
                           for m in ("precision", "recall", "f1")}
    out["weighted avg"]["support"] = sup
    return out


def classification_report(y_true, y_pred, labels=None, digits=4, output_dict=False):
    """Text (or dict) table of per-label token precision/recall/F1/support; see :func:`token_report`."""
    rep = token_report(y_true, y_pred, labels)
    if output_dict:
        return rep
    names = list(rep)
    width = max(12, max(len(n) for n in names))
    head = f"{'':>{width}} {'precision':>10} {'recall':>10} {'f1-score':>10} {'support':>10}"
    lines = [head, ""]
    for n in names:
        if n == "micro avg":
            lines.append("")
        r = rep[n]
        lines.append(f"{n:>{width}} {r['precision']:>10.{digits}f} {r['recall']:>10.{digits}f} "
                     f"{r['f1']:>10.{digits}f} {r['support']:>10}")
    return "\n".join(lines)
