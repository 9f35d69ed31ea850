"""The clusters of the distributed tests, started by the tests themselves: ``client``, a
``distributed.LocalCluster`` of 2 worker processes (one per test module), and ``small_client``, one in this
process (one per test)."""
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


@pytest.fixture
def small_client():
    """A cluster in this process (scheduler and one thread worker, under a second to start) for the tests
    that change the cluster (retire its workers) or only need one worker."""
    distributed = require_module("distributed")
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        client.wait_for_workers(1)
        yield client
    finally:
        client.close()
        cluster.close()
