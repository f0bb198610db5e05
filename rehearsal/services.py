"""What runs on each rehearsal host, started as a real deployment starts it (Debian, PyPI and Maven parts only).

- host A: PostgreSQL (the metadata database), Redis (Celery's broker), Airflow's api-server, scheduler,
  dag-processor and triggerer;
- hosts B and C: Airflow Celery workers, each also on a queue of its own (``host_b``, ``host_c``) so a
  DAG can put a task on one;
- host D: the Spark standalone master, the S3 API server (moto) and HDFS (the loopback Hadoop cluster's
  NameNode and DataNode, no YARN), either of which holds the storage root;
- hosts E and F: Spark standalone workers.
"""

from __future__ import annotations

import json
import secrets
import shutil
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rehearsal.hosts import HOME, Host, HostError

VENV_BIN = Path(sys.executable).parent
AIRFLOW = str(VENV_BIN / "airflow")
PG_BIN = Path("/usr/lib/postgresql/15/bin")
AIRFLOW_HOME = f"{HOME}/airflow"
BUCKET = "lake"
S3_KEY, S3_SECRET = "rehearsal-access-key", "rehearsal-secret-key-never-shown"
REPO = Path(__file__).resolve().parent.parent
HDFS_DIR = f"{HOME}/hdfs"
"""HDFS's folder on host D (its blocks, logs and the client configuration it writes)."""
HADOOP_CONF = f"{HOME}/hadoop-conf"
"""Every host's HADOOP_CONF_DIR: HDFS's client configuration, copied to each as a deployment tool would."""
SPARK_CORES, SPARK_MEMORY = 1, "2g"
"""Each Spark worker host's cores and memory."""


@dataclass(frozen=True)
class Layout:
    """Which host plays which part, and the settings every Airflow process shares."""

    control: Host
    workers: tuple[Host, ...]
    spark_master: Host
    spark_workers: tuple[Host, ...]
    secrets: Mapping[str, str] = field(default_factory=dict)

    @property
    def storage(self) -> Host:
        return self.spark_master

    def airflow_env(self) -> dict[str, str]:
        """The environment of every Airflow process, on whichever host: all state is reached over the network."""
        a = self.control.hostname
        db = f"postgresql+psycopg2://airflow:{self.secrets['db']}@{a}:5432/airflow"
        return {
            "AIRFLOW_HOME": AIRFLOW_HOME,
            "AIRFLOW__CORE__DAGS_FOLDER": f"{AIRFLOW_HOME}/dags",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__CORE__PARALLELISM": "16",
            "AIRFLOW__CORE__FERNET_KEY": self.secrets["fernet"],
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{a}:8080/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db,
            "AIRFLOW__CELERY__BROKER_URL": f"redis://:{self.secrets['redis']}@{a}:6379/0",
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + db,
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": "4",
            "AIRFLOW__API_AUTH__JWT_SECRET": self.secrets["jwt"],
            "AIRFLOW__API__SECRET_KEY": self.secrets["api"],
            "AIRFLOW__API__BASE_URL": f"http://{a}:8080",
            "AIRFLOW__SCHEDULER__DAG_DIR_LIST_INTERVAL": "10",
            # A worker host cut off stops heartbeating: its task is failed (and retried elsewhere) after 30 s.
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "30",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
            "AIRFLOW__FINEGRAINED__WARM_POOL": "off",
            "PYTHONPATH": str(REPO / "dags_examples"),
        }


