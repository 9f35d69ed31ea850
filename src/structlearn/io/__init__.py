"""File formats: CRFsuite attribute files and binary model files, CoNLL column files with feature templates, model files, libDAI
``.fg`` and UAI factor graphs."""

# Imported on first use (PEP 562), so that a reader of one format (``structlearn tag`` reading a CoNLL
# file) does not load the others and what they import (the factor-graph formats load the engine).
_LAZY = {
    "read_crfsuite": "crfsuite",
    "write_crfsuite": "crfsuite",
    "read_crfsuite_tree": "crfsuite",
    "CRFsuiteFormatError": "crfsuite",
    "read_conll": "conll",
    "ConllFormatError": "conll",
    "apply_template": "conll",
    "compile_template": "conll",
    "featurize": "conll",
    "TEMPLATES": "templates",
    "get_template": "templates",
    "save_model": "modelfile",
    "load_model": "modelfile",
    "load_estimator": "modelfile",
    "ModelFileError": "modelfile",
    "read_conllu": "conllu",
    "ConlluFormatError": "conllu",
    "read_ptb": "ptb",
    "parse_ptb": "ptb",
    "PTBFormatError": "ptb",
    "read_fg": "libdai",
    "write_fg": "libdai",
    "FGFormatError": "libdai",
    "read_uai": "uai",
    "write_uai": "uai",
    "read_evid": "uai",
    "write_evid": "uai",
    "evidence_mask": "uai",
    "read_uai_result": "uai",
    "write_uai_result": "uai",
    "UAIFormatError": "uai",
    "read_crfsuite_model": "crfsuite_model",
    "write_crfsuite_model": "crfsuite_model",
    "CRFsuiteModelError": "crfsuite_model",
}

__all__ = list(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
