"""Information criteria of the fitted HSMM-family estimators (one definition for all of them)."""
import math

from ..distributions import emissions as _emi

__all__ = ["InformationCriteria"]


class InformationCriteria:
    """``aic`` / ``bic`` of an estimator with ``score(X, lengths)`` (log L, summed over the sequences) and
    ``n_parameters()``; ``_n_rows(X, lengths)`` (the N of BIC) counts the rows of the validated X."""

    def _n_rows(self, X, lengths):
        return _emi.check_observations(self.emission_, X).shape[0]

    def aic(self, X, lengths=None):
        """Akaike information criterion -2 log L + 2 p (lower is better)."""
        return -2.0 * self.score(X, lengths) + 2.0 * self.n_parameters()

    def bic(self, X, lengths=None):
        """Bayesian information criterion -2 log L + p log N, N = number of rows of X (lower is better)."""
        log_likelihood = self.score(X, lengths)
        return -2.0 * log_likelihood + self.n_parameters() * math.log(self._n_rows(X, lengths))
