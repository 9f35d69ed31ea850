"""python-crfsuite run as the CRF parity tests run it: from a fresh ``rand()`` stream (``srand(1)``)."""
import ctypes
import ctypes.util

from structlearn import LinearChainCRF
from tests.conftest import require_module, skip_unless_ci


def libc():
    name = ctypes.util.find_library("c")
    if name is None or "libc.so" not in name:
        skip_unless_ci("glibc's rand() is needed for CRFsuite's order (not glibc here)")
    return ctypes.CDLL(name)


def crfsuite_train(tmp_path, algorithm, params, Xtr, ytr, Xte):
    """Train python-crfsuite's ``algorithm`` with ``params`` on (Xtr, ytr) after ``srand(1)``, as a fresh
    process would: (its model read as a LinearChainCRF, its tags of Xte, its number of epochs)."""
    pycrfsuite = require_module("pycrfsuite")
    trainer = pycrfsuite.Trainer(algorithm=algorithm, verbose=False)
    for x, y in zip(Xtr, ytr):
        trainer.append(x, y)
    trainer.set_params(params)
    path = str(tmp_path / f"{algorithm}.crfsuite")
    libc().srand(1)
    trainer.train(path)
    tagger = pycrfsuite.Tagger()
    tagger.open(path)
    epochs = len(trainer.logparser.iterations)
    return LinearChainCRF.load(path), [tagger.tag(x) for x in Xte], epochs
