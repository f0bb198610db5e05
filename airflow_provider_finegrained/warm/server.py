"""The Spark Connect server of a warm pool: its shape, its spark-submit command and environment (pure)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from airflow_provider_finegrained.planning.capacity import (
    EXECUTOR_IDLE_TIMEOUT_S,
    WorkerShape,
    check_resource_stability,
)
from airflow_provider_finegrained.secrets import REDACTION_REGEX_CONF, spark_redaction_regex
from airflow_provider_finegrained.spark.jvm_start import archive_for_this_host, jvm_start
from airflow_provider_finegrained.spark.properties_file import split_secret_conf
from airflow_provider_finegrained.spark.submit import spark_submit_path, without_connect_client
from airflow_provider_finegrained.storage.hadoop_conf import spark_hadoop_conf
from airflow_provider_finegrained.storage.locations import scheme_of

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
APP_NAME = "finegrained-warm-pool"
FOLDER_CONF = "spark.finegrained.warm.folder"
"""Carried on the JVM's command line so a server left behind can be recognised as this pool's."""
HOST = "127.0.0.1"
GPU_CONF = "spark.executor.resource.gpu.amount"


class WarmPoolConfigError(ValueError):
    """The connection's settings cannot describe a warm pool (names the settings at fault)."""


@dataclass(frozen=True)
class PoolShape:
    """The executors the pool runs: what a region must fit to run in it."""

    executor_cores: int
    executor_memory: int
    """Bytes (the driver's memory in local mode, where the executors are its threads)."""
    gpus_per_executor: float
    min_executors: int
    max_executors: int
    local: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PoolShape:
        return cls(**data)


