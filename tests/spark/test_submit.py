from __future__ import annotations

import copy
import os
import pickle
import stat
import sys
from pathlib import Path

import pytest

from airflow_provider_finegrained.spark import standalone_driver
from airflow_provider_finegrained.spark.java import SparkEnvironmentError
from airflow_provider_finegrained.spark.submit import (
    LAUNCHER_JAVA_OPTIONS,
    SubmitRequest,
    build_spark_submit_command,
    build_spark_submit_env,
    is_secret_key,
    python_runner_jar,
    redacted_command,
    spark_home,
    spark_submit_command,
    validate_master,
)


@pytest.fixture
def fake_home(tmp_path: Path) -> str:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    return str(tmp_path)


def test_spark_home_defaults_to_the_pyspark_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    import pyspark

    home = spark_home()
    assert home == os.path.dirname(os.path.abspath(pyspark.__file__))
    assert os.access(os.path.join(home, "bin", "spark-submit"), os.X_OK)


def test_spark_home_from_environment_and_argument(
    monkeypatch: pytest.MonkeyPatch, fake_home: str, tmp_path: Path
) -> None:
    monkeypatch.setenv("SPARK_HOME", fake_home)
    assert spark_home() == fake_home
    with pytest.raises(SparkEnvironmentError, match="has no bin/spark-submit"):
        spark_home(str(tmp_path / "bin"))


def test_minimal_command(fake_home: str) -> None:
    request = SubmitRequest(application="/apps/job.py", master="local[2]")
    assert build_spark_submit_command(request, spark_home=fake_home) == [
        f"{fake_home}/bin/spark-submit",
        "--master",
        "local[2]",
        "--deploy-mode",
        "client",
        "/apps/job.py",
    ]


def test_full_command_orders_arguments_and_sorts_conf(fake_home: str) -> None:
    request = SubmitRequest(
        application="/apps/job.py",
        master="spark://127.0.0.1:7077",
        name="dag.stage",
        conf={
            "spark.sql.shuffle.partitions": "8",
            "spark.executor.cores": "2",
            "spark.driver.extraJavaOptions": "-Da=b -Dc=d",
        },
        application_args=["--stage", "s1", "--input=x y"],
        py_files=["/apps/a.zip", "/apps/b.py"],
        driver_memory="1g",
    )
    assert build_spark_submit_command(request, spark_home=fake_home) == [
        f"{fake_home}/bin/spark-submit",
        "--master",
        "spark://127.0.0.1:7077",
        "--deploy-mode",
        "client",
        "--name",
        "dag.stage",
        "--conf",
        "spark.driver.extraJavaOptions=-Da=b -Dc=d",
        "--conf",
        "spark.executor.cores=2",
        "--conf",
        "spark.sql.shuffle.partitions=8",
        "--py-files",
        "/apps/a.zip,/apps/b.py",
        "--driver-memory",
        "1g",
        "/apps/job.py",
        "--stage",
        "s1",
        "--input=x y",
    ]


def test_cluster_mode_on_yarn(fake_home: str) -> None:
    request = SubmitRequest(application="app.jar", master="yarn", deploy_mode="cluster")
    assert build_spark_submit_command(request, spark_home=fake_home)[1:5] == [
        "--master",
        "yarn",
        "--deploy-mode",
        "cluster",
    ]


@pytest.fixture
def home_with_jars(fake_home: str) -> str:
    jars = Path(fake_home, "jars")
    jars.mkdir()
    for name in ("spark-core_2.13-4.3.0.jar", "spark-tags_2.13-4.3.0.jar"):
        (jars / name).write_bytes(b"PK")
    return fake_home


