"""CRFsuite's binary model files (``lCRF``, written by ``crfsuite learn``, python-crfsuite and
sklearn-crfsuite) as :class:`~structlearn.LinearChainCRF` estimators.

The byte layout is :mod:`structlearn.crf.crfsuite_model` (an independent implementation of CRFsuite's
``crf1d_model.c`` / ``cqdb.c`` layout); this module only opens files::

    est = read_crfsuite_model("old.crfsuite")      # tags as CRFsuite does (no start/end weights)
    write_crfsuite_model(est, "new.crfsuite")      # pycrfsuite.Tagger().open("new.crfsuite") works

Reading and writing again reproduces a python-crfsuite file byte for byte.
"""
from ..crf.crfsuite_model import CRFsuiteModelError, is_crfsuite_model
from ..utils.modelfile import read_magic

__all__ = ["read_crfsuite_model", "write_crfsuite_model", "is_crfsuite_model_file", "CRFsuiteModelError"]


def is_crfsuite_model_file(path):
    """Whether ``path`` starts with CRFsuite's model magic ``lCRF``.

    Raises FileNotFoundError for no file, ModelFileError for a folder (naming ``path``)."""
    return is_crfsuite_model(read_magic(path))


def read_crfsuite_model(path):
    """A fitted :class:`~structlearn.LinearChainCRF` (``start_end_features=False``) from a CRFsuite model
    file.

    Raises
    ------
    FileNotFoundError
        No such file.
    CRFsuiteModelError (a ModelFileError, a ValueError)
        A folder, not a CRFsuite linear-chain model, or a truncated / corrupt one (the message names the
        file); no other error for a damaged file.
    """
    from ..crf.linear_chain import LinearChainCRF  # here: importing structlearn.io must not import sklearn

    if not is_crfsuite_model_file(path):
        raise CRFsuiteModelError(f"{path}: not a CRFsuite model file (no 'lCRF' magic)")
    return LinearChainCRF.load(path)


def write_crfsuite_model(estimator, path):
    """Write a fitted :class:`~structlearn.LinearChainCRF` as a CRFsuite model file (see
    ``LinearChainCRF.save(path, format="crfsuite")`` for which models qualify); returns ``path``."""
    from ..crf.linear_chain import LinearChainCRF

    if not isinstance(estimator, LinearChainCRF):
        raise ValueError(f"only LinearChainCRF models have a CRFsuite model file; got "
                         f"{type(estimator).__name__}")
    return estimator.save(path, format="crfsuite")
