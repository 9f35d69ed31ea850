"""dask-ml's ``Incremental`` drives the EM models' ``partial_fit`` over the blocks of a dask array that is
never materialised (examples/dask_incremental.py, run in its --quick mode)."""
import numpy as np

from tests.conftest import require_module, script_module

require_module("dask_ml")
require_module("dask.array")


def test_incremental_online_em_example_learns_the_source(tmp_path):
    mod = script_module("examples/dask_incremental.py", "dask_incremental_example")
    res = mod.main(["--quick", "--figures", str(tmp_path)])
    hsmm, hmm = res["HSMM"], res["HMM"]
    assert hsmm["chunks"] == hmm["chunks"] == 12   # one partial_fit per block
    np.testing.assert_allclose(hsmm["levels"], mod.LEVELS, atol=0.1)
    np.testing.assert_allclose(hsmm["durations"], mod.MEAN_DURATIONS, rtol=0.3)
    assert hsmm["online"] > hsmm["batch one block"]  # the stream beats what one block can teach
    assert np.isfinite(hmm["online"])
    assert (tmp_path / "dask_incremental_durations.png").stat().st_size > 0
