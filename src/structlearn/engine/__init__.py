"""The one engine: semirings (``semirings``), Numba kernels (``kernels``: arrays in, arrays out) and the
structures over them (``structures``: chain, sparse chain, semi-Markov, super-label, tree, factor graphs with
exact and loopy inference). It knows no features, EM or estimators; every model family is an adapter that
produces potentials for it."""
