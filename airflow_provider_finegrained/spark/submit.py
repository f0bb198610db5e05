"""Build the spark-submit argument list for one Spark application, and a redacted copy for logs."""

from __future__ import annotations

import contextlib
import glob
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.util import find_spec

from airflow_provider_finegrained.launchers.master import is_local_master, parse_master

# The one secret-key rule lives in ``secrets``; re-exported here for callers that import it from this module.
from airflow_provider_finegrained.secrets import REDACTED as REDACTED
from airflow_provider_finegrained.secrets import is_secret_key as is_secret_key
from airflow_provider_finegrained.secrets import redact_argv
from airflow_provider_finegrained.spark.java import SparkEnvironmentError
from airflow_provider_finegrained.spark.properties_file import (
    properties_file_args,
    secret_properties_file,
    split_secret_conf,
)

DEPLOY_MODES = ("client", "cluster")
PYTHON_RUNNER_CLASS = "org.apache.spark.deploy.PythonRunner"

_MEMORY_RE = re.compile(r"[1-9]\d*(?:[kmgtp]b?|b)?", re.IGNORECASE)


@dataclass(frozen=True)
class SubmitRequest:
    """Everything spark-submit needs for one application; `env` is added to the submit environment."""

    application: str
    master: str
    deploy_mode: str = "client"
    name: str | None = None
    conf: Mapping[str, str] = field(default_factory=dict)
    application_args: Sequence[str] = ()
    py_files: Sequence[str] = ()
    driver_memory: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    primary_jar: str | None = None
    """Standalone cluster mode: the JVM primary resource (default: this installation's spark-tags jar)."""
    driver_wrapper: str | None = None
    """Standalone cluster mode: the program PythonRunner starts (default: this installation's
    ``spark/standalone_driver.py``)."""

    def __post_init__(self) -> None:
        # Copy the inputs so later changes to the caller's objects do not reach the request; plain
        # dicts (not MappingProxyType) keep it picklable and deep-copyable, as Airflow needs.
        object.__setattr__(self, "conf", dict(self.conf))
        object.__setattr__(self, "env", dict(self.env))
        object.__setattr__(self, "application_args", tuple(self.application_args))
        object.__setattr__(self, "py_files", tuple(self.py_files))


def validate_master(master: str) -> str:
    """Return `master` if Spark accepts it (see `launchers.master.parse_master`), else raise ValueError."""
    parse_master(master)
    return master


def validate_request(request: SubmitRequest) -> None:
    """Raise ValueError when spark-submit would reject the request or misread its arguments."""
    if not request.application:
        raise ValueError("SubmitRequest.application must name the application file")
    validate_master(request.master)
    if request.deploy_mode not in DEPLOY_MODES:
        raise ValueError(f"deploy_mode must be 'client' or 'cluster', got {request.deploy_mode!r}")
    if request.deploy_mode == "cluster" and is_local_master(request.master):
        raise ValueError(f"deploy_mode 'cluster' is not possible with master {request.master!r}")
    if is_standalone_python_cluster(request):
        # The driver runs on a worker, in another working directory: only absolute local paths resolve
        # there, and PythonRunner accepts local files only.
        for setting, path in [("application", request.application), *(("py_files", p) for p in request.py_files)]:
            if not os.path.isabs(path):
                raise ValueError(
                    f"{setting}: {path!r} must be an absolute local path present on every worker for "
                    "cluster deploy mode on a standalone master; allowed: e.g. '/opt/jobs/app.py'"
                )
    for key in request.conf:
        # spark-submit splits `--conf k=v` at the first '=', so a key holding '=' would be misread.
        if not key or "=" in key or key != key.strip():
            raise ValueError(f"invalid Spark conf key {key!r}")
    for path in request.py_files:
        if not path or "," in path:
            raise ValueError(f"invalid py_files entry {path!r}: must be non-empty and hold no comma")
    if request.driver_memory is not None and not _MEMORY_RE.fullmatch(request.driver_memory):
        raise ValueError(f"invalid driver_memory {request.driver_memory!r}; expected e.g. '512m' or '2g'")


def spark_home(explicit: str | None = None) -> str:
    """Return the Spark installation to run: `explicit`, else $SPARK_HOME, else the pyspark package."""
    if explicit:
        source, home = "spark_home argument", explicit
    elif os.environ.get("SPARK_HOME"):
        source, home = "SPARK_HOME", os.environ["SPARK_HOME"]
    else:
        # find_spec locates pyspark without importing it (importing pyspark costs about a second).
        spec = find_spec("pyspark")
        if spec is None or spec.origin is None:
            raise SparkEnvironmentError("pyspark is not installed and SPARK_HOME is not set: pip install pyspark")
        source, home = "the installed pyspark package", os.path.dirname(spec.origin)
    if not os.path.isfile(os.path.join(home, "bin", "spark-submit")):
        raise SparkEnvironmentError(f"{source} ({home}) has no bin/spark-submit; install pyspark or fix it")
    return os.path.abspath(home)