def pool_shape(settings: Any) -> PoolShape:
    """The pool a connection asks for; dynamic allocation bounds from its minimum/maximum resources.

    Raises WarmPoolConfigError when the minimum executors exceed the maximum (naming the settings).
    """
    gpus = float(settings.spark_conf.get(GPU_CONF, 0) or 0)
    if settings.is_local:
        return PoolShape(settings.total_cores, settings.driver_memory, gpus, 1, 1, True)
    cores, memory = settings.executor_cores, settings.executor_memory
    worker = WorkerShape(slots=cores, cpu=float(cores), memory=memory)
    try:
        least, most = check_resource_stability(settings.resource_bounds(), worker)
    except ValueError as exc:
        raise WarmPoolConfigError(f"min_slots/max_slots, min_cpu/max_cpu, min_memory/max_memory: {exc}") from None
    by_cores = max(1, settings.total_cores // cores)
    ceiling = by_cores if most is None else min(by_cores, most)
    if least > ceiling:
        raise WarmPoolConfigError(
            f"min_slots/min_cpu/min_memory need {least} executor(s) of {cores} core(s), but total_cores "
            f"({settings.total_cores}) and max_slots/max_cpu/max_memory allow at most {ceiling}; "
            "lower the minimum or raise the maximum"
        )
    if ceiling < 1:
        raise WarmPoolConfigError(
            f"max_slots/max_cpu/max_memory allow no executor of {cores} core(s); raise the maximum"
        )
    return PoolShape(cores, memory, gpus, least, ceiling, False)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def is_loopback_master(settings: Any) -> bool:
    """Local masters, or standalone masters on this machine's loopback address."""
    return bool(settings.master_info.is_loopback)


def _memory(value: int) -> str:
    mib = max(1, value // 2**20)
    return f"{mib}m"


def storage_spark_conf(settings: Any, storage_options: Mapping[str, Any] | None) -> dict[str, str]:
    """The ``spark.hadoop.*`` settings of the storage root's credentials (``storage_conn_id``, or for ``hdfs://``
    the NameNode's web address), as a cold region's application gets them (``spark_hadoop_conf``)."""
    return spark_hadoop_conf(scheme_of(settings.storage_root), storage_options)


def _spark_conf(settings: Any, storage_conf: Mapping[str, str] | None) -> dict[str, str]:
    # As for a cold application: the connection's spark_conf overrides what storage_conn_id gave.
    return {**(storage_conf or {}), **{k: str(v) for k, v in settings.spark_conf.items()}}


def storage_identity(settings: Any, storage_conf: Mapping[str, str] | None, token: str | None) -> str | None:
    """What the pool was started with to reach the storage root, as a digest keyed with the pool's token.

    A pool is reused only by callers with the same storage credentials and Hadoop configuration folder; the
    state file (readable by others) holds this HMAC, never a credential, and without the token (0600) it
    cannot be checked against guesses. None when there is nothing to tell apart (a local root, no folder).
    """
    if not storage_conf and not settings.hadoop_conf_dir:
        return None
    payload = json.dumps(
        {"conf": dict(storage_conf or {}), "hadoop_conf_dir": settings.hadoop_conf_dir}, sort_keys=True
    )
    return hmac.new((token or "").encode(), payload.encode(), hashlib.sha256).hexdigest()


def server_conf(
    settings: Any,
    shape: PoolShape,
    port: int,
    ui_port: int,
    folder: str,
    storage_conf: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Spark properties of the server: the storage's, the connection's spark_conf, then what the pool decides."""
    conf = _spark_conf(settings, storage_conf)
    # The pool's UI and event log mask what the provider's rule calls secret (Spark's default regex misses
    # spark.executorEnv.API_KEY); a user's own regex wins.
    conf.setdefault(REDACTION_REGEX_CONF, spark_redaction_regex())
    conf.update(
        {
            "spark.connect.grpc.binding.address": HOST,
            "spark.connect.grpc.binding.port": str(port),
            "spark.ui.port": str(ui_port),
            "spark.ui.showConsoleProgress": "false",  # progress reaches task logs as lines, not as a bar
            FOLDER_CONF: folder,
        }
    )
    if not settings.adaptive_query_execution:
        conf["spark.sql.adaptive.enabled"] = "false"
    # The pool's JVMs map the class-data archive where they can (spark.jvm_start); its JIT stays tiered: a
    # pool lives for hours, long enough for C2 to pay back.
    info = settings.master_info
    here = archive_for_this_host(settings.class_archive, settings.spark_home, settings.java_home)
    conf = jvm_start(settings.class_archive, here, info.kind, info.is_loopback, "client", None).conf(conf)
    if not shape.local:
        conf.update(
            {
                "spark.executor.cores": str(shape.executor_cores),
                "spark.executor.memory": _memory(shape.executor_memory),
                # A pool is long-lived: it gives executors back above its minimum and asks again under load.
                "spark.dynamicAllocation.enabled": "true",
                # No external shuffle service is assumed: shuffle tracking keeps executors holding shuffle data.
                "spark.dynamicAllocation.shuffleTracking.enabled": "true",
                "spark.dynamicAllocation.minExecutors": str(shape.min_executors),
                "spark.dynamicAllocation.initialExecutors": str(shape.min_executors),
                "spark.dynamicAllocation.maxExecutors": str(shape.max_executors),
                "spark.cores.max": str(shape.max_executors * shape.executor_cores),
            }
        )
        # An idle pool gives its executors back to the shared cluster above its minimum, those holding shuffle
        # files too (Spark keeps those forever by default: on the rehearsal an idle pool on one Airflow worker
        # host held every core of the cluster until its idle timeout). A user's own settings win.
        for key in ("executorIdleTimeout", "shuffleTracking.timeout"):
            conf.setdefault(f"spark.dynamicAllocation.{key}", f"{EXECUTOR_IDLE_TIMEOUT_S}s")
    return conf


def server_master(settings: Any) -> str:
    """``local[total_cores]`` for local masters (never ``local[*]``: the pool's size is the connection's)."""
    return f"local[{settings.total_cores}]" if settings.is_local else str(settings.master)


def server_command(
    settings: Any,
    shape: PoolShape,
    port: int,
    ui_port: int,
    folder: str,
    storage_conf: Mapping[str, str] | None = None,
) -> list[str]:
    """``spark-submit --class SparkConnectServer`` (spark-submit knows the class needs no application jar).

    Only the public settings: the secret ones (:func:`server_secret_conf`) go through a properties file.
    """
    command = [
        spark_submit_path(settings.spark_home),
        "--master",
        server_master(settings),
        "--name",
        APP_NAME,
        "--driver-memory",
        _memory(settings.driver_memory),
        "--class",
        SERVER_CLASS,
    ]
    conf, _ = split_secret_conf(server_conf(settings, shape, port, ui_port, folder, storage_conf))
    for key in sorted(conf):
        command += ["--conf", f"{key}={conf[key]}"]
    return command


def server_secret_conf(settings: Any, storage_conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's secret Spark settings (``spark.hadoop.*secret*``...: the storage's and ``spark_conf``'s)."""
    _, secret = split_secret_conf(_spark_conf(settings, storage_conf))
    return secret


def server_env(settings: Any, base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: this one, with SPARK_HOME, JAVA_HOME, the Hadoop configuration folder and
    the Python of this interpreter."""
    env = without_connect_client(os.environ if base is None else base)
    env["SPARK_HOME"] = os.path.dirname(os.path.dirname(spark_submit_path(settings.spark_home)))
    if settings.java_home:
        env["JAVA_HOME"] = settings.java_home
    if settings.hadoop_conf_dir:
        # As a cold spark-submit gets it (launchers/submitting.py): the cluster's HDFS (and YARN) settings.
        env["HADOOP_CONF_DIR"] = env["YARN_CONF_DIR"] = settings.hadoop_conf_dir
    env.pop("SPARK_NO_DAEMONIZE", None)
    if is_loopback_master(settings):
        # Spark's UI binds to SPARK_LOCAL_IP (0.0.0.0 without it), not to spark.driver.bindAddress: this keeps
        # the pool's unauthenticated UI, as its gRPC port, to this host, whatever the caller's environment says.
        env["SPARK_LOCAL_IP"] = HOST
    if settings.is_local:
        # Python UDFs run in workers of the server: this interpreter has pyspark (python3 may not).
        env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env
