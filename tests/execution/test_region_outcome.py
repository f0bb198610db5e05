"""How a region run ends, one value per way: the table the operator maps to publish, defer or raise."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from airflow_provider_finegrained.capacity import CapacityUnavailable
from airflow_provider_finegrained.execution.capacity_gate import CapacityImpossible, CapacityWait
from airflow_provider_finegrained.execution.region_context import RegionDeferral, RunFacts, Succeeded
from airflow_provider_finegrained.execution.region_errors import StageFailedError
from airflow_provider_finegrained.execution.region_outcome import (
    AwaitApplication,
    AwaitCapacity,
    Failed,
    RegionOutcome,
    outcome_of,
)
from tests.launchers.test_remote import HANDLE

DONE = Succeeded({}, {})
FACTS = RunFacts({"mode": "cold"})


def raises(exc: Exception) -> Callable[[], Succeeded]:
    def run() -> Succeeded:
        raise exc

    return run


def test_a_region_that_ran_through_succeeds_with_its_records_and_traces() -> None:
    assert outcome_of(lambda: DONE) is DONE


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (CapacityImpossible("no worker has 64 cores"), lambda e: Failed(e, final=True)),
        (StageFailedError("region failed in stage 'b'"), lambda e: Failed(e)),
        (CapacityUnavailable("master unreachable"), lambda e: Failed(e)),
        (RegionDeferral(HANDLE, FACTS), lambda _: AwaitApplication(HANDLE, FACTS)),
    ],
    ids=["impossible-is-final", "stage-failed", "capacity-unreadable", "application-runs-on"],
)
def test_each_way_a_region_stops_is_one_outcome(
    error: Exception, expected: Callable[[Exception], RegionOutcome]
) -> None:
    assert outcome_of(raises(error)) == expected(error)


def test_waiting_for_capacity_keeps_what_was_asked() -> None:
    wait = CapacityWait("4 cores free, 8 asked", request=None)  # type: ignore[arg-type]
    outcome = outcome_of(raises(wait))
    assert outcome == AwaitCapacity(wait)
    assert isinstance(outcome, AwaitCapacity) and outcome.wait.message == "4 cores free, 8 asked"


def test_an_interrupt_is_not_an_outcome() -> None:
    with pytest.raises(KeyboardInterrupt):
        outcome_of(raises(KeyboardInterrupt()))  # type: ignore[arg-type]
