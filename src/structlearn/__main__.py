"""``python -m structlearn``: the ``structlearn`` command (:mod:`structlearn.cli.main`).

The command runs only when this module is executed, not when it is imported (mkdocstrings and griffe import
every module of the package while building the API reference)."""
import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())
