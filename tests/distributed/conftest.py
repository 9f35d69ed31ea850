"""The clusters of the distributed tests, started by the tests themselves: ``client``, a
``distributed.LocalCluster`` of 2 worker processes (one per test module), and ``small_client``, one in this
process (one per test); and ``worker_killer``, the fit callback of the tests that crash a worker."""
import os
import signal

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


def worker_killer(client, at):
    """A fit ``callback`` that kills (SIGKILL, a crash) the first worker of ``client`` when it is called
    with ``at`` (an iteration or evaluation number): its shards are lost, dask recomputes them from their
    graphs and the nanny starts a new worker. Returns ``(callback, killed)``, ``killed`` the list of the
    addresses it killed."""
    killed = []

    def kill_one(step):
        if step == at and not killed:
            addr = sorted(client.scheduler_info()["workers"])[0]
            pid = client.run(os.getpid, workers=[addr])[addr]
            os.kill(pid, signal.SIGKILL)
            killed.append(addr)

    return kill_one, killed
