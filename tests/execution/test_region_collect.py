"""After the application ended: the stage that broke is named first, else how the application ended."""

from __future__ import annotations

import logging
import re

from airflow_provider_finegrained.execution.region_collect import failure_of
from airflow_provider_finegrained.execution.region_errors import StageFailedError
from airflow_provider_finegrained.execution.region_outcome import Failed
from airflow_provider_finegrained.launchers.base import LaunchResult
from airflow_provider_finegrained.runtime.job import StageStatus

LOG = logging.getLogger(__name__)


def ended(returncode: int, tail: tuple[str, ...] = ()) -> LaunchResult:
    return LaunchResult(returncode=returncode, application_id=None, duration_s=1.0, tail=tail)


OK = {"a": StageStatus("a", "success"), "b": StageStatus("b", "success")}


def test_a_region_whose_stages_succeeded_on_a_clean_exit_is_no_failure() -> None:
    assert failure_of("region-1", ["a", "b"], OK, ended(0), LOG) is None


def message(failed: Failed | None) -> str:
    assert failed is not None and isinstance(failed.error, StageFailedError)
    return str(failed.error)


def test_the_failed_stage_is_named_even_when_spark_submit_exited_badly() -> None:
    statuses = {**OK, "b": StageStatus("b", "failed", error="division by zero")}
    failed = failure_of("region-1", ["a", "b"], statuses, ended(1), LOG)
    assert re.match("region region-1 failed in stage 'b': division by zero", message(failed))


def test_an_application_that_ended_before_the_stages_reported_says_how_and_its_last_lines() -> None:
    result = ended(0, ("line 1", "line 2"))
    killed = failure_of("region-1", ["a"], {}, ended(1), LOG, ended="application x ended killed")
    assert re.match("region region-1: application x ended killed before the stages", message(killed))
    exited = failure_of("region-1", ["a"], {}, ended(3, result.tail), LOG)
    assert re.search(r"spark-submit exited with code 3(.|\n)*line 1\nline 2", message(exited))
