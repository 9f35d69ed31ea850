"""The real cluster of the distributed tests: a ``distributed.LocalCluster`` of 2 worker processes, started
by the tests themselves (one per test module)."""
import pytest

from tests.conftest import require_module


@pytest.fixture(scope="module")
def client():
    distributed = require_module("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       memory_limit="1GiB", dashboard_address=None)
    c = distributed.Client(cluster)
    c.wait_for_workers(2)
    yield c
    c.close()
    cluster.close()
