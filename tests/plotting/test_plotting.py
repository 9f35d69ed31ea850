"""Image tests of structlearn.plotting (Agg backend): every function renders on a small fitted model, draws
something (the canvas is not one colour), gives a figure of the requested pixel size, renders the same
pixels twice, and rejects bad input with a ValueError naming the argument."""
import subprocess
import sys
import warnings

import numpy as np
import pytest

import matplotlib  # the dev extra installs it (and the `plot` extra)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402

from structlearn import (GaussianHMM, GraphCRF, HiddenSemiMarkovModel, HierarchicalHMM,  # noqa: E402
                         LinearChainCRF, ResidentialTimeHMM, VariableTransitionHMM, plotting)
from structlearn.datasets.toy import hhmm_figure1  # noqa: E402
from structlearn.distributions.emissions import Categorical  # noqa: E402
from structlearn.engine.structures.graphs import grid_graph  # noqa: E402

DPI = 50


@pytest.fixture(autouse=True)
def _agg():
    with plt.rc_context({"figure.dpi": DPI, "savefig.dpi": DPI}):
        yield
    plt.close("all")


def render(obj):
    """RGBA pixels of the figure of ``obj`` (an Axes or an array of Axes), after checking them."""
    ax = np.ravel(np.asarray(obj, dtype=object))[0]
    fig = ax.figure
    fig.canvas.draw()
    buf = np.asarray(fig.canvas.buffer_rgba())
    w, h = fig.canvas.get_width_height()
    assert buf.shape == (h, w, 4)
    assert (w, h) == (round(fig.get_figwidth() * DPI), round(fig.get_figheight() * DPI))
    flat = buf[..., :3].reshape(-1, 3)
    assert np.unique(flat[:: max(1, flat.shape[0] // 20000)], axis=0).shape[0] > 5  # not one colour
    return buf


def same_twice(make):
    """Build the plot twice: same pixel size and same pixels."""
    a = render(make())
    plt.close("all")
    b = render(make())
    assert a.shape == b.shape
    np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------------------------------
# small fitted models (module scope: fitted once)
# ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def series():
    rng = np.random.default_rng(0)
    levels = np.r_[np.zeros(12), np.ones(18), np.zeros(15), np.ones(10), np.zeros(14), np.ones(11)]
    return levels[:, None] + 0.2 * rng.normal(size=(levels.size, 1)), np.array([45, 35])


@pytest.fixture(scope="module")
def hsmm(series):
    X, lengths = series
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return HiddenSemiMarkovModel(2, duration="poisson", max_duration=25, n_iter=8,
                                     random_state=0).fit(X, lengths)


@pytest.fixture(scope="module")
def crf():
    sents = ["the cat sat", "a dog ran fast", "the dog sat down", "a cat ran"]
    tags = ["D N V", "D N V A", "D N V A", "D N V"]
    X = [[{"w": w, "suf": w[-1]} for w in s.split()] for s in sents]
    return LinearChainCRF(max_iterations=15).fit(X, [t.split() for t in tags])


@pytest.fixture(scope="module")
def graph_crf():
    rng = np.random.default_rng(1)
    y = [np.repeat([0, 1, 2], [6, 5, 5])]
    X = [(np.eye(3)[y[0]] + rng.normal(scale=0.7, size=(16, 3)), grid_graph(4, 4))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return GraphCRF(inference="exact", max_iterations=10).fit(X, y), X


FIG1 = hhmm_figure1()  # Murphy & Paskin (2001), Figure 1


@pytest.fixture(scope="module")
def hhmm():
    emit = 0.9 * np.eye(6)[[0, 4, 5, 1, 2, 3]] + 0.1 / 6
    sample = HierarchicalHMM(FIG1, Categorical(emit)).sample(20, random_state=0)
    model = HierarchicalHMM(FIG1, Categorical(n_features=6), init_params="e", n_iter=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(sample.X, sample.lengths)
    return model, sample


# ------------------------------------------------------------------------------------------------------
def test_import_does_not_import_matplotlib():
    code = "import sys, structlearn.plotting; assert 'matplotlib' not in sys.modules, 'imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_plot_segmentation(hsmm, series):
    X, lengths = series
    same_twice(lambda: plotting.plot_segmentation(X, model=hsmm, lengths=lengths,
                                                  state_names=["low", "high"], title="two sequences"))
    axes = plotting.plot_segmentation(X, model=hsmm, lengths=lengths, figsize=(6, 4))
    assert axes.shape == (4,)  # signal + bands per sequence
    assert len(axes[2].collections) > 0  # spans drawn
    states = hsmm.predict(X, lengths)
    axes = plotting.plot_segmentation(X[:45, 0], states[:45], figsize=(5, 2))
    assert axes.shape == (1,)
    render(axes)
    fig, ax = plt.subplots(figsize=(4, 2))
    assert plotting.plot_segmentation(X, states, axes=ax)[0] is ax


def test_plot_segmentation_errors(hsmm, series):
    X, lengths = series
    with pytest.raises(ValueError, match="`lengths`"):
        plotting.plot_segmentation(X, model=hsmm, lengths=[10, 10])
    with pytest.raises(ValueError, match="`states`"):
        plotting.plot_segmentation(X, np.zeros(3, dtype=int))
    with pytest.raises(ValueError, match="`proba`"):
        plotting.plot_segmentation(X, proba=np.ones((5, 2)))
    with pytest.raises(ValueError, match="`X`"):
        plotting.plot_segmentation(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="`sequences`"):
        plotting.plot_segmentation(X, model=hsmm, lengths=lengths, sequences=[5])
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match="`axes`"):
        plotting.plot_segmentation(X, model=hsmm, axes=ax)  # needs 2 (signal + bands)


def test_plot_durations_hsmm_and_hmm(hsmm, series):
    X, lengths = series
    same_twice(lambda: plotting.plot_durations(hsmm, X=X, lengths=lengths, include_censored=True))
    axes = plotting.plot_durations(hsmm, hsmm.predict(X, lengths), lengths=lengths, scale=0.5,
                                   unit="min", state_names=["low", "high"], title="durations")
    assert axes.shape == (2,)
    render(axes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        hmm = GaussianHMM(2, n_iter=5, random_state=0).fit(X, lengths)
    pmf = plotting.duration_pmf(hmm, max_duration=30)
    stay = np.diag(hmm.transmat_)
    np.testing.assert_allclose(pmf[:, 0], stay[0] ** np.arange(30) * (1 - stay[0]), rtol=1e-12)
    render(plotting.plot_durations(hmm, X=X, lengths=lengths))


def test_duration_pmf_general_family(series):
    X, lengths = series
    D = 8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        vt = VariableTransitionHMM(2, max_duration=D, n_iter=3, random_state=0).fit(X, lengths)
        rt = ResidentialTimeHMM(2, max_duration=D, n_iter=3, random_state=0).fit(X, lengths)
    pv = plotting.duration_pmf(vt)
    # p_j(d) = prod_{tau<d} a_jj(tau) (1 - a_jj(d)); the last hazard is 1, so each column sums to 1
    a = vt.transmat_[:, 1, 1]
    expect = np.array([np.prod(a[:d]) * (1 - a[d]) for d in range(D)])
    np.testing.assert_allclose(pv[:, 1], expect, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(pv.sum(axis=0), 1.0, rtol=1e-10)
    pr = plotting.duration_pmf(rt)
    assert pr.shape == (D, 2)
    np.testing.assert_allclose(pr.sum(axis=0), 1.0, rtol=1e-10)
    # with two states the previous segment is always the other state: p_j(d) = a_i(j, d) / sum_d
    np.testing.assert_allclose(pr[:, 1], rt.transmat_[0, 1] / rt.transmat_[0, 1].sum(), rtol=1e-10)
    render(plotting.plot_durations(vt, X=X, lengths=lengths))


def test_plot_durations_errors(hsmm):
    with pytest.raises(ValueError, match="`model` or `pmf`"):
        plotting.plot_durations()
    with pytest.raises(ValueError, match="`pmf`"):
        plotting.plot_durations(pmf=np.ones(3))
    with pytest.raises(ValueError, match="`scale`"):
        plotting.plot_durations(hsmm, scale=0)
    with pytest.raises(ValueError, match="`model`"):
        plotting.plot_durations(object())
    with pytest.raises(ValueError, match="`state_names`"):
        plotting.plot_durations(hsmm, state_names=["a"])


def test_plot_transitions(hsmm, crf):
    same_twice(lambda: plotting.plot_transitions(hsmm, state_names=["low", "high"], title="a_ij"))
    ax = plotting.plot_transitions(crf)
    assert [t.get_text() for t in ax.get_xticklabels()] == list(crf.classes_)
    render(ax)
    render(plotting.plot_transitions(np.full((25, 25), 0.04)))  # no annotations above 20 states
    with pytest.raises(ValueError, match="`transmat`"):
        plotting.plot_transitions(np.ones((2, 3)))
    with pytest.raises(ValueError, match="`transmat`"):
        plotting.plot_transitions(np.full((2, 2), -np.inf))
    with pytest.raises(ValueError, match="`transmat`"):
        plotting.plot_transitions(HiddenSemiMarkovModel(2))  # not fitted


def test_plot_training(hsmm, crf, hhmm):
    same_twice(lambda: plotting.plot_training(crf, title="L-BFGS"))
    ax = plotting.plot_training({"hsmm": hsmm, "values": [3.0, 2.0, 1.5]})
    assert len(ax.get_lines()) == 2
    render(ax)
    render(plotting.plot_training(hhmm[0]))
    render(plotting.plot_training(crf, key="gradient_norm"))
    with pytest.raises(ValueError, match="`estimator`"):
        plotting.plot_training(LinearChainCRF())
    with pytest.raises(ValueError, match="`key`"):
        plotting.plot_training(crf, key="nope")
    with pytest.raises(ValueError, match=r"`estimator\['x'\]`"):
        plotting.plot_training({"x": object()})


def test_plot_marginals_grid(graph_crf):
    model, X = graph_crf
    same_twice(lambda: plotting.plot_marginals_grid(model, (4, 4), X=X, class_names=["a", "b", "c"]))
    marg = model.predict_marginals(X)
    render(plotting.plot_marginals_grid(marg, (4, 4), label=2, title="P(c)"))
    render(plotting.plot_marginals_grid(np.concatenate([marg[0], marg[0]]), (4, 4), graph=1))
    with pytest.raises(ValueError, match="`marginals`"):
        plotting.plot_marginals_grid(marg, (3, 4))
    with pytest.raises(ValueError, match="`shape`"):
        plotting.plot_marginals_grid(marg, (4,))
    with pytest.raises(ValueError, match="`label`"):
        plotting.plot_marginals_grid(marg, (4, 4), label=3)
    with pytest.raises(ValueError, match="`X`"):
        plotting.plot_marginals_grid(model, (4, 4))


def test_plot_hierarchy(hhmm):
    model, sample = hhmm
    symbols = ["abcdxy"[int(v)] for v in sample.X[:sample.lengths[0], 0]]
    same_twice(lambda: plotting.plot_hierarchy(model, sample.X, lengths=sample.lengths, symbols=symbols,
                                               level_names=["branch", "part", "symbol"]))
    dec = model.decode(sample.X, sample.lengths)
    ax = plotting.plot_hierarchy(dec, sequence=3)
    assert len(ax.patches) == sum(len(lv) for lv in dec.segments[3])
    render(ax)
    render(plotting.plot_hierarchy([[(0, 5, "A")], [(0, 2, "a"), (2, 5, "b")]]))
    with pytest.raises(ValueError, match="`sequence`"):
        plotting.plot_hierarchy(dec, sequence=99)
    with pytest.raises(ValueError, match="`decoded`"):
        plotting.plot_hierarchy(np.zeros(3))
    with pytest.raises(ValueError, match="`X`"):
        plotting.plot_hierarchy(model)
    with pytest.raises(ValueError, match="`level_names`"):
        plotting.plot_hierarchy(dec, level_names=["one"])


def test_save_figure(crf, tmp_path):
    ax = plotting.plot_training(crf, figsize=(4, 3))
    path = plotting.save_figure(ax, tmp_path / "new" / "dir", "training", dpi=40)
    assert path == tmp_path / "new" / "dir" / "training.png" and path.stat().st_size > 1000
    import matplotlib.image

    assert matplotlib.image.imread(path).shape[:2] == (120, 160)
    assert not plt.get_fignums()  # closed


def test_plot_crf_weights(crf):
    same_twice(lambda: plotting.plot_crf_weights(crf, top=3, negative=2, title="weights"))
    ax = plotting.plot_crf_weights(crf, top=2, labels=["N", "V"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["N", "V"]
    render(ax)
    with pytest.raises(ValueError, match="`labels`"):
        plotting.plot_crf_weights(crf, labels=["Q"])
    with pytest.raises(ValueError, match="`top`"):
        plotting.plot_crf_weights(crf, top=0)
    with pytest.raises(ValueError, match="`crf`"):
        plotting.plot_crf_weights(GaussianHMM())
