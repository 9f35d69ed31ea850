"""The protocol base of the HSMM emission families and the observation checks they share (see
:mod:`structlearn.distributions.emissions` for the protocol)."""
import numpy as np

from ...utils.validation import as_real_float64, check_real
from ..base import Distribution

__all__ = ["EmissionDistribution", "check_observations"]

_LOG_2PI = np.log(2 * np.pi)


def _as_2d(X, name="X", n_features=None):
    arr = as_real_float64(X, name)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"`{name}` must be 2-d (n_samples, n_features); got shape {arr.shape}")
    if np.any(np.isinf(arr)):
        raise ValueError(f"`{name}` contains infinite values; use NaN for missing observations")
    if n_features is not None and arr.shape[1] != n_features:
        raise ValueError(f"X has {arr.shape[1]} features but the means have {n_features}")
    return arr


def check_observations(emission, X):
    """``X`` validated by ``emission.check_X`` when the object has it, else as a numeric 2-d array; first,
    for every family, :func:`~structlearn.utils.validation.check_real` (complex values, strings and other
    non-numeric data are refused, as hmmlearn refuses them)."""
    X = check_real(X)
    return emission.check_X(X) if hasattr(emission, "check_X") else _as_2d(X)


def _check_covariance_type(covariance_type):
    if covariance_type not in ("full", "diag"):
        raise ValueError(f"`covariance_type` must be 'full' or 'diag'; got {covariance_type!r}")
    return covariance_type


class EmissionDistribution(Distribution):
    """Base class (see the module docstring for the protocol)."""

    def _set_params(self, **values):
        """Set the named parameter arrays (float64 copies, ``None`` kept) and validate once all are set."""
        for name, v in values.items():
            setattr(self, name, None if v is None else np.array(v, dtype=np.float64))
        if self._is_set():
            self._validate()

    def check_X(self, X):
        """The observations as a 2-d float64 array (NaN = missing; infinite values refused)."""
        return _as_2d(X)


def _weights_for_labels(X, n_states, labels):
    """One-hot (N, K) weights of initial hard labels (-1 = unlabelled rows get no weight)."""
    w = np.zeros((X.shape[0], n_states))
    ok = labels >= 0
    w[np.flatnonzero(ok), labels[ok]] = 1.0
    return w
