"""The Java check of ``test_connection``: Java 17+ on this machine, with or without the provider's Spark helpers."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

MINIMUM_JAVA = 17


def java_check(java_home: str | None) -> tuple[bool, str]:
    """Java 17+ on this machine: spark-submit is a JVM program even when the cluster is elsewhere."""
    try:
        from airflow_provider_finegrained.spark.java import SparkEnvironmentError, check_java
    except ImportError:
        return check_java_directly(java_home)
    try:
        info = check_java(java_home=java_home)
    except SparkEnvironmentError as exc:
        return False, str(exc)
    return True, f"Java {info.version} at {info.executable}"


def check_java_directly(java_home: str | None) -> tuple[bool, str]:
    """Run ``java -version`` and read its major version: the check where the Spark helpers cannot be imported."""
    home = java_home or os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java:
        return False, f"no java on PATH and JAVA_HOME is not set; Spark needs Java {MINIMUM_JAVA}+"
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"could not run {java} -version: {exc}"
    match = re.search(r'version\s+"(\d+)(?:\.(\d+))?[^"]*"', done.stderr + done.stdout)
    if match is None:
        return False, f"{java} -version printed no version; Spark needs Java {MINIMUM_JAVA}+"
    major = int(match.group(2)) if match.group(1) == "1" and match.group(2) else int(match.group(1))
    if major < MINIMUM_JAVA:
        return False, f"Spark needs Java {MINIMUM_JAVA} or newer, but {java} is Java {major}"
    return True, f"Java {major} at {java}"
