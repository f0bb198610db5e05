"""Which JVM of an application maps the class-data archive, and how the flags join the user's (``spark.jvm_start``):
a table of every setting, master and deploy mode, worked from where each JVM runs and which class path it has."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_finegrained.planning.jit import JitDecision
from airflow_provider_finegrained.spark.jvm_start import (
    DRIVER_OPTIONS,
    EXECUTOR_OPTIONS,
    jvm_record,
    jvm_start,
    jvm_text,
)

HERE = Path("/cache/spark-1.jsa")
NODES = Path("/opt/spark/spark.jsa")
C1 = JitDecision("c1", "small")
TIERED = JitDecision("tiered", "big")


# (setting, archive found or given, master kind, loopback, deploy mode) -> (driver maps it, executors map it)
@pytest.mark.parametrize(
    ("setting", "here", "kind", "loopback", "mode", "driver", "executors"),
    [
        # auto: this host's JVMs; a loopback cluster's executors and cluster-mode drivers too.
        ("auto", HERE, "local", True, "client", True, False),  # one JVM: the driver runs the tasks
        ("auto", HERE, "local-cluster", True, "client", True, True),
        ("auto", HERE, "standalone", True, "client", True, True),
        ("auto", HERE, "standalone", True, "cluster", True, True),
        ("auto", HERE, "standalone", False, "client", True, False),  # other hosts may not have it
        ("auto", HERE, "standalone", False, "cluster", False, False),
        ("auto", HERE, "yarn", False, "client", True, False),  # containers: Spark's jars localised elsewhere
        ("auto", HERE, "yarn", False, "cluster", False, False),
        ("auto", HERE, "k8s", False, "client", True, False),
        ("auto", HERE, "k8s", False, "cluster", False, False),
        # Not made yet (being made in the background): nothing to map.
        ("auto", None, "standalone", True, "client", False, False),
        # A path made on every node (or in the image): every JVM but YARN's containers.
        ("/opt/spark/spark.jsa", NODES, "standalone", False, "cluster", True, True),
        ("/opt/spark/spark.jsa", NODES, "k8s", False, "cluster", True, True),
        ("/opt/spark/spark.jsa", NODES, "yarn", False, "client", True, False),
        ("/opt/spark/spark.jsa", NODES, "yarn", False, "cluster", False, False),
        ("off", None, "local", True, "client", False, False),
    ],
)
def test_which_jvms_map_the_archive(
    setting: str, here: Path | None, kind: str, loopback: bool, mode: str, driver: bool, executors: bool
) -> None:
    start = jvm_start(setting, here, kind, loopback, mode, None)
    assert (start.driver_archive is not None, start.executor_archive is not None) == (driver, executors)
    assert {start.driver_archive, start.executor_archive} <= {here, None}


def test_the_providers_flags_come_first_and_the_users_win() -> None:
    start = jvm_start("auto", HERE, "standalone", True, "client", C1)
    conf = start.conf({DRIVER_OPTIONS: "-XX:TieredStopAtLevel=4 -Dx=1", "spark.app.name": "a"})
    shared = f"-XX:SharedArchiveFile={HERE} -Xshare:auto -Xlog:cds*=off -XX:TieredStopAtLevel=1"
    assert conf == {
        DRIVER_OPTIONS: f"{shared} -XX:TieredStopAtLevel=4 -Dx=1",  # the user's later flag wins in the JVM
        EXECUTOR_OPTIONS: shared,
        "spark.app.name": "a",
    }


def test_tiered_without_an_archive_adds_nothing() -> None:
    assert jvm_start("off", None, "yarn", False, "cluster", TIERED).conf({"k": "v"}) == {"k": "v"}


def test_the_trace_reads_what_the_jvms_ran_with() -> None:
    conf = jvm_start("auto", HERE, "yarn", False, "client", C1).conf({})
    record = jvm_record(C1, conf, warm=False)
    assert record == {"jit": "c1", "reason": "small", "archive": {"driver": True, "executors": False}}
    assert jvm_text(record) == "C1 alone (small); class-data archive: driver"
    assert jvm_record(C1, conf, warm=True) == {}  # a warm region runs in the pool's JVMs
    plain = jvm_record(TIERED, {}, warm=False)
    assert jvm_text(plain) == "C1 then C2 (big); class-data archive: none"
    assert jvm_text({}) == ""
