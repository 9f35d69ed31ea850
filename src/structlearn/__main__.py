"""``python -m structlearn``: the ``structlearn`` command (:mod:`structlearn.cli.main`)."""
import sys

from .cli.main import main

sys.exit(main())
