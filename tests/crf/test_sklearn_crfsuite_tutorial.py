"""sklearn-crfsuite's tutorial (CoNLL-2002 Spanish NER, its ``word2features``, ``CRF(algorithm="lbfgs",
c1=0.1, c2=0.1, all_possible_transitions=True)``) with :class:`structlearn.LinearChainCRF`'s default
arguments, against python-crfsuite trained with the parameters sklearn-crfsuite passes it: the same
features, weights (every digit CRFsuite prints), predictions, weighted F1, ``num_attributes_`` and
``size_``.

To keep the run short: the first 300 sentences of ``esp.train``, the first 300 of ``esp.testb``, 50 L-BFGS
iterations in place of the tutorial's 100 (both trainers stop there). There the weights differ by at most
1.1e-10. On the whole tutorial (8 323 sentences, 100 iterations, the 1 517 of ``esp.testb``) measured on
2026-12-07: the same predictions, weighted F1 0.7964686316443964 both, ``num_attributes_`` 16 413 both
(76 684 attributes seen), ``size_`` 1 591 944 both, the same 27 288 non-zero features; their weights, after
100 OWL-QN iterations short of convergence, differ by up to 5.3e-3 (the loss by 2e-6 of 7166.546).
"""
import warnings

import pytest
from sklearn.exceptions import ConvergenceWarning

from structlearn import LinearChainCRF
from structlearn.metrics import flat_f1_score
from tests.conftest import require_data, require_module

N_TRAIN, N_TEST, ITERATIONS = 300, 300, 50


def word2features(sent, i):
    """The tutorial's features of token ``i`` of ``sent`` (a list of (word, POS, label))."""
    word, postag = sent[i][0], sent[i][1]
    features = {"bias": 1.0, "word.lower()": word.lower(), "word[-3:]": word[-3:], "word[-2:]": word[-2:],
                "word.isupper()": word.isupper(), "word.istitle()": word.istitle(),
                "word.isdigit()": word.isdigit(), "postag": postag, "postag[:2]": postag[:2]}
    for offset, edge, inside in ((-1, "BOS", i > 0), (+1, "EOS", i < len(sent) - 1)):
        if not inside:
            features[edge] = True
            continue
        w, p = sent[i + offset][0], sent[i + offset][1]
        tag = f"{offset:+d}:" if offset > 0 else f"{offset}:"
        features.update({tag + "word.lower()": w.lower(), tag + "word.istitle()": w.istitle(),
                         tag + "word.isupper()": w.isupper(), tag + "postag": p, tag + "postag[:2]": p[:2]})
    return features


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory):
    from structlearn.datasets import load_conll2002

    pycrfsuite = require_module("pycrfsuite")
    root = require_data("conll2002")
    data = load_conll2002("esp", data_home=root.parent, download_if_missing=False)

    def xy(sents):
        return [[word2features(s, i) for i in range(len(s))] for s in sents], [[t[2] for t in s] for s in sents]

    (X, y), (Xt, yt) = xy(data.train[:N_TRAIN]), xy(data.testb[:N_TEST])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = LinearChainCRF(algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=ITERATIONS,
                              all_possible_transitions=True).fit(X, y)
    trainer = pycrfsuite.Trainer(verbose=False)
    for xs, ys in zip(X, y):
        trainer.append(xs, ys)
    # what sklearn-crfsuite's CRF passes for these arguments (it leaves out those that are None: CRFsuite's
    # defaults then)
    trainer.set_params({"c1": 0.1, "c2": 0.1, "max_iterations": ITERATIONS, "feature.possible_transitions": True})
    path = str(tmp_path_factory.mktemp("tutorial") / "tutorial.crfsuite")
    trainer.train(path)
    tagger = pycrfsuite.Tagger()
    tagger.open(path)
    return ours, trainer, tagger, path, Xt, yt


def test_tutorial_defaults_give_crfsuites_model(tutorial):
    ours, trainer, tagger, path, Xt, yt = tutorial
    info = tagger.info()
    assert not ours.model_.start_end
    assert ours.n_iter_ == trainer.logparser.last_iteration["num"] == ITERATIONS
    # the weights: the same features survive L1, each equal in every digit CRFsuite prints (%f)
    theirs = {**info.state_features, **info.transitions}
    mine = {**ours.state_features_, **ours.transition_features_}
    assert set(mine) == set(theirs)
    assert {k: f"{w:f}" for k, w in mine.items()} == {k: f"{w:f}" for k, w in theirs.items()}
    assert f"{ours.training_log_[-1]['loss']:f}" == f"{trainer.logparser.last_iteration['loss']:f}"
    # predictions and the tutorial's score: weighted F1 over the labels but O
    pred = ours.predict(Xt)
    assert pred == [tagger.tag(xs) for xs in Xt]
    labels = [c for c in ours.classes_ if c != "O"]
    f1 = flat_f1_score(yt, pred, average="weighted", labels=labels)
    assert f1 == flat_f1_score(yt, [tagger.tag(xs) for xs in Xt], average="weighted", labels=labels)
    # the default model is the one a CRFsuite file holds, byte for byte the same size
    assert ours.size_ == int(info.header["size"])


def test_num_attributes_is_crfsuites_count(tutorial):
    """sklearn-crfsuite's ``num_attributes_`` is the model file's ``num_attrs``: attributes left with a
    non-zero state weight, far fewer than those seen when c1 > 0 prunes."""
    ours, _, tagger, _, _, _ = tutorial
    info = tagger.info()
    assert ours.num_attributes_ == int(info.header["num_attrs"]) == len(info.attributes)
    assert ours.num_attributes_ < len(ours.attributes_)
    assert ours.tagger_.info().header["num_attrs"] == info.header["num_attrs"]
    # the attribute ids of the file (python-crfsuite's dump parser keeps them as text)
    assert ours.tagger_.info().attributes == {a: int(i) for a, i in info.attributes.items()}
