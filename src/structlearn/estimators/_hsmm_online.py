"""Online estimation and the HSMM ↔ HMM maps of the explicit-duration HSMM (Yu 2010 §2.3.3, §4.4).

:class:`OnlineMixin` is mixed into :class:`structlearn.estimators.hsmm.HiddenSemiMarkovModel`.
"""

__all__ = ["OnlineMixin"]


class OnlineMixin:
    """``partial_fit``, the streaming filter and ``to_expanded_hmm`` / ``from_expanded_hmm``."""