def layout(all_hosts: Sequence[Host], state: Path) -> Layout:
    """A: control, B and C: Airflow workers, D: Spark master and S3, E and F (when there): Spark workers."""
    by_name = {host.name: host for host in all_hosts}
    kept = state / "secrets.json"
    if not kept.exists():
        kept.write_text(json.dumps({k: secrets.token_urlsafe(24) for k in ("db", "redis", "jwt", "api")}
                                   | {"fernet": _fernet_key()}))  # fmt: skip
        kept.chmod(0o600)
    spark_workers = tuple(by_name[n] for n in "ef" if n in by_name)
    return Layout(by_name["a"], (by_name["b"], by_name["c"]), by_name["d"], spark_workers, json.loads(kept.read_text()))


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def wait_for(what: str, ready: Callable[[], bool], timeout: float, logs: Path | None = None) -> None:
    """Poll ``ready`` until it is true; HostError naming ``what`` (and where its log is) after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except (OSError, HostError):
            pass
        time.sleep(1)
    raise HostError(f"{what} not ready after {timeout:.0f} s" + (f" (see {logs})" if logs else ""))


def http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=5) as response:
        return bool(response.status == 200)


def start_postgres(layout: Layout) -> None:
    a = layout.control
    pgdata = f"{HOME}/pgdata"
    a.run(["sh", "-ec", f"mkdir -p {pgdata} && chown postgres {pgdata}"])
    a.run(["runuser", "-u", "postgres", "--", str(PG_BIN / "initdb"), "-D", pgdata, "--auth-local=trust",
           "--auth-host=scram-sha-256"])  # fmt: skip
    a.run(["sh", "-ec", f"echo 'host all all 10.77.0.0/24 scram-sha-256' >> {pgdata}/pg_hba.conf"])
    listen = f"listen_addresses={a.address},127.0.0.1"
    a.spawn("postgres", ["runuser", "-u", "postgres", "--", str(PG_BIN / "postgres"), "-D", pgdata, "-c", listen,
                         "-c", "unix_socket_directories=/tmp", "-c", "max_connections=200"])  # fmt: skip
    psql = ["runuser", "-u", "postgres", "--", "psql", "-h", "/tmp", "-v", "ON_ERROR_STOP=1", "-c"]
    wait_for("PostgreSQL on host A", lambda: a.run([*psql, "select 1"], check=False).returncode == 0, 60, a.logs)
    a.run([*psql, f"create user airflow password '{layout.secrets['db']}'"])
    a.run([*psql, "create database airflow owner airflow"])


def start_redis(layout: Layout) -> None:
    a = layout.control
    a.spawn("redis", ["redis-server", "--bind", a.address, "--port", "6379", "--requirepass", layout.secrets["redis"],
                      "--save", "", "--appendonly", "no", "--dir", "/tmp"])  # fmt: skip
    probe = ["redis-cli", "-h", a.address, "--no-auth-warning", "-a", layout.secrets["redis"], "ping"]
    wait_for("Redis on host A", lambda: "PONG" in a.run(probe, check=False).stdout, 30, a.logs)


def install_dags(host: Host, dag_files: Sequence[Path]) -> None:
    """Deploy the DAG files to the host's own DAGs folder, as git-sync or a CI deploy would."""
    dags = host.folder / "home" / "airflow" / "dags"
    dags.mkdir(parents=True, exist_ok=True)
    for source in dag_files:
        shutil.copy(source, dags / source.name)


def start_airflow_control(layout: Layout, dag_files: Sequence[Path]) -> None:
    a = layout.control
    env = layout.airflow_env()
    install_dags(a, dag_files)
    a.run([AIRFLOW, "db", "migrate"], env=env, timeout=600)
    a.spawn("api-server", [AIRFLOW, "api-server", "--host", a.address, "--port", "8080"], env)
    for component in ("scheduler", "dag-processor", "triggerer"):
        a.spawn(component, [AIRFLOW, component], env)
    wait_for("the api-server on host A", lambda: http_ok(f"http://{a.address}:8080/api/v2/monitor/health"), 180, a.logs)


def start_airflow_workers(layout: Layout, dag_files: Sequence[Path]) -> None:
    for worker in layout.workers:
        install_dags(worker, dag_files)
        queues = f"default,host_{worker.name}"
        worker.spawn("celery-worker", [AIRFLOW, "celery", "worker", "--queues", queues, "--celery-hostname",
                                       f"celery@{worker.hostname}"], layout.airflow_env())  # fmt: skip


def workers_online(layout: Layout) -> set[str]:
    """The Celery workers that answer a ping through the broker."""
    a = layout.control
    code = (
        "from airflow.providers.celery.executors.celery_executor_utils import app;"
        "import json;print(json.dumps(sorted(k for d in app.control.ping(timeout=3) or [] for k in d)))"
    )
    out = a.run([str(VENV_BIN / "python"), "-c", code], env=layout.airflow_env(), check=False, timeout=120).stdout
    lines = [line for line in out.splitlines() if line.startswith("[")]
    return set(json.loads(lines[-1])) if lines else set()


SPARK_ENV = {"SPARK_LOG_DIR": "/tmp/spark-logs", "SPARK_NO_DAEMONIZE": "1"}


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def start_spark(layout: Layout, cores: int = SPARK_CORES, memory: str = SPARK_MEMORY) -> str:
    """The standalone master on D and a worker on each Spark worker host; the master URL."""
    d = layout.spark_master
    master = f"spark://{d.hostname}:7077"
    d.spawn("spark-master", [_spark_class(), "org.apache.spark.deploy.master.Master", "--host", d.hostname,
                             "--port", "7077", "--webui-port", "8080"], SPARK_ENV)  # fmt: skip
    wait_for("the Spark master on host D", lambda: http_ok(f"http://{d.address}:8080/json/"), 90, d.logs)
    for worker in layout.spark_workers:
        start_spark_worker(worker, master, cores, memory)
    wait_for("the Spark workers", lambda: alive_spark_workers(layout) == len(layout.spark_workers), 120, d.logs)
    return master


