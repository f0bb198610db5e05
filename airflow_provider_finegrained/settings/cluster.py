"""Where Spark runs and how it is reached: what a launcher receives.

The master URL, the deploy mode, the Spark conf added to every submission, the Spark, Java and Hadoop
installs, the cluster's web services. Pure: no Airflow or Spark imports.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, ClassVar, Final, Literal

from pydantic import Field

from airflow_provider_finegrained.launchers.master import MASTER_FORMS, MasterInfo, MasterKind
from airflow_provider_finegrained.launchers.master import parse_master as _parse_master_url
from airflow_provider_finegrained.planning.jit import JIT_CHOICES
from airflow_provider_finegrained.secrets import is_secret_key
from airflow_provider_finegrained.settings import coercion
from airflow_provider_finegrained.settings.coercion import ConnectionSettingsError, FrozenConf, fail
from airflow_provider_finegrained.settings.field import choice, json_object, string
from airflow_provider_finegrained.settings.model import SettingsModel

DEPLOY_MODES: Final = ("client", "cluster")
PYTHON_ENVS: Final = ("auto", "off")
"""``python_env``: whether YARN's containers get the Airflow worker's packed environment."""


def available_cpus() -> int:
    """Cores this process may use: what ``local[*]`` gets (the JVM also honours the affinity mask)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def parse_master(master: str) -> MasterInfo:
    """Parse a Spark master URL (``launchers.master``'s rules); :class:`ConnectionSettingsError` otherwise."""
    try:
        return _parse_master_url(master.strip())
    except ValueError as exc:
        raise ConnectionSettingsError(str(exc)) from None


def _master(where: str, raw: object) -> str:
    value = coercion.text(where, raw)
    try:
        parse_master(value)
    except ConnectionSettingsError as exc:
        fail(str(exc).replace("master: ", f"{where}: ", 1))
    return value


