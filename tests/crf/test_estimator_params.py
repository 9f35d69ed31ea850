"""The CRF estimators' declared parameters (``_parameters``) against their signatures; the scikit-learn
contract (get_params / set_params / clone); the constraint checks."""
import inspect

import numpy as np
import pytest
from sklearn.base import clone

from structlearn.learning.params import Param, check_param, describe_constraint
from structlearn.crf.linear_chain import LinearChainCRF
from structlearn.crf.higher_order import HigherOrderCRF
from structlearn.crf.semi_markov import SemiMarkovCRF
from structlearn.crf.tree import TreeCRF

ESTIMATORS = [LinearChainCRF, SemiMarkovCRF, HigherOrderCRF, TreeCRF]


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_parameters_match_the_signature(cls):
    sig = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]
    assert [p.name for p in cls._parameters] == [p.name for p in sig]
    for declared, actual in zip(cls._parameters, sig):
        assert declared.default == actual.default, declared.name
        assert isinstance(declared.help, str) and declared.help and "\n" not in declared.help
        check_param(declared, declared.default)  # every default satisfies its own constraint


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_get_set_params_and_clone(cls):
    est = cls()
    params = est.get_params()
    assert params == {p.name: p.default for p in cls._parameters}
    est.set_params(c2=0.5, max_iterations=7)
    assert est.get_params()["c2"] == 0.5 and est.max_iterations == 7
    twin = clone(est)
    assert twin is not est and twin.get_params() == est.get_params()
    assert not hasattr(twin, "coef_")


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_every_parameter_is_validated_at_fit(cls):
    X, y = [[{"a": 1.0}, {"b": 1.0}]], [["A", "B"]]
    kw = {"parents": [[-1, 0]]} if cls is TreeCRF else {}
    with pytest.raises(ValueError, match="`c2` must be a non-negative finite number; got -1"):
        cls(c2=-1).fit(X, y, **kw)
    with pytest.raises(ValueError, match="`max_iterations` must be a positive integer or None; got 0"):
        cls(max_iterations=0).fit(X, y, **kw)
    with pytest.raises(ValueError, match="`linesearch` must be 'MoreThuente', 'Backtracking' or "):
        cls(linesearch="Wolfe").fit(X, y, **kw)


@pytest.mark.parametrize("constraint, good, bad, words", [
    ("float>=0", [0, 1.5, np.float32(2)], [-1, float("nan"), float("inf"), True, "1"],
     "a non-negative finite number"),
    ("float>0", [0.1], [0, -1.0], "a positive finite number"),
    ("int>=1|None", [None, 1, np.int64(3)], [0, 2.0, True], "a positive integer or None"),
    ("int>=0", [0, 5], [-1], "a non-negative integer"),
    ("{0,1,2}", [0, 2], [3, "1"], "0, 1 or 2"),
    ("{sparse,dense}|None", ["dense", None], ["x", 1], "'sparse', 'dense' or None"),
    ("bool", [True, False, np.bool_(True), 0, 1], [2, "yes", None], "a boolean"),
    ("str|pairs|None", ["BIO", [("A", "B")], (), None], [[("A",)], ["AB"], 3],
     "a string, a list of pairs or None"),
    ("list{first,last}", [(), ["first"], ("last", "first")], ["first", ("span",)],
     "a list of names among 'first' or 'last'"),
    ("int>=1|dict|None", [3, {"A": 2}, None], [0, "3"], "a positive integer, a dict or None"),
    ("any", [object(), None], [], "anything"),
])
def test_constraints(constraint, good, bad, words):
    p = Param("x", None, constraint, "help")
    assert describe_constraint(constraint) == words
    for v in good:
        check_param(p, v)
    for v in bad:
        with pytest.raises(ValueError, match=r"^`x` must be "):
            check_param(p, v)


def test_unknown_constraint_is_an_error():
    with pytest.raises(ValueError, match="unknown parameter constraint"):
        describe_constraint("integer")
