"""Tiny fit + predict workloads, one per estimator family: what a new user runs first on each estimator.

Also one per structure of the engine (``LinearChain``, ``SemiMarkov``, ``Tree``: every query on a tiny
batch). ``structlearn compile`` (run by the package's build) runs them all so that Numba's cache of every
kernel they need ships in the package; ``tests/engine/test_compile_reproducible.py`` checks that a
first call after install compiles nothing and that kernels compiled on demand give the same bits.

``WORKLOADS`` maps a family name to a function of no arguments that builds its own tiny synthetic input
(``numpy.random.default_rng(0)``; no data files, no network) and runs ``fit`` then ``predict`` plus the
one or two methods users call first for that family (``predict_proba`` / ``score`` for the HMMs and
HSMMs, ``decode`` for the HSMMs, ``predict_marginals`` for the CRFs, ``infer`` for ``FactorGraph``, the
log-likelihood, its backward pass and ``decode`` for ``structlearn.torch.CRF``). Running every workload
once compiles (or loads from Numba's cache) every kernel those first calls need; once compiled, each
workload runs in well under half a second.

Estimators are imported inside each function, so importing this module imports only NumPy and the
standard library (torch only inside the ``"torch-CRF"`` workload). Warnings (e.g. the
``ConvergenceWarning`` of the deliberately short fits) are silenced around each workload (``_quiet``),
all but :class:`structlearn.CompilationWarning`, which is passed on (``structlearn compile`` silences it
itself; the compile tests count it).
"""
import functools
import os
import sys
import warnings

import numpy as np

__all__ = ["WORKLOADS", "OPTIONAL", "digest"]

def _quiet(workload):
    """``workload`` with its own warnings silenced, but a compile notice passed on to the caller's filters."""
    @functools.wraps(workload)
    def run():
        from .._compile_notice import CompilationWarning

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = workload()
        for w in caught:
            if issubclass(w.category, CompilationWarning):
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return result

    return run


# -- tiny synthetic inputs ---------------------------------------------------------------------------------

_CHUNK_WORDS = {"NP": ("the", "a", "dog", "cat", "man", "old"), "VP": ("barks", "sleeps", "walks", "chase"),
                "PP": ("in", "on", "with"), "O": (".", ",", "and")}


def _chunked_sentences(rng, n_sentences=12):
    """Sentences as lists of (word, chunk type), made of 1..4 chunks of 1..3 words (consecutive chunks of
    different types)."""
    types = list(_CHUNK_WORDS)
    out = []
    for _ in range(n_sentences):
        sentence, kind = [], None
        for _ in range(int(rng.integers(1, 5))):
            kind = [t for t in types if t != kind][int(rng.integers(len(types) - 1))]
            length = 1 if kind == "O" else int(rng.integers(1, 4))
            words = _CHUNK_WORDS[kind]
            sentence.extend((words[int(rng.integers(len(words)))], kind) for _ in range(length))
        out.append(sentence)
    return out


def _token_features(sentence, i):
    word = sentence[i][0]
    return {"w": word, "suffix2": word[-2:], "bias": 1.0,
            "prev_w": sentence[i - 1][0] if i > 0 else "BOS",
            "next_w": sentence[i + 1][0] if i + 1 < len(sentence) else "EOS"}


def _bio(sentence):
    """BIO tags of a chunked sentence (a chunk is a run of one type; O stays O)."""
    return ["O" if kind == "O" else ("I-" if i and sentence[i - 1][1] == kind else "B-") + kind
            for i, (_, kind) in enumerate(sentence)]


def _tagging_data(n_sentences=12):
    """(X, y_bio, y_types): token feature dicts, BIO tags and plain chunk types per token."""
    sentences = _chunked_sentences(np.random.default_rng(0), n_sentences)
    X = [[_token_features(s, i) for i in range(len(s))] for s in sentences]
    return X, [_bio(s) for s in sentences], [[kind for _, kind in s] for s in sentences]