_spark_home = spark_home  # for functions whose `spark_home` parameter hides the function


def spark_submit_path(home: str | None = None) -> str:
    """Return the spark-submit script of the Spark installation chosen by `spark_home`."""
    return os.path.join(spark_home(home), "bin", "spark-submit")


def is_standalone_python_cluster(request: SubmitRequest) -> bool:
    """A Python application in cluster deploy mode on a standalone master (launched through PythonRunner)."""
    return (
        request.deploy_mode == "cluster"
        and parse_master(request.master).kind == "standalone"
        and request.application.endswith(".py")
    )


def python_runner_jar(home: str | None = None) -> str:
    """The JVM primary resource for standalone cluster mode: Spark's own small spark-tags jar.

    Any jar on the worker works, since PythonRunner comes from Spark's classpath; the worker copies
    the primary resource into the driver's directory and every executor fetches it, so the smallest
    jar of the distribution (about 15 KB, against 16 MB for spark-core) is used.
    """
    jars = sorted(glob.glob(os.path.join(_spark_home(home), "jars", "spark-tags_*.jar")))
    if not jars:
        raise SparkEnvironmentError(
            f"{_spark_home(home)}/jars has no spark-tags_*.jar, which cluster deploy mode on a standalone "
            "master submits as its primary resource; use a complete Spark installation"
        )
    return jars[-1]


def standalone_driver_path() -> str:
    """The program PythonRunner starts on the worker (it ends the driver's Python with its JVM)."""
    from airflow_provider_finegrained.spark import standalone_driver

    return os.path.abspath(standalone_driver.__file__)


def _merge_list(conf: Mapping[str, str], key: str, values: Sequence[str]) -> str:
    existing = [v for v in conf.get(key, "").split(",") if v]
    return ",".join([*existing, *(v for v in values if v not in existing)])


def _standalone_python_cluster_conf(request: SubmitRequest) -> dict[str, str]:
    """The settings of the PythonRunner launch: the request's, plus what the driver on the worker needs."""
    conf = dict(request.conf)
    conf.setdefault("spark.pyspark.python", sys.executable)
    conf.setdefault("spark.pyspark.driver.python", sys.executable)
    conf.setdefault("spark.standalone.submit.waitAppCompletion", "true")
    conf.setdefault("spark.master.rest.enabled", "false")
    if request.py_files:
        # The driver's SparkContext ships spark.files to executors and puts spark.submit.pyFiles on
        # their PYTHONPATH: what `--py-files` does in client mode (spark-submit refuses it for a jar).
        conf["spark.files"] = _merge_list(conf, "spark.files", request.py_files)
        conf["spark.submit.pyFiles"] = _merge_list(conf, "spark.submit.pyFiles", request.py_files)
    return conf


def conf_arguments(conf: Mapping[str, str], properties_file: str | None) -> list[str]:
    """``--properties-file`` for the secret settings (which must have one), ``--conf k=v`` for the others."""
    public, secret = split_secret_conf(conf)
    if secret and properties_file is None:
        raise ValueError(
            f"Spark settings {sorted(secret)} are secrets and never go on spark-submit's command line: "
            "write them with secret_properties_file() and pass its path as properties_file "
            "(or build the command inside spark_submit_command())"
        )
    args = properties_file_args(properties_file)
    for key in sorted(public):
        args += ["--conf", f"{key}={public[key]}"]
    return args


def _standalone_python_cluster_command(
    request: SubmitRequest, spark_home: str | None, properties_file: str | None
) -> list[str]:
    """Spark refuses `--deploy-mode cluster` for .py files on standalone, so launch PythonRunner as a JVM app.

    PythonRunner's arguments are `<python file> <comma-separated py-files> <app args…>`; the python file
    is `standalone_driver.py run <application>`. spark-submit's own client waits for the driver
    (waitAppCompletion, legacy RPC client rather than REST) but exits 0 whatever the driver's final
    state, so the command runs under `standalone_driver submit`, which turns a non-FINISHED end into
    exit 1.
    """
    command = [
        sys.executable,
        "-m",
        "airflow_provider_finegrained.spark.standalone_driver",
        "submit",
        "--",
        spark_submit_path(spark_home),
        "--master",
        request.master,
        "--deploy-mode",
        "cluster",
    ]
    if request.name:
        command += ["--name", request.name]
    command += ["--class", PYTHON_RUNNER_CLASS]
    command += conf_arguments(_standalone_python_cluster_conf(request), properties_file)
    if request.driver_memory:
        command += ["--driver-memory", request.driver_memory]
    command += [
        request.primary_jar or python_runner_jar(spark_home),
        request.driver_wrapper or standalone_driver_path(),
        ",".join(request.py_files),
    ]
    command += ["run", request.application, *request.application_args]
    return command


