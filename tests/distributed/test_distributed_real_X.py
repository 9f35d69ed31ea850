"""structlearn.distributed.fit refuses a bag of complex or string sequences on the worker, as ``fit`` refuses
such X (tests/api/test_real_X.py), instead of casting them to float64 while loading the shards."""
import numpy as np
import pytest

from structlearn import GaussianHMM
from tests.conftest import require_module

dask_bag = require_module("dask.bag")
sd = require_module("structlearn.distributed")


@pytest.mark.parametrize("seqs, what", [
    ([np.arange(6.0) + 1j, np.arange(6.0)], "complex"),
    ([[str(v) for v in range(6)], [str(v) for v in range(6)]], "strings"),
])
def test_bag_of_complex_or_string_sequences_is_refused(small_client, seqs, what):
    with pytest.raises(ValueError, match=rf"`X` must hold real numbers; got .*{what}"):
        sd.fit(GaussianHMM(2, n_iter=2), dask_bag.from_sequence(seqs, npartitions=1), small_client, timeout=30)