def start_spark_worker(worker: Host, master: str, cores: int = SPARK_CORES, memory: str = SPARK_MEMORY) -> None:
    """A Spark standalone worker on ``worker``, registering with ``master``."""
    argv = [_spark_class(), "org.apache.spark.deploy.worker.Worker", "--host", worker.hostname, "--cores", str(cores),
            "--memory", memory, "--work-dir", "/tmp/spark-work", "--webui-port", "8081", master]  # fmt: skip
    worker.spawn("spark-worker", argv, SPARK_ENV)


def alive_spark_workers(layout: Layout) -> int:
    with urllib.request.urlopen(f"http://{layout.spark_master.address}:8080/json/", timeout=5) as response:
        status = json.load(response)
    return sum(w["state"] == "ALIVE" for w in status["workers"])


def start_s3(layout: Layout) -> str:
    """moto's S3 API server on D with the bucket ``BUCKET``; its endpoint, by host name."""
    d = layout.storage
    d.spawn("s3", [str(VENV_BIN / "moto_server"), "-H", d.address, "-p", "5000"], {})
    endpoint = f"http://{d.hostname}:5000"
    wait_for("the S3 API on host D", lambda: http_ok(f"http://{d.address}:5000/moto-api/"), 60, d.logs)
    request = urllib.request.Request(f"http://{d.address}:5000/{BUCKET}", method="PUT")
    urllib.request.urlopen(request, timeout=10).close()
    return endpoint


def start_hdfs(layout: Layout, all_hosts: Sequence[Host]) -> str:
    """HDFS on D, reached at its address (``hadoop start --host``); its client configuration on every host.

    Returns ``fs.defaultFS``. The Airflow side reaches it over WebHDFS at the address in that configuration.
    """
    d = layout.storage
    argv = [str(VENV_BIN / "python"), "-m", "airflow_provider_finegrained", "hadoop", "start", "--dir", HDFS_DIR,
            "--host", d.address, "--nodemanagers", "0", "--timeout", "240"]  # fmt: skip
    d.run(argv, timeout=300)
    conf = _on_disk(d, f"{HDFS_DIR}/conf")
    for host in all_hosts:
        target = _on_disk(host, HADOOP_CONF)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(conf, target)
    return hdfs_reach(layout)[0]


def hdfs_reach(layout: Layout) -> tuple[str, str]:
    """HDFS's ``fs.defaultFS`` and its NameNode's web address (WebHDFS), as recorded on host D."""
    state = json.loads((_on_disk(layout.storage, HDFS_DIR) / "hadoop.json").read_text())
    return state["default_fs"], state["namenode_http_url"]


def hdfs_pid(layout: Layout) -> int:
    """The process that runs HDFS on host D."""
    return int(json.loads((_on_disk(layout.storage, HDFS_DIR) / "hadoop.json").read_text())["pid"])


def _on_disk(host: Host, path: str) -> Path:
    """Where ``path`` under a host's $HOME lies on the real disk (for the driver, which is on no host)."""
    return host.folder / "home" / Path(path).relative_to(HOME)


def add_connections(layout: Layout, master: str, endpoint: str, jars: Sequence[str], root: str) -> None:
    """The storage connection and the provider's connection, in the metadata database (as users add them)."""
    a = layout.control
    env = layout.airflow_env()
    lake = {"conn_type": "aws", "login": S3_KEY, "password": S3_SECRET,
            "extra": {"endpoint_url": endpoint, "region_name": "us-east-1"}}  # fmt: skip
    from airflow_provider_finegrained.cli.cluster import connection_extra

    d = layout.spark_master
    extra = connection_extra(len(layout.spark_workers), SPARK_CORES, SPARK_MEMORY, f"http://{d.hostname}:8080", root)
    extra.update(storage_conn_id="lake", deploy_mode="client", warm_pool="off")
    # On the classpath of drivers and executors: every host has the S3A jars at one path, as a cluster's nodes
    # would. In spark.jars (local: too) every executor of every application copies them (674 MB) into its
    # worker's folder, and the load test filled the disk.
    classpath = ":".join(jars)
    extra["spark_conf"] = {"spark.driver.extraClassPath": classpath, "spark.executor.extraClassPath": classpath,
                           "spark.pyspark.python": str(VENV_BIN / "python")}  # fmt: skip
    spark = {"conn_type": "finegrained_spark", "host": master, "extra": extra}
    cluster = {**spark, "extra": {**extra, "deploy_mode": "cluster"}}
    connections = (("lake", lake), ("finegrained_spark_default", spark), ("finegrained_spark_cluster", cluster))
    for conn_id, conn in connections:
        a.run([AIRFLOW, "connections", "delete", conn_id], env=env, check=False)
        a.run([AIRFLOW, "connections", "add", conn_id, "--conn-json", json.dumps(conn)], env=env)
