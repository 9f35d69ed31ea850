"""File formats: CRFsuite attribute files and binary model files, CoNLL column files with feature templates, model files, libDAI
``.fg`` and UAI factor graphs."""
from .conll import apply_template, compile_template, featurize, read_conll
from .conllu import ConlluFormatError, read_conllu
from .crfsuite import CRFsuiteFormatError, read_crfsuite, read_crfsuite_tree, write_crfsuite
from .crfsuite_model import read_crfsuite_model, write_crfsuite_model
from .libdai import FGFormatError, read_fg, write_fg
from .modelfile import ModelFileError, load_estimator, load_model, save_model
from .ptb import PTBFormatError, parse_ptb, read_ptb
from .templates import TEMPLATES, get_template
from .uai import (UAIFormatError, evidence_mask, read_evid, read_uai, read_uai_result, write_evid, write_uai,
                  write_uai_result)

__all__ = ["read_crfsuite", "write_crfsuite", "read_crfsuite_tree", "CRFsuiteFormatError", "read_conll",
           "apply_template", "compile_template", "featurize", "TEMPLATES", "get_template", "save_model",
           "load_model", "load_estimator", "ModelFileError", "read_conllu", "ConlluFormatError", "read_ptb", "parse_ptb",
           "PTBFormatError", "read_fg", "write_fg", "FGFormatError", "read_uai", "write_uai", "read_evid", "write_evid",
           "evidence_mask", "read_uai_result", "write_uai_result", "UAIFormatError", "read_crfsuite_model",
           "write_crfsuite_model"]
