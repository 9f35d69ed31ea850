"""What every structlearn estimator shares beyond :class:`sklearn.base.BaseEstimator`."""
import contextlib
import copy
import functools

from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from ..utils.interrupts import as_interrupt

__all__ = ["EstimatorBase", "training", "rolls_back"]


class EstimatorBase(BaseEstimator):
    """scikit-learn's contract, written once: ``__init__`` only stores its arguments
    (``self._store_params(locals())``) and every method but ``fit``/``load`` starts with
    :meth:`_check_fitted`."""

    #: attribute that exists once the estimator is fitted (or loaded)
    _fitted_attribute = "coef_"

    def _store_params(self, values):
        """The body of ``__init__``: store every argument (``locals()``) under its own name, as
        scikit-learn's ``get_params`` / ``clone`` expect."""
        for name in self._get_param_names():
            setattr(self, name, values[name])

    def _check_fitted(self):
        """NotFittedError unless the estimator was fitted or loaded."""
        if not hasattr(self, self._fitted_attribute):
            raise NotFittedError(f"This {type(self).__name__} instance is not fitted yet; call `fit` (or "
                                 f"`load`) before using it")


@contextlib.contextmanager
def training(estimator, drop=()):
    """Around the loop of a ``fit`` that changes the fitted parameters (EM, an optimiser): on any exception
    out of it (a ``KeyboardInterrupt``, an error) set ``converged_ = False`` and remove the attributes
    ``drop`` (e.g. ``coef_`` of an earlier fit that no longer matches the new ``model_``), then raise it
    again, so that an interrupted fit never leaves a convergence it did not reach. A ``KeyboardInterrupt``
    that a Numba kernel wrapped in a ``SystemError`` is raised as a ``KeyboardInterrupt``."""
    try:
        yield
    except BaseException as exc:
        estimator.converged_ = False
        for name in drop:
            estimator.__dict__.pop(name, None)
        interrupt = as_interrupt(exc)
        if interrupt is exc:
            raise
        raise interrupt from exc


def rolls_back(method):
    """A ``partial_fit`` that leaves the estimator as it was before the call when it raises (a
    ``KeyboardInterrupt`` between the update of the running statistics and that of the parameters, a
    sequence with zero likelihood, …): the estimator's attributes are copied before the call (they are
    O(parameters + running statistics), independent of the stream) and put back. A ``KeyboardInterrupt``
    that a Numba kernel wrapped in a ``SystemError`` is raised as a ``KeyboardInterrupt``."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        saved = copy.deepcopy(self.__dict__)
        try:
            return method(self, *args, **kwargs)
        except BaseException as exc:
            self.__dict__.clear()
            self.__dict__.update(saved)
            interrupt = as_interrupt(exc)
            if interrupt is exc:
                raise
            raise interrupt from exc
    return wrapper