def test_python_in_cluster_mode_on_standalone_runs_python_runner_under_the_exit_code_wrapper(
    home_with_jars: str,
) -> None:
    request = SubmitRequest(
        application="/apps/job.py",
        master="spark://127.0.0.1:7077",
        deploy_mode="cluster",
        name="dag.region",
        conf={"spark.executor.cores": "2"},
        application_args=["/jobs/r1.json", "--flag", "a b"],
        driver_memory="1g",
    )
    assert build_spark_submit_command(request, spark_home=home_with_jars) == [
        sys.executable,
        "-m",
        "airflow_provider_finegrained.spark.standalone_driver",
        "submit",
        "--",
        f"{home_with_jars}/bin/spark-submit",
        "--master",
        "spark://127.0.0.1:7077",
        "--deploy-mode",
        "cluster",
        "--name",
        "dag.region",
        "--class",
        "org.apache.spark.deploy.PythonRunner",
        "--conf",
        "spark.executor.cores=2",
        "--conf",
        "spark.master.rest.enabled=false",
        "--conf",
        f"spark.pyspark.driver.python={sys.executable}",
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        "--conf",
        "spark.standalone.submit.waitAppCompletion=true",
        "--driver-memory",
        "1g",
        f"{home_with_jars}/jars/spark-tags_2.13-4.3.0.jar",
        os.path.abspath(standalone_driver.__file__),
        "",
        "run",
        "/apps/job.py",
        "/jobs/r1.json",
        "--flag",
        "a b",
    ]


@pytest.mark.security
def test_python_cluster_mode_on_standalone_keeps_secrets_in_the_properties_file(home_with_jars: str) -> None:
    request = SubmitRequest(
        application="/apps/job.py",
        master="spark://127.0.0.1:7077",
        deploy_mode="cluster",
        conf={"spark.authenticate.secret": "sh-secret", "spark.executor.cores": "2"},
    )
    with spark_submit_command(request, spark_home=home_with_jars) as command:
        path = command[command.index("--properties-file") + 1]
        assert Path(path).read_text() == "spark.authenticate.secret=sh-secret\n"
        at = command.index("--class")
        assert command[at : at + 7] == [
            "--class",
            "org.apache.spark.deploy.PythonRunner",
            "--properties-file",
            path,
            "--load-spark-defaults",
            "--conf",
            "spark.executor.cores=2",
        ]
    assert "sh-secret" not in " ".join(command)


def test_python_cluster_mode_keeps_the_requests_python_and_ships_py_files(home_with_jars: str) -> None:
    request = SubmitRequest(
        application="/apps/job.py",
        master="spark://h1:7077,h2:7077",
        deploy_mode="cluster",
        conf={
            "spark.pyspark.python": "/opt/py/bin/python",
            "spark.pyspark.driver.python": "/opt/py/bin/python",
            "spark.files": "/data/lookup.csv",
        },
        py_files=["/apps/deps.zip", "/apps/util.py"],
    )
    command = build_spark_submit_command(request, spark_home=home_with_jars)
    assert command[command.index("--class") : command.index("/apps/job.py") + 1] == [
        "--class",
        "org.apache.spark.deploy.PythonRunner",
        "--conf",
        "spark.files=/data/lookup.csv,/apps/deps.zip,/apps/util.py",
        "--conf",
        "spark.master.rest.enabled=false",
        "--conf",
        "spark.pyspark.driver.python=/opt/py/bin/python",
        "--conf",
        "spark.pyspark.python=/opt/py/bin/python",
        "--conf",
        "spark.standalone.submit.waitAppCompletion=true",
        "--conf",
        "spark.submit.pyFiles=/apps/deps.zip,/apps/util.py",
        f"{home_with_jars}/jars/spark-tags_2.13-4.3.0.jar",
        os.path.abspath(standalone_driver.__file__),
        "/apps/deps.zip,/apps/util.py",
        "run",
        "/apps/job.py",
    ]
    # spark-submit refuses --py-files for a JVM primary resource; the conf above replaces it.
    assert "--py-files" not in command


@pytest.mark.parametrize(
    ("master", "application"),
    [("spark://h:7077", "/apps/job.jar"), ("yarn", "/apps/job.py"), ("k8s://https://k:6443", "local:///job.py")],
)
def test_other_cluster_mode_submissions_are_plain_spark_submit(
    home_with_jars: str, master: str, application: str
) -> None:
    request = SubmitRequest(application=application, master=master, deploy_mode="cluster", py_files=["/a/b.zip"])
    assert build_spark_submit_command(request, spark_home=home_with_jars) == [
        f"{home_with_jars}/bin/spark-submit",
        "--master",
        master,
        "--deploy-mode",
        "cluster",
        "--py-files",
        "/a/b.zip",
        application,
    ]


