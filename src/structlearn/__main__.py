"""``python -m structlearn``: the ``structlearn`` command (:mod:`structlearn.cli.main`)."""
import sys

from structlearn.cli.main import main

sys.exit(main())
