"""Penn-Treebank bracketed trees (e.g. the Stanford Sentiment Treebank) as labelled node trees.

Format: ``(label child child …)`` where a child is another bracket or, for a leaf, one word:
``(3 (2 The) (4 (3 gorgeously) (2 elaborate)))``. Every bracket is a node carrying a label (in SST a
sentiment class 0–4 on every node, leaves included); the words are the leaves' tokens. A tree may span
several lines; several trees may share a line. PTB's unlabelled outer wrapper ``( (S …) )`` is removed.

Tokenisation splits on ASCII whitespace and parentheses only: SST has tokens containing a NO-BREAK
SPACE (U+00A0, e.g. ``8\\xa01\\/2``) that ``str.split()`` would break apart. PTB escapes (``-LRB-``,
``\\/``) are kept as written.
"""
from collections import namedtuple

from ._files import describe, open_text

__all__ = ["read_ptb", "parse_ptb", "PTBTree", "PTBFormatError", "span_items", "child_positions",
           "edge_items"]


class PTBFormatError(ValueError):
    """Malformed bracketing (the message names the file and line, or the position in the string), text
    that is not UTF-8, or a truncated or corrupt gzip file: the one error :func:`read_ptb` and
    :func:`parse_ptb` raise for damaged input."""


#: One tree. Nodes are in pre-order (root first, then each child's subtree left to right).
#: ``labels`` (list of str) per node; ``parents`` (list of int) index of each node's parent, -1 for the
#: root; ``words`` (list of str) the tokens left to right; ``spans`` (list of (start, end)) the token
#: span of each node, end exclusive; ``word_of`` (list of int) the token index of a leaf node, -1 for
#: internal nodes.
PTBTree = namedtuple("PTBTree", ["labels", "parents", "words", "spans", "word_of"])

_DELIMS = " \t\n\r\f\v()"


