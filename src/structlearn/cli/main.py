"""The ``structlearn`` command: train, apply, evaluate and inspect linear-chain CRFs like CRFsuite.

Subcommands (modelled on the ``crfsuite`` command of Okazaki's CRFsuite: ``learn``, ``tag``, ``dump``)::

    structlearn learn -m MODEL [-a ALG] [-p NAME=VALUE ...] [--format crfsuite|conll] [--template T]
                      [--columns w,pos,y] [-e DEV] [--forbid BIO] [-q|-v] TRAIN...
    structlearn tag   -m MODEL [-i] [-p] [-k K] [-r] [-t] [-q] [--format ...] [--template T] INPUT
    structlearn eval  GOLD PRED | --conll FILE
    structlearn dump  MODEL [-n TOP]
    structlearn info  MODEL
    structlearn demo  [--data-home DIR] [--max-iterations N] [--download] [-q|-v]
    structlearn compile [--jobs N] [--families A,B] [--check] [-q]

Input files are CRFsuite attribute files (``label<TAB>attr[:value]<TAB>…``, blank line between sequences;
see :mod:`structlearn.io.crfsuite`) or, with ``--format conll``, CoNLL column files turned into attributes by
a feature template (``--template chunking|ner|ner-nochunk`` or a JSON template file; see
:mod:`structlearn.io.templates`). ``-`` reads standard input.

How ``tag`` knows how to featurise CoNLL input
----------------------------------------------
``learn`` records the input format and the *full* template (not only its name, so later changes of a shipped
template cannot silently change a trained model's features) in the model file itself, under the header's
user metadata (``LinearChainCRF.save(path, metadata=...)``, read back as ``metadata_``) as the entry
``"featurizer"``: ``{"format": "conll", "template": "chunking", "spec": {...}, "columns": [...] | null}``.
No side-car file is written. ``tag`` uses it unless ``--format``/``--template``/``--columns`` are given on
its command line, which override it. When tagging CoNLL input that lacks the label column
(one column fewer than the template's fields), the label field is dropped automatically.

Output of ``tag`` (as ``crfsuite tag``): one label per line, a blank line after each sequence; ``-i`` writes
``label:marginal``; ``-p`` writes ``@probability<TAB>p`` before each sequence; ``-r`` writes
``gold<TAB>predicted``; ``-k K`` writes, for each sequence, K blocks ``@kbest<TAB>rank<TAB>p`` + labels + blank
line (the layout of CRF++'s ``-n``); ``-t`` prints the evaluation against the gold labels of the input
(per-label precision/recall/F1, item and sequence accuracy, conlleval chunk scores); ``-q`` suppresses the
labels.

Errors in files or arguments print one line ``structlearn: error: …`` on standard error and exit with
status 2; warnings (e.g. L-BFGS hitting ``max_iterations``) print ``structlearn: warning: …``.

This module is only the entry point; the subcommands live in :mod:`.learn`, :mod:`.tag`, :mod:`.report`
(eval, dump, info), :mod:`.demo` and :mod:`.compile` (every estimator's kernels into Numba's cache), on
:mod:`.parser` (argparse), :mod:`.params` (``-p NAME=VALUE``), :mod:`.featurize` (input files -> X, y) and
:mod:`.common`.
"""
import os
import sys

import importlib

from ..utils.interrupts import as_interrupt
from .common import PROG, CLIError
from .parser import build_parser

__all__ = ["main", "build_parser", "CLIError"]

#: command -> (module of structlearn.cli, function); a command's module is imported when it runs, so that
#: ``tag`` does not pay for the imports of ``learn`` or ``demo``
_COMMANDS = {"learn": ("learn", "cmd_learn"), "tag": ("tag", "cmd_tag"), "eval": ("report", "cmd_eval"),
             "dump": ("report", "cmd_dump"), "info": ("report", "cmd_info"), "demo": ("demo", "cmd_demo"),
             "compile": ("compile", "cmd_compile")}


def main(argv=None):
    """Run the ``structlearn`` command with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    0 on success; 2 on a bad argument or input (one line ``structlearn: error: …`` on stderr); 130 when
    interrupted.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help, --version
            return exc.code if isinstance(exc.code, int) else 0
        if args.command is None:
            parser.print_help()
            return 2
        module, function = _COMMANDS[args.command]
        return getattr(importlib.import_module(f"{__package__}.{module}"), function)(args)
    except CLIError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # pragma: no cover - e.g. 'structlearn tag ... | head'
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        msg = exc.strerror and exc.filename and f"{exc.filename}: {exc.strerror}" or str(exc)
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 2
    except ValueError as exc:  # bad input: malformed file (file:line), model file errors, bad parameters
        print(f"{PROG}: error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
              file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C; learn writes its model file only after training, atomically
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except SystemError as exc:  # a Ctrl-C that a Numba kernel wrapped (structlearn.utils.interrupts)
        if not isinstance(as_interrupt(exc), KeyboardInterrupt):
            raise
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