def build_spark_submit_command(
    request: SubmitRequest, spark_home: str | None = None, properties_file: str | None = None
) -> list[str]:
    """Return the exact argument list (no shell involved) that submits `request`.

    That is spark-submit itself, except for Python in cluster mode on a standalone master (see
    `_standalone_python_cluster_command`), which runs spark-submit under this interpreter. Secret
    settings (``secrets.is_secret_key``) never go on it: they are in `properties_file` (see
    `spark_submit_command`, which writes it), and a request holding secrets without one is refused.
    """
    validate_request(request)
    if is_standalone_python_cluster(request):
        return _standalone_python_cluster_command(request, spark_home, properties_file)
    command = [
        spark_submit_path(spark_home),
        "--master",
        request.master,
        "--deploy-mode",
        request.deploy_mode,
    ]
    if request.name:
        command += ["--name", request.name]
    command += conf_arguments(request.conf, properties_file)
    if request.py_files:
        command += ["--py-files", ",".join(request.py_files)]
    if request.driver_memory:
        command += ["--driver-memory", request.driver_memory]
    command.append(request.application)
    command.extend(request.application_args)
    return command


def secret_conf(request: SubmitRequest) -> dict[str, str]:
    """The secret settings of `request`: what its properties file holds."""
    conf = _standalone_python_cluster_conf(request) if is_standalone_python_cluster(request) else request.conf
    return split_secret_conf(conf)[1]


@contextlib.contextmanager
def spark_submit_command(
    request: SubmitRequest, spark_home: str | None = None, directory: str | None = None
) -> Iterator[list[str]]:
    """The command of `build_spark_submit_command`, with the request's secrets in a private properties file.

    The file (0600, in a fresh 0700 folder under `directory`) exists while inside the block: run
    spark-submit inside it; it reads the file while starting, before its application starts.
    """
    validate_request(request)
    with secret_properties_file(secret_conf(request), directory) as path:
        yield build_spark_submit_command(request, spark_home, properties_file=path)


LAUNCHER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
"""What spark-submit's launcher JVM (``org.apache.spark.launcher.Main``) starts with (``SPARK_LAUNCHER_OPTS``)."""


def build_spark_submit_env(
    request: SubmitRequest,
    base: Mapping[str, str] | None = None,
    spark_home: str | None = None,
) -> dict[str, str]:
    """Return the full environment for spark-submit: `base` (default os.environ) plus `request.env`.

    For local masters the driver and the Python workers default to this interpreter, which has
    pyspark and this provider installed; `python3` on PATH may have neither. Remote clusters must
    set PYSPARK_PYTHON themselves (through `request.env`), since this path means nothing there.
    Pass the same `spark_home` as to `build_spark_submit_command`: SPARK_HOME is set to match it.
    """
    env = without_connect_client(os.environ if base is None else base)
    env.update(request.env)
    # bin/spark-submit execs $SPARK_HOME/bin/spark-class, so SPARK_HOME must name the same
    # installation as the script in the command, whatever the base environment says.
    env["SPARK_HOME"] = _spark_home(spark_home)
    # spark-class's launcher JVM lives under a second: C1 alone (spark.jvm_start); a user's own value wins.
    env.setdefault("SPARK_LAUNCHER_OPTS", LAUNCHER_JAVA_OPTIONS)
    if request.deploy_mode == "client":
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if is_local_master(request.master):
        env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env


# pyspark sets these in os.environ once a process has opened a Spark Connect session (a warm region):
# inherited by a spark-submit, they turn its classic driver into a Connect client with no server.
# pyspark also sets this one when it starts a local Connect server itself (``remote("local")``): a client
# that sees it sends the token, which makes it speak TLS to any host but "localhost", so a pool without
# authentication on 127.0.0.1 never answers it (the client retries for minutes); a server that inherits
# it demands the token.
CONNECT_TOKEN_ENV = ("SPARK_CONNECT_AUTHENTICATE_TOKEN",)
CONNECT_CLIENT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE", *CONNECT_TOKEN_ENV)


def without_connect_client(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without the variables that make pyspark a Spark Connect client."""
    return {k: v for k, v in env.items() if k not in CONNECT_CLIENT_ENV}


@contextlib.contextmanager
def environ_restored(keys: Iterable[str]) -> Iterator[None]:
    """On leaving, ``keys`` in ``os.environ`` as they were on entering: set again, or removed."""
    saved = {key: os.environ.get(key) for key in keys}
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def connect_client_env_restored(*, unset: Sequence[str] = ()) -> Iterator[None]:
    """Undo, on leaving, pyspark's marking of this process as a Spark Connect client.

    Left set, a later classic ``SparkSession.builder.getOrCreate()`` in the same process (another task
    of ``dag.test()``, a user's own code) would look for a Connect server instead. ``unset`` names
    variables to remove while inside (``CONNECT_TOKEN_ENV`` for a pool without authentication).
    """
    with environ_restored(CONNECT_CLIENT_ENV):
        for key in unset:
            os.environ.pop(key, None)
        yield


def redacted_command(command: Sequence[str]) -> list[str]:
    """Return a copy of a spark-submit command with secret `--conf` values replaced by '***'.

    The provider's own commands hold no secret (they are in the ``--properties-file``, shown by its path);
    masking stays for commands put together elsewhere.
    """
    return redact_argv(command)