class ClusterSettings(SettingsModel):
    """Where Spark runs and how it is reached: the master, the Spark and Java installs, its services."""

    CONCERN: ClassVar[str] = "cluster"

    master: Annotated[
        str,
        string(
            "Spark master URL",
            f"Where Spark runs; the connection's host field. One of {MASTER_FORMS}.",
            "local[*] or spark://127.0.0.1:7077",
            values="a Spark master URL (see Master URLs below)",
            check=_master,
            secret="url",
            default_text="local[N] with N = this machine's cores",
            host_field=True,
        ),
    ]
    deploy_mode: Annotated[
        Literal["client", "cluster"],
        choice(
            "Deploy mode",
            "Where the Spark driver runs: 'client' (in the Airflow task) or 'cluster' (on the cluster: standalone, "
            "YARN, Kubernetes; the task follows the driver and kills it when the task is killed). Local masters "
            "take 'client' only.",
            "client",
            choices=DEPLOY_MODES,
        ),
    ] = "client"
    spark_conf: Annotated[
        Mapping[str, str],
        json_object(
            "Extra Spark conf",
            "JSON object of Spark properties added to every submission. Values of keys containing password, "
            "secret, token, credential or access key, or ending in .key, are masked in logs, XCom and the UI. "
            "Properties the planner decides (executor size, shuffle partitions, memory fraction) are refused.",
            '{"spark.eventLog.enabled": "true"}',
            values="JSON object of spark.* properties",
            check=coercion.spark_conf,
            # The values of its secret keys (Airflow's sensitive names, Spark's redaction pattern) are secrets.
            secret="keys",
            default_text="{}",
        ),
    ] = Field(default_factory=lambda: FrozenConf({}))
    spark_home: Annotated[
        str | None,
        string(
            "SPARK_HOME",
            "A Spark installation whose bin/spark-submit runs the stages.",
            "/opt/spark",
            values="absolute path",
            check=coercion.absolute_path,
            default_text="the pip-installed pyspark",
        ),
    ] = None
    java_home: Annotated[
        str | None,
        string(
            "JAVA_HOME",
            "Java 17+ for spark-submit.",
            "/usr/lib/jvm/java-17-openjdk-amd64",
            values="absolute path",
            check=coercion.absolute_path,
            default_text="the worker's JAVA_HOME, else java on PATH",
        ),
    ] = None
    master_webui_url: Annotated[
        str | None,
        string(
            "Master web UI URL",
            "Spark standalone only: the master's web UI, whose /json/ the connection test and capacity checks read.",
            "http://127.0.0.1:8080",
            values="http(s) URL",
            check=coercion.http_url,
            secret="url",
            default_text="port 8080 of the master's host",
        ),
    ] = None
    yarn_resourcemanager_url: Annotated[
        str | None,
        string(
            "YARN ResourceManager URL",
            "YARN only: the ResourceManager's web address, whose REST API (/ws/v1/cluster/nodes, /metrics) tells "
            "the free capacity before a region is submitted. Unset: the declared total_cores/total_memory are used.",
            "http://resourcemanager:8088",
            values="http(s) URL",
            check=coercion.http_url,
            secret="url",
            default_text="none (declared capacity)",
        ),
    ] = None
    hadoop_conf_dir: Annotated[
        str | None,
        string(
            "Hadoop configuration folder",
            "YARN and HDFS: the folder with the cluster's core-site.xml, hdfs-site.xml and yarn-site.xml on the "
            "Airflow worker. spark-submit gets it as HADOOP_CONF_DIR and YARN_CONF_DIR; the Airflow side reads the "
            "NameNode's web address (dfs.namenode.http-address) from it to reach an hdfs:// storage root.",
            "/etc/hadoop/conf",
            values="absolute path",
            check=coercion.absolute_path,
            default_text="the worker's HADOOP_CONF_DIR",
        ),
    ] = None
    python_env: Annotated[
        Literal["auto", "off"],
        choice(
            "Python environment",
            "YARN only: 'auto' packs the Airflow worker's virtual environment once per content hash, keeps it in "
            "the storage root's _python folder and has every container run its Python (spark.yarn.dist.archives, "
            "spark.pyspark.python), unless spark_conf sets spark.pyspark.python; 'off' leaves the nodes' own Python.",
            "auto",
            choices=PYTHON_ENVS,
        ),
    ] = "auto"
    class_archive: Annotated[
        str,
        string(
            "Class-data archive",
            "Whether the JVMs the provider starts map Spark's classes from a class-data archive instead of loading "
            "them from the jars again (docs/cold-start.md). 'auto': the archive this worker makes once per Spark "
            "install and Java (in the background, the first time a region runs), for the JVMs on this host (the "
            "spark-submit driver, local mode, the warm pool) and a loopback standalone cluster's executors and "
            "drivers; 'off': none; a path: an archive at that path on every host that runs a driver or executor "
            "(made there with 'finegrained class-archive --output PATH'). Not for YARN's containers.",
            "auto",
            values="auto, off or an absolute path",
            check=coercion.auto_off_or_path,
        ),
    ] = "auto"
    jit: Annotated[
        Literal["auto", "c1", "tiered"],
        choice(
            "JIT compilers",
            "What a region's driver and executors compile with: 'c1' alone starts faster and runs slower code, "
            "'tiered' (the JVM's default) adds C2 for long CPU-bound work; 'auto' chooses per region from the "
            "bytes its stages read per task slot (docs/cold-start.md).",
            "auto",
            choices=JIT_CHOICES,
        ),
    ] = "auto"
    history_server_url: Annotated[
        str | None,
        string(
            "Spark history server URL",
            "Where the stage tasks' 'Spark UI' link points once an application has ended (its driver UI is gone "
            "then). Unset: the link goes to the live application's UI only.",
            "http://spark-history:18080",
            values="http(s) URL",
            check=coercion.http_url,
            secret="url",
        ),
    ] = None

    @property
    def master_info(self) -> MasterInfo:
        return parse_master(self.master)

    @property
    def master_kind(self) -> MasterKind:
        """``local``, ``local-cluster``, ``standalone`` (spark://), ``yarn`` or ``k8s``."""
        return self.master_info.kind

    @property
    def is_local(self) -> bool:
        """Spark local mode: one JVM whose threads are the executors (not ``local-cluster``)."""
        return self.master_kind == "local"

    @property
    def secret_conf_keys(self) -> frozenset[str]:
        """Keys of ``spark_conf`` whose values are secrets."""
        return frozenset(k for k in self.spark_conf if is_secret_key(k))

    def webui_json_urls(self) -> list[str]:
        """Standalone masters' ``/json/`` status URLs: ``master_webui_url``, else port 8080 of each master."""
        if self.master_kind != "standalone":
            return []
        if self.master_webui_url:
            base = self.master_webui_url
            return [base if base.endswith("/json") else f"{base}/json/"]
        return [f"http://{host}:8080/json/" for host, _ in self.master_info.hosts]