def test_python_runner_jar_is_the_installed_spark_tags_jar(fake_home: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    jar = python_runner_jar()
    assert os.path.basename(jar).startswith("spark-tags_") and os.path.isfile(jar)
    with pytest.raises(SparkEnvironmentError, match="spark-tags"):
        python_runner_jar(fake_home)


def test_request_is_frozen_and_copies_its_inputs() -> None:
    conf = {"spark.a": "1"}
    args = ["x"]
    request = SubmitRequest(application="a.py", master="local", conf=conf, application_args=args)
    conf["spark.b"] = "2"
    args.append("y")
    assert dict(request.conf) == {"spark.a": "1"}
    assert request.application_args == ("x",)
    with pytest.raises(AttributeError):
        request.master = "yarn"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(request)) == request
    assert copy.deepcopy(request) == request


def test_validate_master_uses_the_one_parser() -> None:
    # Spark accepts both; the old submit-side pattern refused them (the launchers' parser is the only one now).
    assert validate_master("local-cluster[2, 1, 1024]") == "local-cluster[2, 1, 1024]"
    assert validate_master("k8s://api-server") == "k8s://api-server"
    with pytest.raises(ValueError, match="is not a Spark master URL"):
        validate_master("mesos://host:5050")


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"master": "local[x]"}, "is not a Spark master URL"),
        ({"deploy_mode": "remote"}, "deploy_mode must be 'client' or 'cluster'"),
        ({"deploy_mode": "cluster"}, "not possible with master 'local\\[2\\]'"),
        ({"deploy_mode": "cluster", "master": "local-cluster[2,1,1024]"}, "not possible with master"),
        ({"deploy_mode": "cluster", "master": "spark://h:7077", "application": "job.py"}, "application: 'job.py'"),
        (
            {"deploy_mode": "cluster", "master": "spark://h:7077", "py_files": ["deps.zip"]},
            "py_files: 'deps.zip' must be an absolute local path",
        ),
        ({"application": ""}, "application"),
        ({"conf": {"spark.a=b": "c"}}, "invalid Spark conf key"),
        ({"conf": {"": "c"}}, "invalid Spark conf key"),
        ({"py_files": ["a.py,b.py"]}, "no comma"),
        ({"driver_memory": "lots"}, "invalid driver_memory"),
        ({"driver_memory": "0g"}, "invalid driver_memory"),
    ],
)
def test_invalid_requests(fake_home: str, changes: dict[str, object], match: str) -> None:
    fields: dict[str, object] = {"application": "/apps/job.py", "master": "local[2]"} | changes
    request = SubmitRequest(**fields)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=match):
        build_spark_submit_command(request, spark_home=fake_home)


