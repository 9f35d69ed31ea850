"""Small models from the papers, for examples, tests and benchmarks."""
import copy

__all__ = ["hhmm_figure1"]

_FIGURE1 = {
    "root": {"children": ["S0", "S1"], "start": [0.5, 0.5], "trans": [[0, 0], [0, 0]], "end": [1, 1]},
    "S0": {"children": ["a", "XY", "b"], "start": [1, 0, 0],
           "trans": [[0, 1, 0], [0, 0, 1], [0, 0, 0]], "end": [0, 0, 1]},
    "S1": {"children": ["c", "XY", "d"], "start": [1, 0, 0],
           "trans": [[0, 1, 0], [0, 0, 1], [0, 0, 0]], "end": [0, 0, 1]},
    "XY": {"children": ["x", "y"], "start": [1, 0], "trans": [[0, 1], [0.6, 0]], "end": [0, 0.4]},
}


def hhmm_figure1():
    """The hierarchical HMM of Murphy & Paskin (2001), Figure 1, as a :class:`structlearn.HierarchicalHMM`
    spec (a new dict each call): the root chooses S0 or S1; S0 emits ``a (x y)+ b`` and S1 ``c (x y)+ d``,
    the ``x y`` loop being the shared sub-model XY. Production states in depth-first order: a, x, y, b, c, d.
    """
    return copy.deepcopy(_FIGURE1)
