"""What a region's driver and its leader say when the SparkContext does not start (runtime/driver.py,
execution/region_errors.py): the error's own line, the exit code that lets the leader submit again."""

from __future__ import annotations

import pytest

from airflow_provider_finegrained.execution.region_errors import not_started, start_failure
from airflow_provider_finegrained.launchers.base import LaunchResult
from airflow_provider_finegrained.runtime.driver import start_error
from airflow_provider_finegrained.runtime.job import CONTEXT_DID_NOT_START, CONTEXT_NOT_STARTED


class Py4JJavaError(Exception):
    """As py4j words it: the call on the first line, the Java exception after ': ' on the next."""


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (
            Py4JJavaError(
                "An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
                ": java.util.ConcurrentModificationException\n\tat java.base/java.util.ArrayList..."
            ),
            "Py4JJavaError: java.util.ConcurrentModificationException",
        ),
        (RuntimeError("Java gateway process exited before sending its port number"), "RuntimeError: Java gateway "
         "process exited before sending its port number"),
        (ValueError(""), "ValueError: "),
        (OSError("\n\n  first words  \nmore"), "OSError: first words"),
    ],
)  # fmt: skip
def test_the_start_error_is_the_exceptions_own_line(error: Exception, said: str) -> None:
    assert start_error(error) == said


def result(returncode: int, tail: tuple[str, ...] = (), killed: bool = False) -> LaunchResult:
    return LaunchResult(returncode=returncode, application_id=None, duration_s=1.0, tail=tail, killed=killed)


@pytest.mark.parametrize(
    ("launched", "again", "why"),
    [
        (result(CONTEXT_NOT_STARTED, (f"[finegrained] {CONTEXT_DID_NOT_START}: Py4JJavaError: boom",)), True,
         "Py4JJavaError: boom"),
        (result(CONTEXT_NOT_STARTED), True, f"exit code {CONTEXT_NOT_STARTED}"),
        (result(CONTEXT_NOT_STARTED, killed=True), False, f"exit code {CONTEXT_NOT_STARTED}"),
        (result(1, (f"[finegrained] {CONTEXT_DID_NOT_START}: printed, but another code",)), False,
         "printed, but another code"),
        (result(0), False, "exit code 0"),
    ],
)  # fmt: skip
def test_only_a_driver_that_said_so_with_its_exit_code_is_submitted_again(
    launched: LaunchResult, again: bool, why: str
) -> None:
    assert not_started(launched) is again
    assert start_failure(launched) == why
