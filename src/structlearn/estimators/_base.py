"""What every structlearn estimator shares beyond :class:`sklearn.base.BaseEstimator`."""
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

__all__ = ["EstimatorBase"]


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
