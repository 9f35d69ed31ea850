"""One set of duration (``durations``) and emission (``emissions``) laws for every HMM, HSMM and HHMM, with
the censoring of durations (``durations.censoring``); the public facades are :mod:`structlearn.durations`
and :mod:`structlearn.emissions`."""
