"""How the JVMs of a region's application start: the class-data archive and the JIT, as Spark settings.

Drivers and executors get their flags through ``spark.driver.extraJavaOptions`` and
``spark.executor.extraJavaOptions``, the provider's first and the user's own after them (a later JVM flag
wins). The archive goes only to JVMs that can map it (``spark.class_archive``):

============================  ===================  ======================================================
JVM                           archive ('auto')     archive (a path, made on every node)
============================  ===================  ======================================================
driver, client or local mode  yes (this host)      yes
standalone executors,         on a loopback        yes
cluster-mode driver           master only
YARN containers               no: Spark's jars are localised into each container's own folder, and a JVM
                              maps an archive only with the class path it was made with
Kubernetes pods               no                   yes (an archive made in the image at that path)
============================  ===================  ======================================================

spark-submit's launcher JVM (``org.apache.spark.launcher.Main``, Spark's jars without ``conf/``) gets C1
through ``SPARK_LAUNCHER_OPTS`` (``spark.submit``), never the archive: it would refuse it, and its stdout
is the command spark-class runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_finegrained.planning.jit import JitDecision
from airflow_provider_finegrained.spark.class_archive import QUIET_OPTIONS, build_in_background, existing_archive
from airflow_provider_finegrained.spark.java import SparkEnvironmentError

DRIVER_OPTIONS = "spark.driver.extraJavaOptions"
EXECUTOR_OPTIONS = "spark.executor.extraJavaOptions"


@dataclass(frozen=True)
class JvmStart:
    """The archive each kind of JVM maps (None: none) and the JIT of a region's driver and executors."""

    driver_archive: Path | None
    executor_archive: Path | None
    jit: JitDecision | None

    def driver_flags(self) -> list[str]:
        return _flags(self.driver_archive, self.jit)

    def executor_flags(self) -> list[str]:
        return _flags(self.executor_archive, self.jit)

    def conf(self, conf: Mapping[str, str]) -> dict[str, str]:
        """``conf`` with these flags first in the driver's and the executors' Java options."""
        out = dict(conf)
        for key, flags in ((DRIVER_OPTIONS, self.driver_flags()), (EXECUTOR_OPTIONS, self.executor_flags())):
            own = out.get(key, "").strip()
            if flags:
                out[key] = " ".join([*flags, *([own] if own else [])])
        return out


def _flags(archive: Path | None, jit: JitDecision | None) -> list[str]:
    shared = [f"-XX:SharedArchiveFile={archive}", *QUIET_OPTIONS] if archive is not None else []
    return [*shared, *(jit.java_options if jit is not None else ())]


def archive_for_this_host(setting: str, spark_home: str | None, java_home: str | None) -> Path | None:
    """The archive this host's JVMs map: ``auto`` the one made here (started in the background when missing,
    so this application runs without it), ``off`` none, else the path given."""
    if setting == "off":
        return None
    if setting != "auto":
        return Path(setting)
    try:
        found = existing_archive(spark_home, java_home)
        if found is None:
            build_in_background(spark_home, java_home)
    except (SparkEnvironmentError, OSError):  # no Java or Spark here: the launch says so, in its own words
        return None
    return found


def jvm_start(
    setting: str, here: Path | None, master_kind: str, loopback: bool, deploy_mode: str, jit: JitDecision | None
) -> JvmStart:
    """Where ``here`` (:func:`archive_for_this_host`) may be mapped, for an application on this master
    (``loopback``: its drivers and executors run on this machine)."""
    on_nodes = here is not None and master_kind != "yarn" and (setting != "auto" or loopback)
    driver_here = master_kind in ("local", "local-cluster") or deploy_mode == "client"
    return JvmStart(
        driver_archive=here if driver_here or on_nodes else None,
        executor_archive=here if on_nodes and master_kind != "local" else None,
        jit=jit,
    )


def jvm_record(jit: JitDecision, conf: Mapping[str, str], warm: bool) -> dict[str, Any]:
    """What the trace says of the application's JVMs, read from the settings it ran with; empty for a warm
    region (it runs in the pool's JVMs)."""
    if warm:
        return {}
    driver, executor = conf.get(DRIVER_OPTIONS, "").split(), conf.get(EXECUTOR_OPTIONS, "").split()
    archive = {side: any(f.startswith("-XX:SharedArchiveFile=") for f in flags) for side, flags in
               (("driver", driver), ("executors", executor))}  # fmt: skip
    return {"jit": jit.compiler, "reason": jit.reason, "archive": archive}


def jvm_text(record: Mapping[str, Any]) -> str:
    """One line for the task log and the run page: ``C1 alone (...); class-data archive: driver, executors``."""
    if not record:
        return ""
    mapped = [side for side, used in (record.get("archive") or {}).items() if used]
    compiler = "C1 alone" if record.get("jit") == "c1" else "C1 then C2"
    return f"{compiler} ({record.get('reason', '')}); class-data archive: {', '.join(mapped) or 'none'}"
