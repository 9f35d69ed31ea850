"""Model files of the general HSMM family (:class:`~structlearn.hsmm.general.GeneralHSMM`,
``ResidentialTimeHMM``, ``VariableTransitionHMM``): a versioned ``.npz`` + JSON header, never pickle.

Per-state emissions are written by family name (:mod:`structlearn.distributions.emissions`,
:mod:`structlearn.distributions.emissions.hmm`); the segment emissions ``CategoricalSegments`` (one table per
duration) and ``PolynomialSegments`` (coefficients and variances per state) by their own entries.
"""
import copy

import numpy as np

from ..distributions import emissions as _emi
from . import segment_emissions as _seg
from ..distributions.base import families_from_file, family_to_file
from ..distributions.emissions.segment_regression import PolynomialSegments

__all__ = ["save", "load"]


def _segment_entry(emission):
    """(metadata, arrays) of a segment emission object; ValueError for one a file cannot hold."""
    if isinstance(emission, _seg.CategoricalSegments):
        arrays = {f"segment_probs_{d}": p for d, p in enumerate(emission.probs, start=1)}
        return {"family": "categorical_segments", "n_symbols": emission.n_symbols,
                "pseudocount": emission.pseudocount}, arrays
    if isinstance(emission, PolynomialSegments):
        return ({"family": "polynomial_segments", "degree": emission.degree, "min_var": emission.min_var},
                {"segment_coef": emission.coef, "segment_variances": emission.variances})
    raise ValueError(f"cannot save a model with the segment emission {emission!r}: only CategoricalSegments "
                     f"and PolynomialSegments can be written to a model file (a callable would be code)")


def _segment_from_file(path, seg, meta, arrays):
    from ..utils.modelfile import ModelFileError
    family = seg.get("family")
    if family == "categorical_segments":
        D = int(meta["max_duration_"])
        return _seg.CategoricalSegments(int(seg["n_symbols"]), pseudocount=float(seg["pseudocount"]),
                                        probs=[arrays[f"segment_probs_{d}"] for d in range(1, D + 1)])
    if family == "polynomial_segments":
        return PolynomialSegments(int(seg["degree"]), coef=arrays["segment_coef"],
                                  variances=arrays["segment_variances"], min_var=float(seg["min_var"]))
    raise ModelFileError(f"{path!r}: unknown segment emission family {family!r}")


def save(est, path, version):
    """Write the fitted estimator ``est`` to ``path`` (format ``est._file_format``, ``version``)."""
    from ..distributions.emissions import hmm as _hemi
    from ..utils.modelfile import save_model
    seg_meta = None
    if est._is_segmental():
        ename, ecfg = None, None
        seg_meta, earr = _segment_entry(est.emission_)
    else:
        ename, earr, ecfg = family_to_file(est.emission_, (_emi, _hemi), "emission")
    params = {k: v for k, v in est.get_params().items()
              if k not in ("emission", "random_state", "segment_emission")}
    params["emission"] = est.emission if isinstance(est.emission, str) else (ename or "gaussian")
    rs = est.random_state
    params["random_state"] = int(rs) if isinstance(rs, (int, np.integer)) else None
    meta = {"emission_family": ename, "emission_config": ecfg, "max_duration_": est.max_duration_,
            "n_features_in_": int(est.n_features_in_), "segment_emission": seg_meta}
    save_model(path, format_name=est._file_format, version=version,
               estimator=f"structlearn.{type(est).__name__}", params=params, metadata=meta,
               arrays={"startprob_": est.startprob_, "transmat_": est.transmat_, **earr})


def load(cls, path, version):
    """The estimator of class ``cls`` read from ``path`` (runs no code from the file)."""
    from ..distributions.emissions import hmm as _hemi
    from ..utils.modelfile import ModelFileError, load_model
    header, arrays = load_model(path, expected_format=cls._file_format, supported_version=version)
    meta = header["metadata"]
    seg = meta.get("segment_emission")
    if seg is not None:
        emission = _segment_from_file(path, seg, meta, arrays)
        model = cls(**header["params"], segment_emission=copy.deepcopy(emission))
    else:
        fam = families_from_file(meta, arrays, {"emission": ((_emi, _hemi), _emi.EmissionDistribution)})
        if fam["emission"] is None:
            raise ModelFileError(f"{path!r}: the header names no structlearn emission family "
                                 f"({meta.get('emission_family')!r})")
        emission = fam["emission"]
        params = dict(header["params"])
        if params.get("emission") == meta.get("emission_family"):  # an object at save: its family
            params["emission"] = type(emission)(**(meta.get("emission_config") or {}))
        model = cls(**params)
    model.emission_ = emission
    model.startprob_ = np.asarray(arrays["startprob_"], dtype=np.float64)
    model.transmat_ = np.asarray(arrays["transmat_"], dtype=np.float64)
    model.max_duration_ = int(meta["max_duration_"])
    model.n_features_in_ = int(meta["n_features_in_"])
    model._check_params()
    return model
