"""The chaos tests' cluster: private servers, real processes, judged from MySQL afterwards."""

from __future__ import annotations

import pytest

from tests.support.cluster import Cluster


@pytest.fixture
def cluster(tmp_path, procs):
    cluster = Cluster(tmp_path, procs)
    yield cluster
    cluster.close()


@pytest.fixture(params=[1, 2], ids=["one-workload", "two-workloads"])
def clusters(request, tmp_path, procs):
    """The same fault with one workload, and with two workloads in the same processes."""
    cluster = Cluster(tmp_path, procs, workloads=request.param)
    yield cluster
    cluster.close()
