"""The parts of an EM model's file that the HMM, the HSMM and its variants share.

- :func:`fit_state` / :func:`restore_fit_state`: ``converged_``, ``log_likelihood_`` and the
  convergence monitor's history (JSON metadata);
- :func:`families_to_file` / :func:`families_from_header`: the duration and emission families of a
  model with one of each (their class names, configurations and parameter arrays, looked up by name at
  load so that reading a file never runs code from it), and the hyper-parameters with an object-valued
  ``duration`` / ``emission`` written as its family name.
"""
import numpy as np

from .em import ConvergenceMonitor
from ..distributions import durations as _dur
from ..distributions import emissions as _emi
from ..distributions.emissions import hmm as _hemi
from ..distributions.base import families_from_file, family_to_file
from ..utils.docstrings import fill_docstring
from ..utils.modelfile import ModelFileError

__all__ = ["fit_state", "restore_fit_state", "families_to_file", "families_from_header", "save_doc"]

SAVE_DOC = """Write the fitted model to ``path`` (versioned ``.npz`` + JSON header; no pickle).

Raises
------
ValueError
    A custom (non-structlearn) duration or emission object."""


def save_doc(save):
    """Give an estimator's ``save`` (whose docstring is the line ``{save}``) the docstring of the
    estimators whose duration and emission families go to the file by :func:`families_to_file`.

    Parameters
    ----------
    save : function
        The ``save(self, path)`` method.

    Returns
    -------
    function
        ``save`` itself, its docstring written.
    """
    return fill_docstring(save, save=SAVE_DOC)

#: where the emission families of the HSMM family are looked up (both modules' classes)
EMISSION_MODULES = (_emi, _hemi)


def fit_state(est):
    """``{"converged_", "log_likelihood_", "history"}`` of a fitted EM estimator (JSON-able)."""
    ll = getattr(est, "log_likelihood_", np.nan)
    return {"converged_": bool(getattr(est, "converged_", False)),
            "log_likelihood_": float(ll) if np.isfinite(ll) else None,
            "history": [float(h) for h in getattr(getattr(est, "monitor_", None), "history", [])]}


def restore_fit_state(model, meta):
    """Set ``converged_``, ``log_likelihood_`` (NaN when the file has none) and ``monitor_`` (a
    :class:`~structlearn.learning.em.ConvergenceMonitor` with the saved history) from ``meta``."""
    model.converged_ = bool(meta.get("converged_", False))
    ll = meta.get("log_likelihood_")
    model.log_likelihood_ = float("nan") if ll is None else float(ll)
    mon = ConvergenceMonitor(model.tol, model.n_iter)
    mon.history = list(meta.get("history", []))
    mon.iter = len(mon.history)
    model.monitor_ = mon


def families_to_file(est, duration, emission, emission_modules=EMISSION_MODULES):
    """(params, meta, arrays) of a model with one duration and one emission family.

    ``params``: ``est.get_params()`` with ``duration`` / ``emission`` objects replaced by their family
    names and a non-integer ``random_state`` by None; ``meta``: the families' names and configurations;
    ``arrays``: their parameter arrays (prefixed ``duration.`` / ``emission.``).

    Raises ``ValueError`` for a custom (non-structlearn) family object.
    """
    dname, darr, dcfg = family_to_file(duration, _dur, "duration")
    ename, earr, ecfg = family_to_file(emission, emission_modules, "emission")
    params = {k: v for k, v in est.get_params().items() if k not in ("duration", "emission", "random_state")}
    params["duration"] = est.duration if isinstance(est.duration, str) else dname
    params["emission"] = est.emission if isinstance(est.emission, str) else ename
    rs = est.random_state
    params["random_state"] = int(rs) if isinstance(rs, (int, np.integer)) else None
    meta = {"duration_family": dname, "duration_config": dcfg, "emission_family": ename, "emission_config": ecfg}
    return params, meta, {**darr, **earr}


def families_from_header(path, header, arrays, emission_modules=EMISSION_MODULES):
    """(params, families) read back from what :func:`families_to_file` wrote.

    ``families`` maps ``"duration"`` / ``"emission"`` to the fitted family objects; in ``params`` an
    argument that was an object at save comes back as a fresh object of its family and configuration.

    Raises :class:`~structlearn.utils.modelfile.ModelFileError` when the header names no structlearn
    family.
    """
    meta = header["metadata"]
    fam = families_from_file(meta, arrays, {"duration": (_dur, _dur.DurationDistribution),
                                            "emission": (emission_modules, _emi.EmissionDistribution)})
    if None in fam.values():
        raise ModelFileError(f"{path!r}: the header names no structlearn duration/emission family "
                             f"({meta.get('duration_family')!r}, {meta.get('emission_family')!r})")
    params = dict(header["params"])
    for what in ("duration", "emission"):
        if params.get(what) == meta.get(f"{what}_family"):  # an object at save (e.g. Coxian(n_phases=3))
            params[what] = type(fam[what])(**(meta.get(f"{what}_config") or {}))
    return params, fam
