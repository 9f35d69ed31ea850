"""Hidden semi-Markov models (seed 001, Yu 2010): explicit-duration, general (segment emissions,
residential-time, variable-transition), switching, multi-channel and adaptive-factor HSMMs, the expanded HMM
and order selection: ``from structlearn.hsmm import HiddenSemiMarkovModel``.

The estimators load on first use.
"""
from ..utils.lazy import lazy_exports

_LAZY = {
    "HiddenSemiMarkovModel": "structlearn.hsmm.explicit_duration",
    "GeneralHSMM": "structlearn.hsmm.general",
    "ResidentialTimeHMM": "structlearn.hsmm.general",
    "VariableTransitionHMM": "structlearn.hsmm.general",
    "SwitchingHSMM": "structlearn.hsmm.switching",
    "MultiChannelHSMM": "structlearn.hsmm.multichannel",
    "AdaptiveFactorHSMM": "structlearn.hsmm.adaptive",
    "ExpandedHMM": "structlearn.hsmm.expanded_hmm",
    "select_order": "structlearn.hsmm.order_selection",
    "OrderSelection": "structlearn.hsmm.order_selection",
}

__all__ = ["HiddenSemiMarkovModel", "GeneralHSMM", "ResidentialTimeHMM", "VariableTransitionHMM", "SwitchingHSMM", "MultiChannelHSMM", "AdaptiveFactorHSMM", "ExpandedHMM", "select_order", "OrderSelection"]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
