"""Hypothesis strategies for small random structured instances."""
import numpy as np
from hypothesis import strategies as st


@st.composite
def log_potentials(draw, shape, scale=3.0, p_neg_inf=0.1):
    """float64 array of the given shape with values in [-scale, scale] and some -inf entries."""
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    x = rng.uniform(-scale, scale, size=shape)
    if p_neg_inf > 0:
        x[rng.random(shape) < p_neg_inf] = -np.inf
    return x


@st.composite
def lengths_list(draw, max_batch=3, max_len=5, min_len=0):
    return draw(st.lists(st.integers(min_len, max_len), min_size=1, max_size=max_batch))