def _tokens(text):
    """Yield (token, offset): "(", ")" and maximal runs of non-delimiter characters."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "()":
            yield c, i
            i += 1
        elif c in " \t\n\r\f\v":
            i += 1
        else:
            j = i
            while j < n and text[j] not in _DELIMS:
                j += 1
            yield text[i:j], i
            i = j


class _Builder:
    """Incremental parser: feed tokens, collect finished trees (explicit stack; any depth)."""

    def __init__(self, where):
        self.where = where
        self.trees = []
        self._reset()

    def _reset(self):
        self.labels, self.parents, self.words, self.word_of = [], [], [], []
        self.stack = []  # node indices of open brackets
        self.kind = []  # per open bracket: None (nothing yet), "word", "node"
        self.expect_label = False

    @property
    def open(self):
        return bool(self.stack) or self.expect_label

    def feed(self, tok, pos):
        if self.expect_label:
            self.expect_label = False
            if tok in "()":
                self.labels[-1] = ""
            else:
                self.labels[-1] = tok
                return
        if tok == "(":
            n = len(self.labels)
            parent = self.stack[-1] if self.stack else -1
            if self.stack:
                if self.kind[-1] == "word":
                    raise PTBFormatError(f"{self.where(pos)}: a bracket follows a word inside the same "
                                         f"constituent; a node holds either one word or sub-brackets")
                self.kind[-1] = "node"
            self.labels.append(None)
            self.parents.append(parent)
            self.word_of.append(-1)
            self.stack.append(n)
            self.kind.append(None)
            self.expect_label = True
        elif tok == ")":
            if not self.stack:
                raise PTBFormatError(f"{self.where(pos)}: unbalanced ')' (no open bracket)")
            n = self.stack.pop()
            k = self.kind.pop()
            if k is None:
                raise PTBFormatError(f"{self.where(pos)}: empty constituent ({self.labels[n]!r} with no "
                                     f"word and no children)")
            if not self.stack:
                self._finish()
        else:
            if not self.stack:
                raise PTBFormatError(f"{self.where(pos)}: word {tok!r} outside any bracket")
            if self.kind[-1] is not None:
                what = "a second word" if self.kind[-1] == "word" else "a word after sub-brackets"
                raise PTBFormatError(f"{self.where(pos)}: {what} ({tok!r}) in constituent "
                                     f"{self.labels[self.stack[-1]]!r}; a node holds either one word or "
                                     f"sub-brackets")
            self.kind[-1] = "word"
            self.word_of[self.stack[-1]] = len(self.words)
            self.words.append(tok)

    def _finish(self):
        labels, parents, word_of = self.labels, self.parents, self.word_of
        # PTB wrapper "( (S ...) )": unlabelled root with a single child node -> drop it
        while labels and labels[0] == "" and word_of[0] == -1 and parents.count(0) == 1:
            labels, parents, word_of = labels[1:], [p - 1 if p > 0 else -1 for p in parents[1:]], \
                word_of[1:]
        T = len(labels)
        lo = [None] * T
        hi = [None] * T
        for n in range(T - 1, -1, -1):  # children come after their parents in pre-order
            if word_of[n] >= 0:
                lo[n], hi[n] = word_of[n], word_of[n] + 1
            p = parents[n]
            if p >= 0:
                lo[p] = lo[n] if lo[p] is None else min(lo[p], lo[n])
                hi[p] = hi[n] if hi[p] is None else max(hi[p], hi[n])
        self.trees.append(PTBTree(labels, parents, self.words, list(zip(lo, hi)), word_of))
        self._reset()


def parse_ptb(text):
    """Parse every tree in the string ``text``; returns a list of :class:`PTBTree`.

    Raises
    ------
    PTBFormatError
        Unbalanced brackets, a word outside a bracket, a constituent with two words or with both words
        and sub-brackets, an empty constituent (the character offset is named).
    """
    b = _Builder(lambda pos: f"offset {pos}")
    for tok, pos in _tokens(text):
        b.feed(tok, pos)
    if b.open:
        raise PTBFormatError(f"offset {len(text)}: unexpected end of input ({len(b.stack)} bracket(s) "
                             f"still open)")
    return b.trees


def read_ptb(path_or_file, *, encoding="utf-8"):
    """Read bracketed trees from a file (``.gz`` decompressed); returns a list of :class:`PTBTree`.

    Cost: one pass, O(file size) (SST train, 8,544 trees / 318,582 nodes: about 1 s).

    Raises
    ------
    FileNotFoundError
        If the path does not exist.
    PTBFormatError
        As :func:`parse_ptb`, with the file name and line number; text that is not UTF-8, a truncated or
        corrupt gzip file. No other error for a damaged file.
    """
    name = describe(path_or_file)
    line_no = [0]
    b = _Builder(lambda pos: f"{name}, line {line_no[0]}")
    with open_text(path_or_file, "r", encoding=encoding, error=PTBFormatError) as fh:
        for line_no[0], line in enumerate(fh, 1):
            for tok, pos in _tokens(line):
                b.feed(tok, pos)
    if b.open:
        raise PTBFormatError(f"{name}: unexpected end of file ({len(b.stack)} bracket(s) still open)")
    return b.trees


def _length_bucket(n):
    for cap, name in ((1, "1"), (2, "2"), (3, "3"), (4, "4"), (6, "5-6"), (9, "7-9"), (14, "10-14"),
                      (19, "15-19"), (29, "20-29")):
        if n <= cap:
            return name
    return "30+"


def span_items(tree, *, lower=True, bag=True, boundary=True, length=True):
    """Span features of every node (the SST features of issue 6), as TreeCRF items.

    For node n with token span [s, e): ``w:<word>`` for each word of the span (a bag of words; a repeated
    word counts twice) when ``bag``; ``first=``/``last=`` the first and last word when ``boundary``;
    ``len=`` a bucket of e - s (1, 2, 3, 4, 5-6, 7-9, 10-14, 15-19, 20-29, 30+) when ``length``;
    ``leaf`` (1.0) for leaves and ``bias`` (1.0) for every node. Words are lower-cased when ``lower``.

    Returns
    -------
    list of dict
        One item per node, in the tree's node order. Cost O(Σ span lengths) = O(T · depth).
    """
    words = [w.lower() for w in tree.words] if lower else list(tree.words)
    items = []
    for n, (s, e) in enumerate(tree.spans):
        item = {"bias": 1.0}
        if tree.word_of[n] >= 0:
            item["leaf"] = 1.0
        if bag:
            for w in words[s:e]:
                k = "w:" + w
                item[k] = item.get(k, 0.0) + 1.0
        if boundary:
            item["first=" + words[s]] = 1.0
            item["last=" + words[e - 1]] = 1.0
        if length:
            item["len=" + _length_bucket(e - s)] = 1.0
        items.append(item)
    return items


def child_positions(tree):
    """Position of every node among its parent's children ("0", "1", …; None for the root).

    For binary trees such as SST this is "0" = left child, "1" = right child: handy ``edge_attributes``.
    """
    count = {}
    out = []
    for p in tree.parents:
        if p < 0:
            out.append(None)
        else:
            k = count.get(p, 0)
            count[p] = k + 1
            out.append(str(k))
    return out


def edge_items(tree, *, lower=True, sibling_words=2):
    """Attributes of the edge from every node to its parent (None for the root), for ``edge_attributes``.

    ``pos=<i>``: the node's position among its parent's children (:func:`child_positions`); for every
    sibling s: ``sibfirst=<first word of s>`` and, when s spans at most ``sibling_words`` words,
    ``sib=<its words>``. With tree-CRF edge features (edge attribute × child label × parent label) these
    let a sibling such as "not" or "but" change how the child's label relates to the parent's — the
    composition the independent per-node model cannot express.
    """
    words = [w.lower() for w in tree.words] if lower else list(tree.words)
    pos = child_positions(tree)
    kids = {}
    for n, p in enumerate(tree.parents):
        if p >= 0:
            kids.setdefault(p, []).append(n)
    out = []
    for n, p in enumerate(tree.parents):
        if p < 0:
            out.append(None)
            continue
        attrs = ["pos=" + pos[n]]
        for s in kids[p]:
            if s != n:
                a, b = tree.spans[s]
                attrs.append("sibfirst=" + words[a])
                if b - a <= sibling_words:
                    attrs.append("sib=" + " ".join(words[a:b]))
        out.append(attrs)
    return out
