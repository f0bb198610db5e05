"""hdfs:// on the Python side: finding the NameNode's web address, and the exclusive create on a real HDFS."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from airflow_provider_finegrained.storage.errors import StorageConfigError
from airflow_provider_finegrained.storage.filesystem import create_exclusive, read_bytes, write_bytes
from airflow_provider_finegrained.storage.hdfs import hadoop_conf, hdfs_filesystem, webhdfs_url


def conf_dir(tmp_path: Path, core: dict[str, str], hdfs: dict[str, str]) -> str:
    for name, props in (("core-site.xml", core), ("hdfs-site.xml", hdfs)):
        body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
        (tmp_path / name).write_text(f"<?xml version='1.0'?><configuration>{body}</configuration>")
    return str(tmp_path)


NN = {"fs.defaultFS": "hdfs://nn1:8020"}


@pytest.mark.parametrize(
    ("location", "core", "hdfs", "expected"),
    [
        # The configuration's NameNode: its http-address.
        ("hdfs://nn1:8020/data", NN, {"dfs.namenode.http-address": "nn1:50070"}, "http://nn1:50070"),
        # hdfs:///x names no NameNode: the default filesystem's.
        ("hdfs:///data", NN, {"dfs.namenode.http-address": "nn1:50070"}, "http://nn1:50070"),
        # A NameNode bound to every interface is reached by its host name.
        ("hdfs://nn1:8020/data", NN, {"dfs.namenode.http-address": "0.0.0.0:9870"}, "http://nn1:9870"),
        # Another NameNode than the configuration's: Hadoop 3's default web port on its host.
        ("hdfs://nn2:8020/data", NN, {"dfs.namenode.http-address": "nn1:50070"}, "http://nn2:9870"),
        # No configuration at all.
        ("hdfs://nn2:8020/data", {}, {}, "http://nn2:9870"),
    ],
)
def test_the_namenode_web_address_comes_from_the_hadoop_configuration(
    tmp_path: Path, location: str, core: dict[str, str], hdfs: dict[str, str], expected: str
) -> None:
    assert webhdfs_url(location, conf_dir(tmp_path, core, hdfs)) == expected


def test_a_location_without_namenode_and_no_configuration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StorageConfigError, match=r"names no NameNode.*set hadoop_conf_dir"):
        webhdfs_url("hdfs:///data", str(tmp_path))


def test_hdfs_site_wins_over_core_site_and_bad_xml_is_named(tmp_path: Path) -> None:
    folder = conf_dir(tmp_path, {"dfs.replication": "3"}, {"dfs.replication": "1"})
    assert hadoop_conf(folder)["dfs.replication"] == "1"
    (tmp_path / "core-site.xml").write_text("<configuration>")
    with pytest.raises(StorageConfigError, match=r"core-site\.xml is not valid XML"):
        hadoop_conf(folder)


def test_a_webhdfs_url_that_is_not_http_is_refused() -> None:
    with pytest.raises(StorageConfigError, match="allowed: http"):
        hdfs_filesystem("hdfs://nn:8020/x", {"webhdfs_url": "ftp://nn:21"})


@pytest.mark.hadoop
@pytest.mark.security
def test_concurrent_exclusive_creates_on_hdfs_let_exactly_one_win(hadoop_cluster: object) -> None:
    # The marker's create is a rename without overwrite: atomic at the NameNode, even at the same instant.
    options = {"webhdfs_url": hadoop_cluster.namenode_http_url}  # type: ignore[attr-defined]
    marker = hadoop_cluster.storage_root("/exclusive") + "/try=1/_COMMITTED"  # type: ignore[attr-defined]
    barrier = threading.Barrier(4)
    outcomes: dict[int, str] = {}

    def create(index: int) -> None:
        barrier.wait()
        try:
            create_exclusive(marker, f"writer {index}".encode(), options)
            outcomes[index] = "won"
        except FileExistsError:
            outcomes[index] = "refused"

    threads = [threading.Thread(target=create, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    winners = [i for i, outcome in outcomes.items() if outcome == "won"]
    assert len(outcomes) == 4 and len(winners) == 1, outcomes
    assert read_bytes(marker, options) == f"writer {winners[0]}".encode()
    # A replace is whole as well: a reader sees the old content or the new.
    write_bytes(marker, b"replaced", options)
    assert read_bytes(marker, options) == b"replaced"