@pytest.mark.parametrize("memory", ["512m", "2g", "2G", "1024", "4gb", "1t"])
def test_valid_driver_memory(fake_home: str, memory: str) -> None:
    request = SubmitRequest(application="a.py", master="local", driver_memory=memory)
    assert build_spark_submit_command(request, spark_home=fake_home)[-3:-1] == ["--driver-memory", memory]


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("spark.ssl.keyStorePassword", True),
        ("spark.authenticate.secret", True),
        ("spark.hadoop.fs.s3a.access.key", True),
        ("spark.hadoop.fs.s3a.secret.key", True),
        ("spark.hadoop.fs.s3a.session.token", True),
        ("spark.hadoop.fs.azure.account.key.acct.blob.core.windows.net", True),
        ("spark.hadoop.google.cloud.auth.service.account.json.keyfile", True),  # Airflow's service_account
        ("spark.kubernetes.authenticate.driver.oauthToken", True),
        ("spark.hadoop.fs.gs.auth.service.account.private.key", True),
        ("SPARK_CREDENTIALS_FILE", True),
        ("spark.hadoop.aws.accessKey", True),
        ("spark.executor.memory", False),
        ("spark.sql.shuffle.partitions", False),
        ("spark.keystore.path", False),
    ],
)
def test_is_secret_key(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


_SECRET_REQUEST_CONF = {
    "spark.hadoop.fs.s3a.secret.key": "s3cr3t",
    "spark.hadoop.fs.s3a.access.key": "AKIA123",
    "spark.ssl.keyPassword": "pw=with=equals",
    "spark.executor.memory": "2g",
}


@pytest.mark.security
def test_secret_conf_goes_to_the_properties_file_never_the_command(fake_home: str) -> None:
    request = SubmitRequest(
        application="/apps/job.py",
        master="local[2]",
        conf=_SECRET_REQUEST_CONF,
        application_args=["--conf", "spark.app.setting=1"],
    )
    with spark_submit_command(request, spark_home=fake_home) as command:
        path = command[command.index("--properties-file") + 1]
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert Path(path).read_text() == (
            "spark.hadoop.fs.s3a.access.key=AKIA123\n"
            "spark.hadoop.fs.s3a.secret.key=s3cr3t\n"
            "spark.ssl.keyPassword=pw\\=with\\=equals\n"
        )
        assert command == [
            f"{fake_home}/bin/spark-submit",
            "--master",
            "local[2]",
            "--deploy-mode",
            "client",
            "--properties-file",
            path,
            "--load-spark-defaults",
            "--conf",
            "spark.executor.memory=2g",
            "/apps/job.py",
            "--conf",
            "spark.app.setting=1",
        ]
        # The logged command is the command: the file is named by its path, no value is there to mask.
        assert redacted_command(command) == command
    assert not os.path.exists(path)
    assert not os.path.exists(os.path.dirname(path))
    joined = " ".join(command)
    assert "s3cr3t" not in joined and "AKIA123" not in joined and "pw=with" not in joined


def test_no_secrets_no_properties_file(fake_home: str) -> None:
    request = SubmitRequest(application="/apps/job.py", master="local[2]", conf={"spark.executor.memory": "2g"})
    with spark_submit_command(request, spark_home=fake_home) as command:
        assert command == build_spark_submit_command(request, spark_home=fake_home)
    assert "--properties-file" not in command


@pytest.mark.security
def test_a_command_with_secrets_and_no_file_is_refused_naming_the_keys_not_the_values(fake_home: str) -> None:
    request = SubmitRequest(application="/apps/job.py", master="local[2]", conf=_SECRET_REQUEST_CONF)
    with pytest.raises(ValueError, match="never go on spark-submit's command line") as caught:
        build_spark_submit_command(request, spark_home=fake_home)
    message = str(caught.value)
    assert "spark.hadoop.fs.s3a.secret.key" in message and "spark.ssl.keyPassword" in message
    assert "s3cr3t" not in message and "AKIA123" not in message and "pw=with" not in message


def test_redacted_command_handles_equals_and_short_forms() -> None:
    assert redacted_command(["spark-submit", "--conf=spark.auth.token=abc", "-c", "my.password=x", "a.py"]) == [
        "spark-submit",
        "--conf=spark.auth.token=***",
        "-c",
        "my.password=***",
        "a.py",
    ]


def test_submit_env(fake_home: str) -> None:
    request = SubmitRequest(application="a.py", master="local[2]", env={"SPARK_LOCAL_IP": "127.0.0.1"})
    # What pyspark leaves in os.environ after this process opened a Spark Connect session (a warm region).
    connect_client = {"SPARK_CONNECT_MODE_ENABLED": "1", "SPARK_REMOTE": "sc://127.0.0.1:15002"}
    base = {"PATH": "/usr/bin", "SPARK_HOME": "/elsewhere", **connect_client}
    env = build_spark_submit_env(request, base=base, spark_home=fake_home)
    assert env == {
        "PATH": "/usr/bin",
        "SPARK_HOME": fake_home,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LAUNCHER_OPTS": LAUNCHER_JAVA_OPTIONS,  # spark-class's launcher JVM: C1 alone
    }


def test_a_users_own_launcher_options_win(fake_home: str) -> None:
    request = SubmitRequest(application="a.py", master="local[2]")
    env = build_spark_submit_env(request, base={"SPARK_LAUNCHER_OPTS": "-Xmx256m"}, spark_home=fake_home)
    assert env["SPARK_LAUNCHER_OPTS"] == "-Xmx256m"


def test_submit_env_for_a_remote_cluster_leaves_the_python_of_workers_alone(fake_home: str) -> None:
    request = SubmitRequest(
        application="a.py", master="spark://h:7077", env={"PYSPARK_DRIVER_PYTHON": "/opt/py/bin/python"}
    )
    env = build_spark_submit_env(request, base={}, spark_home=fake_home)
    assert env == {
        "SPARK_HOME": fake_home,
        "PYSPARK_DRIVER_PYTHON": "/opt/py/bin/python",
        "SPARK_LAUNCHER_OPTS": LAUNCHER_JAVA_OPTIONS,
    }
