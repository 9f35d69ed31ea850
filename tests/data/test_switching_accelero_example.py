"""Issue 14, real data: the loader of ``examples/hsmm_switching_accelero.py`` (the counts of the data set's
SOURCE.md) and the switching HSMM against the plain HSMM on held-out days (bounds: the script's quick-run
numbers with a margin; see its docstring)."""
import numpy as np
import pytest

from tests.conftest import require_data, script_module


@pytest.fixture(scope="module")
def example():
    require_data("mhmm_accelero")
    return script_module("examples/hsmm_switching_accelero.py", "hsmm_switching_accelero_example")


def test_accelero_loader_counts(example):
    series = example.load()
    assert [x.size for x in series] == [1158, 1150, 1159]
    assert [int(np.isnan(x).sum()) for x in series] == [24, 3, 0]
    assert [round(float(np.nanmean(x)), 2) for x in series] == [88.34, 11.13, 65.45]
    train, test = example.prepare(series)
    assert [x.shape for x in train] == [(864, 1)] * 3 and [x.shape[0] for x in test] == [294, 286, 295]
    np.testing.assert_allclose([np.nanmean(x) for x in train], 0.0, atol=1e-12)


@pytest.mark.slow
def test_switching_beats_plain_hsmm_on_held_out_days(example):
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    train, test = example.prepare(example.load())
    Xtr, Ltr = np.concatenate(train), [len(x) for x in train]
    Xte, Lte = np.concatenate(test), [len(x) for x in test]
    n_te = int((~np.isnan(Xte)).sum())
    models = example.models(quick=True)
    scores = {}
    for name in ("switching HSMM, 2 regimes x 3 levels, shared emissions", "HSMM, 3 states"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            scores[name] = models[name].fit(Xtr, Ltr).score(Xte, Lte) / n_te
    sw, plain = scores.values()
    assert sw == pytest.approx(-0.675, abs=0.01) and plain == pytest.approx(-0.713, abs=0.01)
    assert sw > plain + 0.02
