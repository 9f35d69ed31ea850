"""What every subcommand shares: the error type, output helpers and opening a model file."""
import os
import sys

__all__ = ["PROG", "STRUCTURE_NAMES", "CLIError", "Out", "say", "warn", "source", "human_size", "open_model", "redirect_say"]

PROG = "structlearn"

#: the values of ``learn --structure`` (the keys of :data:`structlearn.cli.learn.STRUCTURES`; named here so
#: that building the parser does not import ``learn``)
STRUCTURE_NAMES = ("chain", "tree", "semi-markov", "higher-order")


class CLIError(Exception):
    """A user error (bad argument or input): printed as one line, exit status 2."""


class Out:
    """Buffered writer to stdout (looked up at call time, so pytest's capsys sees it)."""

    def __init__(self):
        self.lines = []

    def __call__(self, line=""):
        self.lines.append(line)
        if len(self.lines) >= 4096:
            self.flush()

    def flush(self):
        if sys.stdout is None:  # started with standard output closed ('>&-')
            raise CLIError("standard output is closed; redirect it to a file or a pipe")
        if self.lines:
            sys.stdout.write("\n".join(self.lines) + "\n")
            self.lines = []
        sys.stdout.flush()


_SAY = []   # a stack of files that say() writes to instead of stdout (learn -l)


def say(line=""):
    print(line, file=_SAY[-1] if _SAY else sys.stdout, flush=True)


class redirect_say:
    """Context manager: ``say`` writes to ``fh`` (the training log of ``learn -l``)."""

    def __init__(self, fh):
        self.fh = fh

    def __enter__(self):
        _SAY.append(self.fh)
        return self.fh

    def __exit__(self, *exc):
        _SAY.pop()
        return False


def warn(message):
    print(f"{PROG}: warning: {message}", file=sys.stderr, flush=True)


def source(path):
    """The file to read for ``path``: ``-`` is standard input's bytes (decoded as UTF-8 like a file,
    whatever the locale or PYTHONIOENCODING, and gzip recognised), anything else a path."""
    if path != "-":
        return path
    if sys.stdin is None:  # started with standard input closed ('<&-')
        raise CLIError("'-' reads standard input, which is closed")
    return getattr(sys.stdin, "buffer", sys.stdin)  # a test's StringIO has no buffer


def human_size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def open_model(path):
    """(estimator, header) of the model file ``path`` (-m of tag, the MODEL of dump and info)."""
    from ..io.modelfile import MODEL_FORMATS, load_estimator, read_header
    from .learn import STRUCTURES

    if path == "-" and not os.path.exists(path):
        raise CLIError("-m -: a model is read from a file, not from standard input")
    if not os.path.exists(path):
        raise CLIError(f"model file not found: {path!r}")
    if os.path.isdir(path):
        raise CLIError(f"{path}: is a folder, not a model file")
    if not os.path.isfile(path):  # a fifo or a device: a model file is read more than once
        raise CLIError(f"{path}: not a regular file; a model file must be a file on disk")
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic == b"lCRF":  # a CRFsuite model file (crfsuite learn, python-crfsuite, sklearn-crfsuite)
        from ..crf.linear_chain import LinearChainCRF

        try:
            est = LinearChainCRF.load(path)
        except ValueError as exc:
            raise CLIError(str(exc)) from None
        return est, {"format": "linear-chain-crf", "version": "crfsuite (lCRF, FOMC 100)",
                     "structlearn_version": "-"}
    if magic not in (b"PK\x03\x04", b"PK\x05\x06"):  # an .npz is a zip archive; anything else would reach
        # numpy's pickle check
        raise CLIError(f"{path}: not a structlearn model file (expected an .npz archive written by "
                       f"'{PROG} learn'); check the -m argument")
    try:
        header = read_header(path)
        fmt = header.get("format")
        handled = [s.format for s in STRUCTURES.values()]  # the formats the command trains
        if fmt in MODEL_FORMATS and fmt not in handled:
            raise CLIError(f"{path}: a {fmt!r} model file; the {PROG} command handles {', '.join(handled)} "
                           f"models")
        return load_estimator(path), header
    except RecursionError:  # json.loads of a header nested thousands deep (before RuntimeError, its base)
        raise CLIError(f"{path}: not a readable model file (its JSON header is nested too deeply)") from None
    except (NotImplementedError, RuntimeError) as exc:  # zipfile's answers to some corrupted archive headers
        # (an unknown compression or version; the encryption flag set: RuntimeError)
        raise CLIError(f"{path}: not a readable model file (corrupt .npz archive: {exc})") from None
    except MemoryError:  # NumPy allocates the shape an array's header claims before reading it
        raise CLIError(f"{path}: not enough memory for the model's arrays (or a corrupt file claims a huge "
                       "array)") from None
