"""File formats: CRFsuite attribute files, CoNLL column files with feature templates, model files."""
from .conll import apply_template, compile_template, featurize, read_conll
from .conllu import ConlluFormatError, read_conllu
from .crfsuite import CRFsuiteFormatError, read_crfsuite, read_crfsuite_tree, write_crfsuite
from .modelfile import ModelFileError, load_estimator, load_model, save_model
from .ptb import PTBFormatError, parse_ptb, read_ptb
from .templates import TEMPLATES, get_template

__all__ = ["read_crfsuite", "write_crfsuite", "read_crfsuite_tree", "CRFsuiteFormatError", "read_conll",
           "apply_template", "compile_template", "featurize", "TEMPLATES", "get_template", "save_model",
           "load_model", "load_estimator", "ModelFileError", "read_conllu", "ConlluFormatError", "read_ptb", "parse_ptb",
           "PTBFormatError"]
