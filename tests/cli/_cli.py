"""Helpers of the CLI tests: run ``structlearn`` in-process, split ``tag`` output into sequences."""
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
