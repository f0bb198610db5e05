"""The errors a region run ends with, apart from the operator (which maps them to a task failure)."""

from __future__ import annotations

from collections.abc import Sequence

from airflow_provider_finegrained.launchers.base import LaunchResult
from airflow_provider_finegrained.runtime.job import CONTEXT_DID_NOT_START, CONTEXT_NOT_STARTED

__all__ = [
    "ApplicationStatusUnknown",
    "StageFailedError",
    "SubmitTimeoutError",
    "not_started",
    "start_failure",
    "submit_timeout_message",
]


class StageFailedError(RuntimeError):
    """A stage of a region failed; the message names the stage that broke."""


class ApplicationStatusUnknown(RuntimeError):
    """The stored application of an earlier try may still run: the leader neither reattaches nor submits."""


class SubmitTimeoutError(RuntimeError):
    """The region's application did not end within its leader's ``submit_timeout``; it was killed."""


def submit_timeout_message(leader: str, region: str, members: Sequence[str], timeout_s: float | None, what: str) -> str:
    """The error of a region whose application outlived its leader's ``submit_timeout`` (any path, any mode)."""
    return (
        f"stage {leader!r}: region {region} (stages {', '.join(members)}) did not end within submit_timeout "
        f"({timeout_s or 0:g} s after its submission): {what}"
    )


def not_started(result: LaunchResult) -> bool:
    """The driver said its SparkContext did not start, so no stage ran (``runtime.driver``)."""
    return result.returncode == CONTEXT_NOT_STARTED and not result.killed


def start_failure(result: LaunchResult) -> str:
    """The driver's own line on why its SparkContext did not start, else its exit code."""
    said = [line for line in result.tail if CONTEXT_DID_NOT_START in line]
    return said[-1].split(CONTEXT_DID_NOT_START, 1)[1].strip(" :") if said else f"exit code {result.returncode}"
