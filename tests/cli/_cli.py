"""Helpers of the CLI tests: run ``structlearn`` in-process, split ``tag`` output into sequences, tiny
chunking data."""
import random

from structlearn.cli.main import main


def run(capsys, *argv):
    """``main(argv)`` in-process: (exit code, stdout, stderr)."""
    rc = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def blocks(text):
    """Output of 'tag' -> list of sequences (list of lines), split at blank lines."""
    seqs, cur = [], []
    for line in text.split("\n"):
        if line == "":
            if cur:
                seqs.append(cur)
            cur = []
        else:
            cur.append(line)
    if cur:
        seqs.append(cur)
    return seqs


def chunk_sentences(n, seed, pools):
    """``n`` sentences NP VP NP [PP NP] . of (word, pos, chunk) tokens with IOB2 chunk tags: each (word,
    pos) drawn with ``random.Random(seed)`` from ``pools["DT"]``, ``["NN"]``, ``["VBZ"]`` or ``["IN"]``."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        s = []

        def np_():
            s.append((*rng.choice(pools["DT"]), "B-NP"))
            s.append((*rng.choice(pools["NN"]), "I-NP"))

        np_()
        s.append((*rng.choice(pools["VBZ"]), "B-VP"))
        np_()
        if rng.random() < 0.5:
            s.append((*rng.choice(pools["IN"]), "B-PP"))
            np_()
        s.append((".", ".", "O"))
        out.append(s)
    return out
