"""The one master-URL parser against what Spark's SparkMasterRegex and its k8s/standalone parsers accept."""

from __future__ import annotations

import pytest

from airflow_provider_finegrained.launchers.master import MasterInfo, MasterURLError, is_local_master, parse_master

ACCEPTED: list[tuple[str, MasterInfo]] = [
    ("local", MasterInfo("local", threads=1, url="local")),
    ("local[1]", MasterInfo("local", threads=1, url="local[1]")),
    ("local[4]", MasterInfo("local", threads=4, url="local[4]")),
    ("local[*]", MasterInfo("local", threads=None, url="local[*]")),
    ("local[2,3]", MasterInfo("local", threads=2, url="local[2,3]", max_failures=3)),
    ("local[*,4]", MasterInfo("local", threads=None, url="local[*,4]", max_failures=4)),
    ("local[*, 3]", MasterInfo("local", threads=None, url="local[*, 3]", max_failures=3)),
    (
        "local-cluster[2,1,1024]",
        MasterInfo("local-cluster", workers=2, worker_cores=1, worker_memory_mib=1024, url="local-cluster[2,1,1024]"),
    ),
    # The first disagreement of the two old validators: Spark allows spaces in local-cluster.
    (
        "local-cluster[2, 1, 1024]",
        MasterInfo("local-cluster", workers=2, worker_cores=1, worker_memory_mib=1024, url="local-cluster[2, 1, 1024]"),
    ),
    (
        "local-cluster[ 3 , 2 , 512 ]",
        MasterInfo(
            "local-cluster", workers=3, worker_cores=2, worker_memory_mib=512, url="local-cluster[ 3 , 2 , 512 ]"
        ),
    ),
    ("spark://127.0.0.1:7077", MasterInfo("standalone", hosts=(("127.0.0.1", 7077),), url="spark://127.0.0.1:7077")),
    (
        "spark://master-1.example.com:7077",
        MasterInfo("standalone", hosts=(("master-1.example.com", 7077),), url="spark://master-1.example.com:7077"),
    ),
    (
        "spark://host1:7077,host2:7078",
        MasterInfo("standalone", hosts=(("host1", 7077), ("host2", 7078)), url="spark://host1:7077,host2:7078"),
    ),
    ("spark://[::1]:7077", MasterInfo("standalone", hosts=(("[::1]", 7077),), url="spark://[::1]:7077")),
    ("yarn", MasterInfo("yarn", url="yarn")),
    (
        "k8s://https://kubernetes.default.svc:443",
        MasterInfo(
            "k8s", url="k8s://https://kubernetes.default.svc:443", k8s_api_url="https://kubernetes.default.svc:443"
        ),
    ),
    ("k8s://https://10.0.0.1", MasterInfo("k8s", url="k8s://https://10.0.0.1", k8s_api_url="https://10.0.0.1")),
    (
        "k8s://http://127.0.0.1:8001",
        MasterInfo("k8s", url="k8s://http://127.0.0.1:8001", k8s_api_url="http://127.0.0.1:8001"),
    ),
    # Spark defaults a k8s:// URL without a scheme to https.
    (
        "k8s://api.example.com:6443",
        MasterInfo("k8s", url="k8s://api.example.com:6443", k8s_api_url="https://api.example.com:6443"),
    ),
    # The second disagreement: no port, no scheme (Spark resolves it to https://api-server).
    ("k8s://api-server", MasterInfo("k8s", url="k8s://api-server", k8s_api_url="https://api-server")),
]

REJECTED = [
    "",
    "local[0]",
    "local[]",
    "local[-1]",
    "local[two]",
    "local[2,*]",
    "local[2,0]",
    "local[ 2 ]",  # Spark's local[N] pattern has no spaces
    "local [2]",
    " local",
    "local-cluster[2,1]",
    "local-cluster[0,1,1024]",
    "local-cluster[2,1,1024,5]",
    "spark://",
    "spark://host",
    "spark://host:port",
    "spark://host:7077,",
    "spark://host:7077/path",
    "spark://127.0.0.1:99999",
    "yarn-client",
    "yarn-cluster",
    "YARN",
    "k8s://",
    "k8s://ftp://host",
    "mesos://host:5050",
    "http://host:7077",
    "host:7077",
]


@pytest.mark.parametrize(("url", "info"), ACCEPTED, ids=[u for u, _ in ACCEPTED])
def test_accepted_masters_parse_to_their_info(url: str, info: MasterInfo) -> None:
    assert parse_master(url) == info


@pytest.mark.parametrize("url", REJECTED)
def test_rejected_masters_name_the_value_and_the_accepted_forms(url: str) -> None:
    with pytest.raises(MasterURLError) as caught:
        parse_master(url)
    message = str(caught.value)
    assert f"master: {url!r} is not a Spark master URL" in message
    for form in (
        "local[N]",
        "local[*]",
        "local-cluster[N,C,M]",
        "spark://host:port",
        "yarn",
        "k8s://https://host:port",
    ):
        assert form in message
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("url", "local"),
    [("local", True), ("local[*]", True), ("local-cluster[1,1,512]", True), ("spark://h:1", False), ("yarn", False)],
)
def test_is_local_master(url: str, local: bool) -> None:
    assert is_local_master(url) is local