def _segments_1d(n_segments=16, levels=(0.0, 3.0)):
    """(X (N, 1), lengths): segments alternating between ``levels``, durations 3..8, two sequences."""
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(levels[k % len(levels)], 0.7, int(rng.integers(3, 9)))
                        for k in range(n_segments)])[:, None]
    return X, [len(X) // 2, len(X) - len(X) // 2]


def _graphs(n_graphs=6, side=4):
    """GraphCRF samples: noisy ``side x side`` images of a diagonal boundary between labels 0 and 1."""
    from ..engine.structures.graphs import grid_graph

    rng = np.random.default_rng(0)
    edges = grid_graph(side, side)
    X, y = [], []
    for _ in range(n_graphs):
        labels = (np.add.outer(np.arange(side), np.arange(side)) > rng.integers(2, 2 * side - 2))
        labels = labels.astype(np.int64).ravel()
        X.append((np.eye(2)[labels] + rng.normal(scale=0.8, size=(side * side, 2)), edges))
        y.append(labels)
    return X, y


# -- structures (the engine's public API) -------------------------------------------------------------


def _structure_queries(structure, extra=()):
    out = [structure.log_partition(), structure.marginals(), structure.marginals(edge="none"),
           structure.argmax(), structure.max(), structure.kbest(3), structure.sample(4, random_state=0),
           structure.entropy()]
    return out + [getattr(structure, name)() for name in extra]


def _linear_chain():
    from ..engine.structures import LinearChain

    rng = np.random.default_rng(0)
    unary, lengths = rng.normal(size=(12, 3)), [5, 4, 3]
    out = _structure_queries(LinearChain(unary, rng.normal(size=(3, 3)), lengths=lengths,
                                         start=rng.normal(size=3), end=rng.normal(size=3)))
    out += _structure_queries(LinearChain(unary, rng.normal(size=(12, 3, 3)), lengths=lengths))  # time-varying
    return out + _chain_marginals_modes()


def _chain_marginals_modes():
    """The chain kernel's marginals in every edge mode, serial and on 2 threads (a batch big enough for its
    parallel path): the training and inference paths of the chain CRFs and HMMs."""
    from ..engine.kernels.chain import chain_marginals

    rng = np.random.default_rng(0)
    K = 7
    lengths = rng.integers(5, 40, size=200)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    unary = rng.normal(scale=3.0, size=(int(lengths.sum()), K))
    trans, start, end = rng.normal(size=(1, K, K)), rng.normal(size=K), rng.normal(size=K)
    return [chain_marginals(unary, trans, start, end, offsets, mode, threads)
            for mode in (1, 2, 3) for threads in (1, 2)]


def _semi_markov():
    from ..engine.structures import SemiMarkov

    rng = np.random.default_rng(0)
    structure = SemiMarkov(rng.normal(size=(12, 3)), rng.normal(size=(4, 3)), rng.normal(size=(3, 3)),
                           lengths=[5, 4, 3], start=rng.normal(size=3), end=rng.normal(size=3))
    return _structure_queries(structure, extra=("segment_marginals", "duration_marginals", "argmax_segments"))


def _tree():
    from ..engine.structures import Tree

    rng = np.random.default_rng(0)
    parent = np.array([-1, 0, 0, 1, 1, -1, 0, 1, 1])
    return _structure_queries(Tree(rng.normal(size=(9, 3)), rng.normal(size=(3, 3)), parent, lengths=[5, 4]))


# -- CRFs ----------------------------------------------------------------------------------------------


def _linear_chain_crf():
    from .. import LinearChainCRF

    X, y, _ = _tagging_data()
    crf = LinearChainCRF(algorithm="lbfgs", c1=0.0, c2=0.1, max_iterations=10,
                         forbidden_transitions="BIO").fit(X, y)
    sgd = LinearChainCRF(algorithm="l2sgd", c2=0.1, max_iterations=5, random_state=0).fit(X, y)
    return [crf.predict(X), crf.predict_marginals(X), sgd.predict(X), sgd.coef_]


def _semi_markov_crf():
    from .. import SemiMarkovCRF

    X, y, _ = _tagging_data()
    crf = SemiMarkovCRF(c2=0.1, max_iterations=10).fit(X, y)
    return [crf.predict(X), crf.predict_segments(X), crf.predict_marginals(X)]


def _higher_order_crf():
    from .. import HigherOrderCRF

    X, y, _ = _tagging_data()
    crf = HigherOrderCRF(order=2, c2=0.1, max_iterations=10).fit(X, y)
    return [crf.predict(X), crf.predict_marginals(X)]


def _higher_order_crf_segments():
    from .. import HigherOrderCRF

    X, _, types = _tagging_data()  # segments are the runs of equal labels: chunk types, not BIO
    crf = HigherOrderCRF(order=2, segments=True, c2=0.1, max_iterations=10).fit(X, types)
    return [crf.predict(X), crf.predict_marginals(X)]


def _tree_crf():
    from .. import TreeCRF

    rng = np.random.default_rng(0)
    labels = ("A", "B", "C")
    X, y, parents = [], [], []
    for _ in range(12):
        n = int(rng.integers(2, 8))
        par = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
        lab = [int(rng.integers(3))]
        for i in range(1, n):  # mostly "parent's label + 1"
            lab.append((lab[par[i]] + 1) % 3 if rng.random() < 0.7 else int(rng.integers(3)))
        X.append([{"w": f"w{k}{int(rng.integers(2))}", "bias": 1.0} for k in lab])
        y.append([labels[k] for k in lab])
        parents.append(par)
    crf = TreeCRF(c2=0.1, max_iterations=10).fit(X, y, parents=parents)
    return [crf.predict(X, parents=parents), crf.predict_marginals(X, parents=parents)]


# -- HMMs (structlearn.hmm, hmmlearn's API) ------------------------------------------------------------


def _hmm_first_calls(model, X, lengths):
    model.fit(X, lengths)
    return [model.predict(X, lengths), model.predict_proba(X, lengths), model.score(X, lengths)]


def _gaussian_2d():
    rng = np.random.default_rng(0)
    states = np.repeat(np.arange(20) % 2, 10)
    X = rng.normal(size=(len(states), 2)) + 3.0 * states[:, None]
    return X, [100, 100]


def _gaussian_hmm():
    from ..hmm import GaussianHMM

    X, lengths = _gaussian_2d()
    return _hmm_first_calls(GaussianHMM(n_components=2, n_iter=5, random_state=0), X, lengths)


def _gmm_hmm():
    from ..hmm import GMMHMM

    X, lengths = _gaussian_2d()
    return _hmm_first_calls(GMMHMM(n_components=2, n_mix=2, n_iter=5, random_state=0), X, lengths)


def _categorical_hmm():
    from ..hmm import CategoricalHMM

    rng = np.random.default_rng(0)
    states = np.repeat(np.arange(20) % 2, 10)
    X = np.where(rng.random(len(states)) < 0.8, 2 * states + rng.integers(0, 2, len(states)),
                 rng.integers(0, 4, len(states)))[:, None]
    return _hmm_first_calls(CategoricalHMM(n_components=2, n_iter=5, random_state=0), X, [100, 100])


def _multinomial_hmm():
    from ..hmm import MultinomialHMM

    rng = np.random.default_rng(0)
    probs = np.array([[0.6, 0.3, 0.1], [0.1, 0.3, 0.6]])
    states = np.repeat(np.arange(20) % 2, 10)
    X = np.stack([rng.multinomial(5, probs[s]) for s in states])
    return _hmm_first_calls(MultinomialHMM(n_components=2, n_trials=5, n_iter=5, random_state=0), X, [100, 100])


def _poisson_hmm():
    from ..hmm import PoissonHMM

    rng = np.random.default_rng(0)
    states = np.repeat(np.arange(20) % 2, 10)
    X = rng.poisson(np.array([[1.0, 4.0], [6.0, 2.0]])[states])
    return _hmm_first_calls(PoissonHMM(n_components=2, n_iter=5, random_state=0), X, [100, 100])


# -- HSMMs -------------------------------------------------------------------------------------------


def _hsmm_first_calls(model, X, lengths):
    model.fit(X, lengths)
    return [model.predict(X, lengths), model.predict_proba(X, lengths), model.score(X, lengths)]


def _hidden_semi_markov_model():
    from .. import HiddenSemiMarkovModel

    X, lengths = _segments_1d()
    model = HiddenSemiMarkovModel(n_states=2, max_duration=20, n_iter=5, random_state=0)
    return _hsmm_first_calls(model, X, lengths) + [model.decode(X, lengths, return_segments=True)]


def _general_family(name):
    import structlearn

    cls = getattr(structlearn, name)
    X, lengths = _segments_1d()
    model = cls(n_states=2, max_duration=10, n_iter=5, random_state=0)
    return _hsmm_first_calls(model, X, lengths) + [model.decode(X, lengths, return_segments=True)]


def _general_hsmm():
    return _general_family("GeneralHSMM")


def _residential_time_hmm():
    return _general_family("ResidentialTimeHMM")


def _variable_transition_hmm():
    return _general_family("VariableTransitionHMM")


def _switching_hsmm():
    from .. import SwitchingHSMM

    X, lengths = _segments_1d(levels=(0.0, 1.5, 0.0, 3.0, 2.0))
    model = SwitchingHSMM(n_regimes=2, n_states=2, max_duration=20, n_iter=5, random_state=0)
    return _hsmm_first_calls(model, X, lengths) + [model.decode(X, lengths, return_regimes=True)]


def _multi_channel_hsmm():
    from .. import MultiChannelHSMM

    rng = np.random.default_rng(0)
    X1, lengths = _segments_1d()
    X2 = np.concatenate([rng.normal(2.0 * (k % 2), 0.7, int(rng.integers(3, 9))) for k in range(30)])
    X = np.column_stack([X1[:, 0], X2[:len(X1)]])  # two channels, one column each
    model = MultiChannelHSMM(n_states=2, max_duration=8, n_iter=5, random_state=0)
    return _hsmm_first_calls(model, X, lengths) + [model.decode(X, lengths)]


def _adaptive_factor_hsmm():
    from .. import AdaptiveFactorHSMM

    X, lengths = _segments_1d()
    model = AdaptiveFactorHSMM(n_states=2, max_duration=20, n_iter=5, random_state=0)
    model.fit(X, lengths)
    return [model.predict(X, lengths), model.filter(X, lengths), model.score(X, lengths)]


# -- hierarchical HMM -------------------------------------------------------------------------------



def _hierarchical_hmm(inference):
    from .. import HierarchicalHMM
    from ..datasets.toy import hhmm_figure1
    from ..distributions.emissions import Categorical

    emit = 0.9 * np.eye(6)[[0, 4, 5, 1, 2, 3]] + 0.1 / 6
    spec = hhmm_figure1()  # Murphy & Paskin (2001), Figure 1
    data = HierarchicalHMM(spec, Categorical(emit)).sample(10, random_state=0)
    model = HierarchicalHMM(spec, Categorical(n_features=6), init_params="ste", n_iter=5,
                            random_state=1, inference=inference)
    model.fit(data.X, data.lengths)
    return [model.decode(data.X, data.lengths), model.score(data.X, data.lengths),
            model.posteriors(data.X, data.lengths)]


def _hierarchical_hmm_flat():
    return _hierarchical_hmm("flat")


def _hierarchical_hmm_jtree():
    return _hierarchical_hmm("jtree")


# -- graphs -----------------------------------------------------------------------------------------


def _graph_crf():
    from .. import GraphCRF

    X, y = _graphs(n_graphs=4, side=3)  # exact inference: a junction tree per graph and iteration
    y[0][:4] = -1  # partly unlabelled, as in the getting-started page
    crf = GraphCRF(inference="exact", max_iterations=5).fit(X, y)
    return [crf.predict(X), crf.predict_marginals(X)]


def _adaboost_mrf():
    from .. import AdaBoostMRF

    X, y = _graphs()
    ada = AdaBoostMRF(n_trees=2, n_rounds=2, cg_iterations=2, random_state=0).fit(X, y)
    return [ada.predict(X), ada.predict_marginals(X)]


def _factor_graph(method):
    from ..engine.structures import FactorGraph
    from ..engine.structures.graphs import grid_graph

    rng = np.random.default_rng(0)
    graph = FactorGraph(rng.normal(size=(16, 3)), grid_graph(4, 4), 0.5 * np.eye(3))
    out = [graph.infer(method)]
    if method != "mf":  # mean field is sum-product only
        out.append(graph.infer(method, semiring="max"))
    return out


def _factor_graph_exact():
    return _factor_graph("exact")


def _factor_graph_bp():
    return _factor_graph("bp")


def _factor_graph_trw():
    return _factor_graph("trw")


def _factor_graph_meanfield():
    return _factor_graph("mf")


# -- PyTorch ----------------------------------------------------------------------------------------


def _torch_crf():
    if "torch" not in sys.modules:  # torch and Numba's OpenMP pool in one process (docs/threads.md)
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # torch itself is reached only through structlearn.torch (the one package allowed to import it,
    # .importlinter): tensors are made from NumPy arrays with ``Tensor.new_tensor``
    from ..torch import CRF

    rng = np.random.default_rng(0)
    B, T, K = 3, 6, 4
    crf = CRF(K, batch_first=True)
    like = crf.transitions.detach()  # float32, the module's device
    for param in (crf.start_transitions, crf.end_transitions, crf.transitions):  # not torch's random init
        param.detach().copy_(like.new_tensor(rng.uniform(-0.1, 0.1, size=tuple(param.shape))))
    emissions = like.new_tensor(rng.normal(size=(B, T, K)).astype(np.float32)).requires_grad_()
    tags = like.new_tensor(rng.integers(0, K, size=(B, T))).long()
    mask = like.new_tensor(np.arange(T)[None, :] < np.array([6, 4, 2])[:, None]).bool()
    log_likelihood = crf(emissions, tags, mask=mask)  # pytorch-crf's forward: summed log-likelihood
    (-log_likelihood).backward()
    return [log_likelihood, emissions.grad, crf.transitions.grad, crf.decode(emissions.detach(), mask=mask)]


#: family -> workload (the order of the tables in the docs and the benchmark)
WORKLOADS = {name: _quiet(workload) for name, workload in {
    "LinearChain": _linear_chain,
    "SemiMarkov": _semi_markov,
    "Tree": _tree,
    "LinearChainCRF": _linear_chain_crf,
    "SemiMarkovCRF": _semi_markov_crf,
    "HigherOrderCRF": _higher_order_crf,
    "HigherOrderCRF-segments": _higher_order_crf_segments,
    "TreeCRF": _tree_crf,
    "GaussianHMM": _gaussian_hmm,
    "GMMHMM": _gmm_hmm,
    "CategoricalHMM": _categorical_hmm,
    "MultinomialHMM": _multinomial_hmm,
    "PoissonHMM": _poisson_hmm,
    "HiddenSemiMarkovModel": _hidden_semi_markov_model,
    "GeneralHSMM": _general_hsmm,
    "ResidentialTimeHMM": _residential_time_hmm,
    "VariableTransitionHMM": _variable_transition_hmm,
    "SwitchingHSMM": _switching_hsmm,
    "MultiChannelHSMM": _multi_channel_hsmm,
    "AdaptiveFactorHSMM": _adaptive_factor_hsmm,
    "HierarchicalHMM-flat": _hierarchical_hmm_flat,
    "HierarchicalHMM-jtree": _hierarchical_hmm_jtree,
    "GraphCRF": _graph_crf,
    "AdaBoostMRF": _adaboost_mrf,
    "FactorGraph-exact": _factor_graph_exact,
    "FactorGraph-bp": _factor_graph_bp,
    "FactorGraph-trw": _factor_graph_trw,
    "FactorGraph-meanfield": _factor_graph_meanfield,
    "torch-CRF": _torch_crf,
}.items()}

#: families that share kernels, with the seconds of one core their first run compiles (an empty cache,
#: 2026-12-07): ``structlearn compile --jobs N`` keeps each cluster in one process (a kernel compiled by
#: two processes costs twice) and balances the clusters' costs over the processes
CLUSTERS = (
    (("LinearChain", "LinearChainCRF", "GaussianHMM", "GMMHMM", "CategoricalHMM", "MultinomialHMM",
      "PoissonHMM", "torch-CRF"), 225),                                                        # chain kernels
    (("HigherOrderCRF", "HigherOrderCRF-segments"), 118),                       # pattern kernels
    (("SemiMarkov", "SemiMarkovCRF", "HiddenSemiMarkovModel", "GeneralHSMM", "ResidentialTimeHMM",
      "VariableTransitionHMM", "SwitchingHSMM", "MultiChannelHSMM", "AdaptiveFactorHSMM"), 341),  # semi-Markov
    (("Tree", "TreeCRF", "AdaBoostMRF"), 69),                                            # tree kernels
    (("GraphCRF", "FactorGraph-exact", "FactorGraph-bp", "FactorGraph-trw", "FactorGraph-meanfield"), 43),
    (("HierarchicalHMM-flat", "HierarchicalHMM-jtree"), 12),
)

#: workloads that need an optional dependency (skipped by ``structlearn compile`` when it is not installed)
OPTIONAL = {"torch-CRF": "torch"}


def digest(result):
    """A SHA-1 hex digest of a workload's result, bit-exact: arrays by dtype, shape and bytes, floats by
    their IEEE bytes, containers element by element, other objects by their attributes (tests compare
    kernels compiled at install with kernels compiled on demand)."""
    import hashlib

    h = hashlib.sha1()

    def feed(obj):
        if hasattr(obj, "detach") and hasattr(obj, "numpy"):  # a torch tensor
            obj = obj.detach().cpu().numpy()
        if isinstance(obj, np.ndarray):
            if obj.dtype == object:
                h.update(b"O%d" % obj.size)
                for item in obj.ravel():
                    feed(item)
                return
            h.update(f"A{obj.dtype.str}{obj.shape}".encode())
            h.update(np.ascontiguousarray(obj).tobytes())
        elif isinstance(obj, (float, np.floating)):
            h.update(b"f" + np.float64(obj).tobytes())
        elif isinstance(obj, (bool, int, np.integer, str, bytes, type(None))):
            h.update(f"{type(obj).__name__}:{obj!r};".encode())
        elif isinstance(obj, dict):
            h.update(b"{%d" % len(obj))
            for key in sorted(obj, key=repr):
                feed(key)
                feed(obj[key])
        elif isinstance(obj, (list, tuple)):
            h.update(b"[%d" % len(obj))
            for item in obj:
                feed(item)
        elif hasattr(obj, "__dict__") or hasattr(obj, "__slots__"):
            attrs = dict(vars(obj)) if hasattr(obj, "__dict__") else {
                k: getattr(obj, k) for k in obj.__slots__ if hasattr(obj, k)}
            h.update(type(obj).__name__.encode())
            feed({k: v for k, v in attrs.items() if not k.startswith("_")})
        else:
            h.update(repr(obj).encode())

    feed(result)
    return h.hexdigest()
